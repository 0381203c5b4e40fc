/*
 * The script a run's ECS task runs (docs/aws.md "Runs").  The task's
 * command fetches it from a presigned URL and runs it with sh; it needs sh,
 * curl and the usual POSIX tools (find, stat, sort, grep, cut, tail, head) in the
 * image.  It
 *   1. syncs the workspace prefix into WORKDIR: one presigned GET per object
 *      (mode and mtime from its x-amz-meta-* headers); a failure here ends
 *      the task with 125 before the command runs, and nothing is written back;
 *   2. runs the command under the shell kit's journal wrapper (providers/sh),
 *      copying the journal's new bytes to stdout as they come (the task's log
 *      stream is the run's journal); TERM (StopTask) signals the command's
 *      process group;
 *   3. syncs back what changed (a stat listing before and after): changed or
 *      new files and directories through the POST policy (any key under the
 *      prefix), deleted ones with their presigned DELETE URL;
 *   4. exits with the command's status (exit N: N, signal N: 128+N), or 125
 *      with a "sandboxfs:" journal line when the sync back failed.
 * Values come in as single-quoted assignments at the top; the manifest
 * ("KIND GETURL DELURL PATH" lines, "-" for no URL) is a quoted here-document.
 */
#include "aws.h"

#include <errno.h>
#include <string.h>

#include "../sh/sh.h"
#include "../strbuf.h"

static const char job_body[] =
    "say() { printf 'sandboxfs: %s\\n' \"$*\"; }\n"
    /* StopTask before the command runs: nothing to write back */
    "trap 'exit 143' TERM\n"
    "mkdir -p \"$W\" \"$R\" && cd \"$W\" || { say \"cannot enter the workspace $W\"; exit 125; "
    "}\n"
    ": >\"$R/urls\"; bad=0\n"
    "while IFS= read -r l; do\n"
    "  k=${l%% *}; l=${l#* }; g=${l%% *}; l=${l#* }; x=${l%% *}; p=${l#* }\n"
    "  printf '%s %s\\n' \"$x\" \"$p\" >>\"$R/urls\"\n"
    "  if [ \"$k\" = d ]; then mkdir -p \"./$p\" || bad=1; o=/dev/null; else\n"
    "  case $p in */*) mkdir -p \"./${p%/*}\" ;; esac; o=\"./$p\"; fi\n"
    "  [ \"$g\" = - ] && continue\n"
    "  if curl -fsS -D \"$R/h\" -o \"$o\" \"$g\" 2>>\"$R/sync.log\"; then\n"
    "    m=$(grep -i '^x-amz-meta-mode:' \"$R/h\" | tr -dc 0-7)\n"
    "    t=$(grep -i '^x-amz-meta-mtime:' \"$R/h\" | tr -dc 0-9)\n"
    "    [ -n \"$m\" ] || m=0\n"
    /* a directory's mode once its files are in (a 0500 one would refuse them) */
    "    if [ \"$k\" = d ]; then printf '%s %s\\n' \"$m\" \"$p\" >>\"$R/dmodes\"; continue; fi\n"
    "    [ \"$m\" = 0 ] || chmod \"$(printf %o $((0$m & 07777)))\" \"./$p\"\n"
    "    [ -n \"$t\" ] && touch -d \"@$t\" \"./$p\" 2>/dev/null\n"
    "  else say \"sync in: cannot fetch $p\"; bad=1; fi\n"
    "done <<'SFS_MANIFEST_END'\n"
    "%MANIFEST%"
    "SFS_MANIFEST_END\n"
    "[ -f \"$R/dmodes\" ] && while read -r m p; do\n"
    "  [ \"$m\" = 0 ] || chmod \"$(printf %o $((0$m & 07777)))\" \"./$p\"\n"
    "done <\"$R/dmodes\"\n"
    "[ $bad = 0 ] || { say 'sync in failed: the command did not run'; exit 125; }\n"
    "snap() { find . -mindepth 1 -type d -exec stat -c 'd %a 0 %n' {} + ; "
    "find . -mindepth 1 -type f -exec stat -c 'f %a %Y.%s %n' {} + ; }\n"
    "snap | LC_ALL=C sort >\"$R/before\"\n"
    "%WRAPPER% &\n"
    "wp=$!; off=0\n"
    "pump() { j=\"$R/run/journal\"; [ -f \"$j\" ] || return 0; sz=$(wc -c <\"$j\"); "
    "[ \"$sz\" -gt \"$off\" ] || return 0; tail -c +$((off + 1)) \"$j\" | head -c $((sz - off)); "
    "off=$sz; }\n"
    "trap '[ -s \"$R/run/pid\" ] && kill -TERM -\"$(cat \"$R/run/pid\")\" 2>/dev/null' TERM\n"
    "while kill -0 $wp 2>/dev/null; do pump; sleep 0.2; done\n"
    "wait $wp 2>/dev/null; pump\n"
    "st=$(cat \"$R/run/status\" 2>/dev/null); code=${st#* }\n"
    "case $st in 'exit '*) ;; 'signal '*) code=$((128 + code)) ;; *) code=125 ;; esac\n"
    "up() {\n"
    "  t=; [ -n \"$TOK\" ] && t=\"X-Amz-Security-Token=$TOK\"\n"
    "  curl -fsS -o /dev/null --form-string \"key=$ROOT$1\" --form-string "
    "\"x-amz-meta-mode=$3\" --form-string \"x-amz-meta-mtime=$4\" --form-string "
    "X-Amz-Algorithm=AWS4-HMAC-SHA256 --form-string \"X-Amz-Credential=$CRED\" --form-string "
    "\"X-Amz-Date=$ADATE\" ${t:+--form-string} ${t:+\"$t\"} --form-string \"Policy=$POL\" "
    "--form-string \"X-Amz-Signature=$SIG\" -F 'file=@-' \"$BURL\" <\"$2\" "
    "2>>\"$R/sync.log\" || { say \"sync back: cannot upload $1\"; bad=1; }\n"
    "}\n"
    "snap | LC_ALL=C sort >\"$R/after\"\n"
    /* lines only in after (no comm: busybox builds lack it) */
    "grep -vxF -f \"$R/before\" \"$R/after\" >\"$R/up\"\n"
    "while IFS= read -r l; do\n"
    "  k=${l%% *}; l=${l#* }; a=${l%% *}; l=${l#* }; s=${l%% *}; p=${l#* }; p=${p#./}\n"
    "  if [ \"$k\" = d ]; then up \"$p/\" /dev/null \"$(printf %o $((040000 | 0$a)))\" "
    "\"$(date +%s)\"\n"
    "  else up \"$p\" \"./$p\" \"$(printf %o $((0100000 | 0$a)))\" \"${s%.*}\"; fi\n"
    "done <\"$R/up\"\n"
    "cut -d' ' -f4- \"$R/before\" | LC_ALL=C sort >\"$R/bn\"\n"
    "cut -d' ' -f4- \"$R/after\" | LC_ALL=C sort >\"$R/an\"\n"
    "grep -vxF -f \"$R/an\" \"$R/bn\" >\"$R/gone\"\n"
    "while IFS= read -r l; do\n"
    "  x=${l%% *}; p=${l#* }\n"
    "  [ \"$x\" = - ] && continue\n"
    "  grep -qxF -- \"./$p\" \"$R/gone\" || continue\n"
    "  curl -fsS -o /dev/null -X DELETE \"$x\" 2>>\"$R/sync.log\" || "
    "{ say \"sync back: cannot delete $p\"; bad=1; }\n"
    "done <\"$R/urls\"\n"
    "if [ $bad != 0 ]; then say \"sync back incomplete (the command's status: $st)\"; "
    "sed 's/^/sandboxfs: /' \"$R/sync.log\" | tail -n 5; exit 125; fi\n"
    "exit $code\n";

