# The conformance suite's adapter for gcp (docs/conformance.md, docs/gcp.md):
# tests/emulators/gcp (Cloud Storage, Cloud Run Jobs, Cloud Logging and the
# metadata server's token on one port), or the real cloud with
# GOOGLE_APPLICATION_CREDENTIALS, SFS_GCP_BUCKET, SFS_GCP_PROJECT and
# SFS_GCP_REGION set (and SFS_GCP_EMULATOR unset).  The emulator's secret is
# the access token its metadata server hands out: every API call must carry it.

P_EMULATOR="${SFS_GCP_EMU:-$SFS_ROOT/tests/emulators/gcp/gcp_emulator.py}"
P_SKIP_REASON="no GOOGLE_APPLICATION_CREDENTIALS (with SFS_GCP_BUCKET, SFS_GCP_PROJECT, SFS_GCP_REGION) and no emulator"
P_EMU_BUCKET=sfs-conf-bucket

gcp_real_creds() {
	[ -n "${GOOGLE_APPLICATION_CREDENTIALS:-}" ] && [ -n "${SFS_GCP_BUCKET:-}" ] &&
		[ -n "${SFS_GCP_PROJECT:-}" ] && [ -n "${SFS_GCP_REGION:-}" ]
}

# p_mode: "emulator", "real", or "" (nothing to test against).
p_mode() {
	if [ -n "${SFS_GCP_EMULATOR:-}" ] || ! gcp_real_creds; then
		command -v python3 >/dev/null && [ -f "$P_EMULATOR" ] && echo emulator && return
		gcp_real_creds && echo real && return
		echo ""
		return
	fi
	echo real
}

p_emu_secret_args() { echo "--bucket $P_EMU_BUCKET --metadata-token $1"; }

# p_emu_env URL SECRET: every API and the metadata server at the emulator.
p_emu_env() {
	local hostport=${1#http://}
	export GCE_METADATA_HOST="$hostport" STORAGE_EMULATOR_HOST="$hostport"
	export CLOUDSDK_API_ENDPOINT_OVERRIDES_RUN="$1/" CLOUDSDK_API_ENDPOINT_OVERRIDES_LOGGING="$1/"
	unset GOOGLE_APPLICATION_CREDENTIALS GOOGLE_CLOUD_PROJECT GCLOUD_PROJECT
	P_NEW_OPTS="bucket=$P_EMU_BUCKET project=sfs-test-project region=us-central1 image=${SFS_DOCKER_IMAGE:-sandboxfs-test:latest}"
}

if [ -n "${SFS_GCP_BUCKET:-}" ]; then
	P_NEW_OPTS="bucket=$SFS_GCP_BUCKET project=${SFS_GCP_PROJECT:-} region=${SFS_GCP_REGION:-} image=${SFS_GCP_IMAGE:-busybox}"
fi

# the real secret: the key file's private key is what must never show
p_real_secret() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["private_key_id"])' "$GOOGLE_APPLICATION_CREDENTIALS"; }

P_CAPS='fs true
exec true
env true
ports false
backgroundProcesses false
writableStdin false
killableProcesses true
snapshots true
networkPolicy false
durableFilesystem true
fork false'
P_JOURNAL=poll
P_BULK_READ=false
P_GOOD_OPTS="cpu=1 memory=512Mi"
P_BAD_VALUE=memory=lots
P_BAD_VALUE_MSG="gcp: memory=lots: expected a size like 512Mi or 2Gi"
# a bucket named after TEXT: the API refuses it (no such bucket), its message redacted
p_failing_new_opts() { echo "bucket=$1"; }
P_LOG_CALL_RE='gcp: POST http://127.0.0.1:[0-9]*/upload/storage/v1/b/'
# object transfers and listings (uploads are /upload/storage/v1/b/...)
P_FILES_PATH=storage/v1/b/
P_SECRET_ENV=GCP_ACCESS_TOKEN
# source= works (one object, one execution unpacks it: tests/bats/gcp.bats),
# but the body's call count includes the setup snapshot, which reads every
# file back one call each (GCS has no bulk download)
P_NO_SOURCE="the setup snapshot after source= reads each file in a call of its own (no bulk download in the GCS API); gcp.bats tests source= itself"
