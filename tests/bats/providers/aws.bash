# The conformance suite's adapter for aws (docs/conformance.md):
# tests/emulators/aws (S3 + ECS + CloudWatch Logs on one port, tasks run in
# bubblewrap), or the real cloud with AWS credentials in the environment
# (AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY, or AWS_PROFILE) and
# SFS_AWS_NEW_OPTS naming what a sandbox needs there ("bucket=B cluster=C
# task_definition=F subnets=S1,S2 security_groups=G").

P_EMULATOR="${SFS_AWS_EMU:-$SFS_ROOT/tests/emulators/aws/aws_emulator.py}"
P_SKIP_REASON="no AWS credentials with SFS_AWS_NEW_OPTS, and no emulator (python3, curl and a working bwrap)"
P_EMU_KEY=AKIDSFSCONF

aws_real_creds() {
	{ [ -n "${AWS_ACCESS_KEY_ID:-}" ] || [ -n "${AWS_PROFILE:-}" ]; } && [ -n "${SFS_AWS_NEW_OPTS:-}" ]
}

# p_mode: "emulator", "real", or "" (nothing to test against).
p_mode() {
	if [ -n "${SFS_AWS_EMULATOR:-}" ] || ! aws_real_creds; then
		# tasks run in bubblewrap (without it one would use this host's /workspace)
		command -v python3 >/dev/null && command -v curl >/dev/null && [ -f "$P_EMULATOR" ] &&
			bwrap --ro-bind / / true 2>/dev/null && echo emulator && return
		aws_real_creds && echo real && return
		echo ""
		return
	fi
	echo real
}

p_emu_secret_args() {
	echo "--key $P_EMU_KEY:$1 --bucket bkt --cluster c1 --task-def fam:box:/sfs/runs:sfs --stop-timeout 3"
}

# p_emu_env URL SECRET: points sandboxfs (started after this) at the emulator.
p_emu_env() {
	export AWS_ENDPOINT_URL="$1" AWS_REGION=us-east-1
	export AWS_ACCESS_KEY_ID="$P_EMU_KEY" AWS_SECRET_ACCESS_KEY="$2"
	unset AWS_SESSION_TOKEN AWS_PROFILE AWS_ENDPOINT_URL_S3 AWS_ENDPOINT_URL_ECS AWS_ENDPOINT_URL_CLOUDWATCH_LOGS
	# no ~/.aws of the machine's user may leak in
	export AWS_SHARED_CREDENTIALS_FILE=/nonexistent/sfs-aws AWS_CONFIG_FILE=/nonexistent/sfs-aws
	P_NEW_OPTS="bucket=bkt cluster=c1 task_definition=fam subnets=subnet-1"
}

p_real_secret() { echo "${AWS_SECRET_ACCESS_KEY:-}"; }

# real mode: what a sandbox needs there
P_NEW_OPTS="${SFS_AWS_NEW_OPTS:-}"

# The caps this provider claims, each true proven by a test of the suite.
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
fork true'
P_JOURNAL=poll
P_GOOD_OPTS="cpu=512 memory=1024"
P_BAD_VALUE=cpu=lots
P_BAD_VALUE_MSG="aws: cpu=lots: expected a positive number"
# a bucket named TEXT: S3 refuses it (NoSuchBucket) naming it
p_failing_new_opts() { echo "bucket=$1"; }
P_LOG_CALL_RE='aws: s3: PUT http://127.0.0.1:.*/bkt/'
# S3 object URLs (ECS and Logs are POST /)
P_FILES_PATH=/bkt/
P_SECRET_ENV=AWS_SECRET_ACCESS_KEY
P_NO_STOP="provider aws does not support"
# S3 has neither of these (docs/aws.md)
P_NO_SYMLINKS="S3 objects are not symlinks"
P_NO_SOURCE="it has no bulk upload"