static int assign(struct sfs_buf *b, const char *name, const char *value)
{
	int rc = sfs_buf_printf(b, "%s=", name);
	if (!rc)
		rc = sfs_sh_quote(b, value ? value : "", strlen(value ? value : ""));
	return rc ? rc : sfs_buf_addc(b, '\n');
}

int aws_job_manifest_add(struct sfs_buf *m, bool dir, const char *get_url, const char *del_url,
			 const char *path)
{
	if (strchr(path, '\n') || !strcmp(path, "SFS_MANIFEST_END"))
		return -EINVAL;
	/* an object put by someone else as "../x" must not land outside the
	 * workspace in the task (nor can the remote layer show it) */
	for (const char *seg = path; *seg;) {
		size_t n = strcspn(seg, "/");
		if (!n || (n == 1 && seg[0] == '.') || (n == 2 && !strncmp(seg, "..", 2)))
			return -EINVAL;
		seg += n + (seg[n] == '/');
	}
	return sfs_buf_printf(m, "%c %s %s %s\n", dir ? 'd' : 'f', get_url ? get_url : "-",
			      del_url ? del_url : "-", path);
}

int aws_job_script(const struct aws_job *j, struct sfs_buf *out, struct sfs_err *err)
{
	int rc = sfs_buf_adds(out, "#!/bin/sh\n# sandboxfs: one run's ECS task (generated)\n");
	if (!rc)
		rc = assign(out, "W", j->workdir);
	if (!rc)
		rc = assign(out, "R", j->rundir);
	if (!rc)
		rc = assign(out, "ROOT", j->root);
	if (!rc)
		rc = assign(out, "BURL", j->post->url);
	if (!rc)
		rc = assign(out, "CRED", j->post->credential);
	if (!rc)
		rc = assign(out, "ADATE", j->post->date);
	if (!rc)
		rc = assign(out, "POL", j->post->policy);
	if (!rc)
		rc = assign(out, "SIG", j->post->signature);
	if (!rc)
		rc = assign(out, "TOK", j->token);
	const char *t = job_body;
	while (!rc && *t) {
		const char *mark = strchr(t, '%');
		size_t n = mark ? (size_t)(mark - t) : strlen(t);
		rc = sfs_buf_add(out, t, n);
		t += n;
		if (rc || !*t)
			break;
		if (!strncmp(t, "%MANIFEST%", 10)) {
			rc = sfs_buf_add(out, j->manifest ? j->manifest : "",
					 j->manifest ? strlen(j->manifest) : 0);
			t += 10;
		} else if (!strncmp(t, "%WRAPPER%", 9)) {
			rc = sfs_buf_adds(out, j->wrapper);
			t += 9;
		} else {
			rc = sfs_buf_addc(out, '%');
			t++;
		}
	}
	if (rc)
		return sfs_errf(err, rc, "aws: cannot build the task's script (%s)", strerror(-rc));
	return 0;
}
