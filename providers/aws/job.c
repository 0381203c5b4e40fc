/*
 * The script a run's ECS task runs (docs/aws.md "Runs").  The task's
 * command fetches it from a presigned URL and runs it with sh; it needs sh,
 * curl and the usual POSIX tools (awk, find, stat, sort, grep, cut, sed, tail,
 * head, wc) in the image.  It
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
 * Each sync is one curl (a -K config of many transfers, PAR at once) whose
 * lists awk makes and reads: a curl per file cost a workspace of 1000 files
 * 1000 processes (and TLS handshakes) each way, and a shell loop over the
 * lists seconds of one-byte reads.  chmod, touch and mkdir run once per
 * value, on up to 200 paths.
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
    "trap 'exit 143' TERM\n"
    /* what the image must have, named before anything is done */
    "for t in curl awk sed sort grep find stat cut tail head wc; do\n"
    "  command -v $t >/dev/null || { say \"the image has no $t\"; exit 125; }\n"
    "done\n"
    "mkdir -p \"$W\" \"$R/h\" && cd \"$W\" || { say \"cannot enter the workspace $W\"; exit 125; "
    "}\n"
    "bad=0\n"
    /* awk for the loops over the workspace's files (sh's read takes a byte
     * per syscall): cq quotes for a curl config (\ and "); xfer starts one
     * transfer of a config (-K) of many, which writes "N STATUS" (N its
     * number) so that statuses pair with the list that made them in any order;
     * a program given two or more files reads the first into first[$1] = $2
     * and line[$0] */
    "AQ='function cq(s,  r, i, c) {\n"
    "  r = \"\"\n"
    "  for (i = 1; i <= length(s); i++) { c = substr(s, i, 1); if (c == \"\\\\\" || c == \"\\\"\") "
    "r = r \"\\\\\"; r = r c }\n"
    "  return r\n"
    "}\n"
    "function xfer(url, n) {\n"
    "  if (nx++) print \"next\"\n"
    "  print \"url = \\\"\" cq(url) \"\\\"\"; print \"globoff\"; print \"fail\"; print \"silent\"; "
    "print \"show-error\"\n"
    "  print \"write-out = \\\"\" n \" %{http_code}\\\\n\\\"\"\n"
    "}\n"
    "function rest(s, k) { while (k-- > 0) sub(/^[^ ]* /, \"\", s); return s }\n"
    "FILENAME == ARGV[1] && ARGC > 2 { first[$1] = $2; line[$0] = 1; next }\n"
    "'\n"
    /* curl 7.67 and later make them PAR at a time */
    "zp=; [ \"$PAR\" -gt 1 ] && curl -Z --no-progress-meter -V >/dev/null 2>&1 &&\n"
    "  zp=\"-Z --no-progress-meter --parallel-max $PAR\"\n"
    /* many CODES CONFIG: every transfer of CONFIG.  curl stops a config at a
     * local file it cannot read (with -Z every transfer then fails), so what did
     * not succeed goes again one at a time, and what a round leaves without a
     * line goes in another, past each such file; what never gets a 2xx line
     * failed */
    "many() {\n"
    "  : >\"$1\"; [ -s \"$2\" ] || return 0\n"
    "  curl $zp -K \"$2\" >\"$1\" 2>>\"$R/sync.log\"\n"
    "  cp \"$1\" \"$R/again.codes\"; cp \"$2\" \"$R/again.cfg\"; sel=bad\n"
    "  while :; do\n"
    "    SEL=$sel LC_ALL=C awk \"$AQ\"'function flush() {\n"
    "      if (buf != \"\" && (ENVIRON[\"SEL\"] == \"bad\" ? first[i] !~ /^2[0-9][0-9]$/ : !(i in "
    "first))) {\n"
    "        if (o++) print \"next\"; printf \"%s\", buf\n"
    "      }\n"
    "      buf = \"\"\n"
    "    }\n"
    "    $0 == \"next\" { flush(); next }\n"
    "    /^write-out = \"/ { i = $3; sub(/^\"/, \"\", i) }\n"
    "    { buf = buf $0 \"\\n\" }\n"
    "    END { flush() }' \"$R/again.codes\" \"$R/again.cfg\" >\"$R/todo.cfg\"\n"
    "    [ -s \"$R/todo.cfg\" ] || break\n"
    "    curl -K \"$R/todo.cfg\" >\"$R/again.codes\" 2>>\"$R/sync.log\"\n"
    "    [ -s \"$R/again.codes\" ] || break\n"
    "    cat \"$R/again.codes\" >>\"$1\"; mv \"$R/todo.cfg\" \"$R/again.cfg\"; sel=none\n"
    "  done\n"
    "}\n"
    /* "V PATH" lines, sorted: "$1 V ./PATH..." once per run of equal V (at
     * most 200 paths), so a workspace of many files costs a few chmods and
     * touches, not one each */
    "grouped() {\n"
    "  f=$1; v=; set --\n"
    "  while IFS= read -r l; do\n"
    "    if [ $# -ge 200 ] || { [ $# -gt 0 ] && [ \"${l%% *}\" != \"$v\" ]; }; then \"$f\" \"$v\" "
    "\"$@\"; set --; fi\n"
    "    v=${l%% *}; set -- \"$@\" \"./${l#* }\"\n"
    "  done\n"
    "  [ $# = 0 ] || \"$f\" \"$v\" \"$@\"\n"
    "}\n"
    "set_mode() { m=$1; shift; chmod \"$m\" \"$@\"; }\n"
    "set_time() { t=$1; shift; touch -d \"@$t\" \"$@\" 2>/dev/null; }\n"
    "make_dirs() { shift; mkdir -p \"$@\" || bad=1; }\n"
    "said() { [ ! -s \"$1\" ] || { sed 's/^/sandboxfs: /' \"$1\"; bad=1; }; }\n"
    /* sync in: every GET in one curl; the files' parent dirs made first, each
     * file's headers dumped to h/N for its mode and mtime */
    "cat >\"$R/manifest\" <<'SFS_MANIFEST_END'\n"
    "%MANIFEST%SFS_MANIFEST_END\n"
    ": >\"$R/dirs\"; : >\"$R/urls\"; : >\"$R/sync.log\"\n"
    "R=$R LC_ALL=C awk \"$AQ\"'{\n"
    "  k = $1; g = $2; p = rest($0, 3); d = p\n"
    "  print k \" \" $3 \" \" p >(ENVIRON[\"R\"] \"/urls\")\n"
    "  if (k == \"d\" || sub(\"/[^/]*$\", \"\", d)) print \"- \" d >(ENVIRON[\"R\"] \"/dirs\")\n"
    "  if (g == \"-\") next\n"
    "  n++; xfer(g, n)\n"
    "  print \"output = \\\"\" (k == \"d\" ? \"/dev/null\" : cq(\"./\" p)) \"\\\"\"\n"
    "  print \"dump-header = \\\"\" cq(ENVIRON[\"R\"] \"/h/\" n) \"\\\"\"\n"
    "}' \"$R/manifest\" >\"$R/in.cfg\" || bad=1\n"
    "LC_ALL=C sort -u \"$R/dirs\" >\"$R/sorted\"; grouped make_dirs <\"$R/sorted\"\n"
    "many \"$R/in.codes\" \"$R/in.cfg\"\n"
    ": >\"$R/modes\"; : >\"$R/times\"; : >\"$R/dmodes\"; : >\"$R/sizes\"\n"
    "R=$R DM=$(printf '%04o' $((0666 & ~0$(umask)))) LC_ALL=C awk \"$AQ\"'{\n"
    "  k = $1; g = $2; p = rest($0, 3)\n"
    "  if (g == \"-\") next\n"
    "  n++\n"
    "  if (first[n] !~ /^2[0-9][0-9]$/) { print \"sync in: cannot fetch \" p; next }\n"
    "  f = ENVIRON[\"R\"] \"/h/\" n; m = \"\"; t = \"\"; z = \"\"\n"
    "  while ((getline h <f) > 0) {\n"
    "    sub(/\\r$/, \"\", h); l = tolower(h); v = h; sub(/^[^:]*:[ \\t]*/, \"\", v)\n"
    "    if (l ~ /^x-amz-meta-mode:/) m = v; else if (l ~ /^x-amz-meta-mtime:/) t = v\n"
    "    else if (l ~ /^content-length:/) z = v\n"
    "  }\n"
    "  close(f)\n"
    "  m = (m ~ /^[0-7]+$/ && m + 0 != 0) ? substr(\"0000\" m, length(m) + 1) : \"\"\n"
    "  if (k == \"d\") { if (m != \"\") print m \" \" p >(ENVIRON[\"R\"] \"/dmodes\"); next }\n"
    "  if (z ~ /^[0-9]+$/) print z \" \" p >(ENVIRON[\"R\"] \"/sizes\")\n"
    "  if (m != \"\" && m != ENVIRON[\"DM\"]) print m \" \" p >(ENVIRON[\"R\"] \"/modes\")\n"
    "  if (t ~ /^[0-9]+$/) print t \" \" p >(ENVIRON[\"R\"] \"/times\")\n"
    "}' \"$R/in.codes\" \"$R/manifest\" >\"$R/in.bad\" || bad=1\n"
    "said \"$R/in.bad\"\n"
    /* directories' modes last, once everything is in them (a 0500 one would
     * refuse a file's touch by a non-root task) */
    "for s in modes:set_mode times:set_time dmodes:set_mode; do\n"
    "  LC_ALL=C sort \"$R/${s%:*}\" >\"$R/sorted\"; grouped \"${s#*:}\" <\"$R/sorted\"\n"
    "done\n"
    /* a listing is lines: a path with a newline (only the command can make
     * one; the manifest has none) is left out of it, and reported after the run;
     * a listing find could not finish deletes nothing */
    "NL='\n"
    "'\n"
    "snap() {\n"
    "  find . -mindepth 1 ! -path \"*$NL*\" -type d -exec stat -c 'd %a 0 %n' {} + >\"$1.raw\" &&\n"
    "    find . -mindepth 1 ! -path \"*$NL*\" -type f -exec stat -c 'f %a %Y.%s %n' {} + "
    ">>\"$1.raw\"\n"
    "  s=$?; LC_ALL=C sort \"$1.raw\" >\"$1\"; return $s\n"
    "}\n"
    /* a fetched file shorter than its Content-Length (a body cut off, a full
     * disk) is a failed fetch, whatever its status line said */
    "snap \"$R/before\" || { say 'sync in: cannot list the workspace'; bad=1; }\n"
    "LC_ALL=C awk \"$AQ\"'$1 == \"f\" { s = $3; sub(/^[^.]*\\./, \"\", s); p = rest($0, 3); delete "
    "line[s \" \" substr(p, 3)] }\n"
    "END { for (k in line) { sub(/^[^ ]* /, \"\", k); print \"sync in: cannot fetch \" k } }' "
    "\"$R/sizes\" \"$R/before\" >\"$R/in.bad\"\n"
    "said \"$R/in.bad\"\n"
    "[ $bad = 0 ] || { say 'sync in failed: the command did not run'; exit 125; }\n"
    "%WRAPPER% &\n"
    "wp=$!; off=0\n"
    "pump() { j=\"$R/run/journal\"; [ -f \"$j\" ] || return 0; sz=$(wc -c <\"$j\"); [ \"$sz\" -gt "
    "\"$off\" ] || return 0; tail -c +$((off + 1)) \"$j\" | head -c $((sz - off)); off=$sz; }\n"
    "trap '[ -s \"$R/run/pid\" ] && kill -TERM -\"$(cat \"$R/run/pid\")\" 2>/dev/null' TERM\n"
    "while kill -0 $wp 2>/dev/null; do pump; sleep 0.2; done\n"
    "wait $wp 2>/dev/null; pump\n"
    "st=$(cat \"$R/run/status\" 2>/dev/null); code=${st#* }\n"
    "case $st in 'exit '*) ;; 'signal '*) code=$((128 + code)) ;; *) code=125 ;; esac\n"
    /* sync back: every upload (POST policy; a directory marker's body an
     * empty file, as curl sends a device's chunked, which S3 refuses) and
     * DELETE in one curl */
    "lost=\n"
    "snap \"$R/after\" || { say 'sync back: cannot list the workspace: nothing is deleted'; bad=1; "
    "lost=1; }\n"
    "if find . -path \"*$NL*\" | grep -q .; then say 'sync back: a name with a newline cannot go "
    "to S3'; bad=1; fi\n"
    "LC_ALL=C awk \"$AQ\"'!($0 in line)' \"$R/before\" \"$R/after\" >\"$R/up\"\n"
    "cut -d' ' -f1,4- \"$R/before\" >\"$R/bn\"; cut -d' ' -f1,4- \"$R/after\" >\"$R/an\"\n"
    "LC_ALL=C awk \"$AQ\"'!($0 in line) { sub(/ \\.\\//, \" \"); print }' \"$R/an\" \"$R/bn\" "
    ">\"$R/gone\"\n"
    "[ -z \"$lost\" ] || : >\"$R/gone\"\n"
    ": >\"$R/empty\"; : >\"$R/what\"\n"
    "R=$R ROOT=$ROOT NOW=$(date +%s) BURL=$BURL CRED=$CRED ADATE=$ADATE POL=$POL SIG=$SIG TOK=$TOK "
    "LC_ALL=C awk \"$AQ\"'\n"
    "function form(name, value) { print \"form-string = \\\"\" cq(name \"=\" value) \"\\\"\" }\n"
    "FILENAME == ARGV[2] {\n"
    "  k = $1; a = $2; t = $3; p = rest($0, 3); sub(/^\\.\\//, \"\", p)\n"
    "  n++; xfer(ENVIRON[\"BURL\"], n); print \"output = \\\"/dev/null\\\"\"\n"
    "  if (k == \"d\") { p = p \"/\"; m = \"4\"; t = ENVIRON[\"NOW\"]; f = ENVIRON[\"R\"] "
    "\"/empty\" }\n"
    "  else { m = \"10\"; sub(/\\..*/, \"\", t); f = \"./\" p }\n"
    "  print \"upload \" p >(ENVIRON[\"R\"] \"/what\")\n"
    "  form(\"key\", ENVIRON[\"ROOT\"] p); form(\"x-amz-meta-mode\", m sprintf(\"%04d\", a))\n"
    "  form(\"x-amz-meta-mtime\", t); form(\"X-Amz-Algorithm\", \"AWS4-HMAC-SHA256\")\n"
    "  form(\"X-Amz-Credential\", ENVIRON[\"CRED\"]); form(\"X-Amz-Date\", ENVIRON[\"ADATE\"])\n"
    "  if (ENVIRON[\"TOK\"] != \"\") form(\"X-Amz-Security-Token\", ENVIRON[\"TOK\"])\n"
    "  form(\"Policy\", ENVIRON[\"POL\"]); form(\"X-Amz-Signature\", ENVIRON[\"SIG\"])\n"
    "  print \"form = \\\"\" cq(\"file=@\\\"\" cq(f) \"\\\";type=application/octet-stream\") "
    "\"\\\"\"\n"
    "  next\n"
    "}\n"
    "{\n"
    "  p = rest($0, 2)\n"
    "  if ($2 == \"-\" || !(($1 \" \" p) in line)) next\n"
    "  n++; xfer($2, n); print \"output = \\\"/dev/null\\\"\"; print \"request = \\\"DELETE\\\"\"\n"
    "  print \"delete \" p >(ENVIRON[\"R\"] \"/what\")\n"
    "}' \"$R/gone\" \"$R/up\" \"$R/urls\" >\"$R/up.cfg\" || bad=1\n"
    "many \"$R/up.codes\" \"$R/up.cfg\"\n"
    "LC_ALL=C awk \"$AQ\"'{ n++; if (first[n] !~ /^2[0-9][0-9]$/) print \"sync back: cannot \" $0 "
    "}' \"$R/up.codes\" \"$R/what\" >\"$R/up.bad\" || bad=1\n"
    "said \"$R/up.bad\"\n"
    "if [ $bad != 0 ]; then say \"sync back incomplete (the command's status: $st)\"; sed "
    "'s/^/sandboxfs: /' \"$R/sync.log\" | tail -n 5; exit 125; fi\n"
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
	if (!rc)
		rc = sfs_buf_printf(out, "PAR=%d\n", j->parallel > 1 ? j->parallel : 1);
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
