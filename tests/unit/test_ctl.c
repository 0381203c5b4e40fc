/* ctl/: tokenizing, verb tables, error messages with carets, names, signals. */
#include "ctl/ctl.h"
#include "check.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

enum { V_NEW, V_RESUME, V_EXEC, V_KILL, V_FORK, V_ENV, V_STOP, V_ANY, V_BARE, V_NOUSAGE };

static const char *const new_keys[] = {"provider", "image", "source", "ref", "setup", "env.", NULL};
static const char *const resume_keys[] = {"provider", "id", NULL};
static const char *const fork_keys[] = {"from", NULL};

#define NEW_USAGE                                                                                  \
	"new NAME [provider=P] [image=I] [source=GIT-URL] [ref=REF] [setup=CMD]... [env.K=V]..."

static const struct ctl_verb table[] = {
    {V_NEW, "new", 1, 1, CTL_OPTS, new_keys, NEW_USAGE},
    {V_RESUME, "resume", 1, 1, CTL_OPTS, resume_keys, "resume NAME provider=P id=REMOTE-ID"},
    {V_EXEC, "exec", 0, -1, CTL_REST, NULL, "exec CMD..."},
    {V_KILL, "kill", 0, 2, 0, NULL, "kill [RUN] [SIGNAL]"},
    {V_FORK, "fork", 1, 1, CTL_OPTS, fork_keys, "fork NEWNAME [from=SNAPSHOT]"},
    {V_ENV, "env", 0, -1, CTL_OPTS | CTL_ANY_KEYS, NULL, "env K=V..."},
    {V_STOP, "stop", 0, 0, 0, NULL, "stop"},
    {V_ANY, "any", 0, -1, CTL_OPTS | CTL_ANY_KEYS, NULL, "any [WORD|K=V]..."},
    {V_BARE, "bare", 0, -1, CTL_OPTS, NULL, "bare [WORD]..."},
    {V_NOUSAGE, "nousage", 0, 0, 0, NULL, NULL},
    {0, NULL, 0, 0, 0, NULL, NULL},
};

/* Parses and expects success; the caller frees cmd. */
static int parse_ok(const char *line, struct ctl_cmd *cmd)
{
	struct sfs_err err = {0};
	int r = ctl_parse_line(table, line, cmd, &err);
	if (r)
		fprintf(stderr, "    unexpected error %d for [%s]: %s\n", r, line, err.msg);
	return r;
}

/* Parses and expects -EINVAL; returns the message in err. */
static int parse_err(const char *line, struct sfs_err *err)
{
	struct ctl_cmd cmd;
	sfs_err_clear(err);
	int r = ctl_parse_line(table, line, &cmd, err);
	CHECK(cmd.line == NULL && cmd.args == NULL && cmd.rest == NULL && cmd.opts.n == 0);
	ctl_cmd_free(&cmd);
	return r;
}

/* True when the message's caret (last line) sits under `token` in its echoed line. */
static int caret_under(const char *msg, const char *token)
{
	const char *caret_line = strrchr(msg, '\n');
	if (!caret_line || caret_line[strlen(caret_line) - 1] != '^')
		return 0;
	const char *echo = caret_line;
	while (echo > msg && echo[-1] != '\n')
		echo--;
	if (echo == msg)
		return 0;
	size_t col = strlen(caret_line + 1) - 1; /* pad is spaces here */
	return strncmp(echo + col, token, strlen(token)) == 0;
}

/* ---- ctl_tokenize ---- */

static char **words;
static int nwords;
static size_t *offsets;

static int tok(const char *line)
{
	struct sfs_err err = {0};
	ctl_words_free(words);
	free(offsets);
	words = NULL;
	offsets = NULL;
	int r = ctl_tokenize(line, &words, &nwords, &offsets, &err);
	if (r)
		fprintf(stderr, "    tokenize [%s]: %s\n", line, err.msg);
	return r;
}

static void tok_done(void)
{
	ctl_words_free(words);
	free(offsets);
	words = NULL;
	offsets = NULL;
}

static void test_tokenize_blanks(void)
{
	CHECK_INT(tok("a b  c"), 0);
	CHECK_INT(nwords, 3);
	CHECK_STREQ(words[0], "a");
	CHECK_STREQ(words[1], "b");
	CHECK_STREQ(words[2], "c");
	CHECK(words[3] == NULL);
	CHECK_INT(offsets[0], 0);
	CHECK_INT(offsets[1], 2);
	CHECK_INT(offsets[2], 5);

	CHECK_INT(tok(" \t kill\t3  TERM \t"), 0);
	CHECK_INT(nwords, 3);
	CHECK_STREQ(words[0], "kill");
	CHECK_STREQ(words[2], "TERM");
	CHECK_INT(offsets[0], 3);
	CHECK_INT(offsets[1], 8);
	CHECK_INT(offsets[2], 11);
	tok_done();
}

static void test_tokenize_empty(void)
{
	CHECK_INT(tok(""), 0);
	CHECK_INT(nwords, 0);
	CHECK(words != NULL && words[0] == NULL);
	CHECK_INT(tok(" \t  "), 0);
	CHECK_INT(nwords, 0);
	CHECK(words != NULL && words[0] == NULL);
	tok_done();
}

static void test_tokenize_single_quotes(void)
{
	CHECK_INT(tok("echo 'a  b' c"), 0);
	CHECK_INT(nwords, 3);
	CHECK_STREQ(words[1], "a  b");
	CHECK_INT(offsets[1], 5);
	CHECK_INT(offsets[2], 12);
	CHECK_INT(tok("'a\\b' 'x\"y' '$HOME'"), 0);
	CHECK_STREQ(words[0], "a\\b");
	CHECK_STREQ(words[1], "x\"y");
	CHECK_STREQ(words[2], "$HOME");
	CHECK_INT(tok("'it'\\''s'"), 0);
	CHECK_INT(nwords, 1);
	CHECK_STREQ(words[0], "it's");
	tok_done();
}

static void test_tokenize_double_quotes(void)
{
	CHECK_INT(tok("\"a b\" \"a\\\"b\" \"\\$x\" \"\\`\" \"\\\\\""), 0);
	CHECK_INT(nwords, 5);
	CHECK_STREQ(words[0], "a b");
	CHECK_STREQ(words[1], "a\"b");
	CHECK_STREQ(words[2], "$x");
	CHECK_STREQ(words[3], "`");
	CHECK_STREQ(words[4], "\\");
	/* other backslashes stay, as in sh */
	CHECK_INT(tok("\"\\n\\t\\'\" \"'\""), 0);
	CHECK_STREQ(words[0], "\\n\\t\\'");
	CHECK_STREQ(words[1], "'");
	tok_done();
}

static void test_tokenize_backslash(void)
{
	CHECK_INT(tok("a\\ b c\\'d \\\"e"), 0);
	CHECK_INT(nwords, 3);
	CHECK_STREQ(words[0], "a b");
	CHECK_STREQ(words[1], "c'd");
	CHECK_STREQ(words[2], "\"e");
	CHECK_INT(tok("x \\\\"), 0);
	CHECK_STREQ(words[1], "\\");
	/* a backslash at the very end is kept, as sh -c does */
	CHECK_INT(tok("a\\"), 0);
	CHECK_STREQ(words[0], "a\\");
	/* backslash-newline is a continuation; a bare newline separates */
	CHECK_INT(tok("ab\\\ncd e\nf"), 0);
	CHECK_INT(nwords, 3);
	CHECK_STREQ(words[0], "abcd");
	CHECK_STREQ(words[1], "e");
	CHECK_STREQ(words[2], "f");
	CHECK_INT(tok("a \\\n b \"x\\\ny\""), 0);
	CHECK_INT(nwords, 3);
	CHECK_STREQ(words[1], "b");
	CHECK_STREQ(words[2], "xy");
	tok_done();
}

static void test_tokenize_concatenation(void)
{
	CHECK_INT(tok("  a'b c'\"d e\"f\\ g '' \"\""), 0);
	CHECK_INT(nwords, 3);
	CHECK_STREQ(words[0], "ab cd ef g");
	CHECK_INT(offsets[0], 2);
	CHECK_STREQ(words[1], "");
	CHECK_STREQ(words[2], "");
	CHECK_INT(offsets[2], 21);
	tok_done();
}

static void test_tokenize_unterminated(void)
{
	struct sfs_err err = {0};
	char **w = (char **)1;
	int n = 7;
	size_t *off = (size_t *)1;
	CHECK_INT(ctl_tokenize("echo 'abc", &w, &n, &off, &err), -EINVAL);
	CHECK(w == NULL && n == 0 && off == NULL);
	CHECK_INT(err.code, -EINVAL);
	CHECK_STREQ(err.msg, "unterminated single quote\n  echo 'abc\n       ^");
	CHECK_INT(ctl_tokenize("a \"b\\\" c", &w, &n, NULL, &err), -EINVAL);
	CHECK_STREQ(err.msg, "unterminated double quote\n  a \"b\\\" c\n    ^");
	/* a quote inside the other kind is just a character */
	CHECK_INT(ctl_tokenize("\"it's\" 'say \"hi'", &w, &n, NULL, &err), 0);
	CHECK_INT(n, 2);
	ctl_words_free(w);
	/* err may be NULL */
	CHECK_INT(ctl_tokenize("'", &w, &n, NULL, NULL), -EINVAL);
}

static void test_tokenize_no_offsets(void)
{
	char **w;
	int n;
	CHECK_INT(ctl_tokenize("one two", &w, &n, NULL, NULL), 0);
	CHECK_INT(n, 2);
	CHECK_STREQ(w[1], "two");
	ctl_words_free(w);
	ctl_words_free(NULL);
}

static void test_tokenize_many_words(void)
{
	char line[1024] = "";
	for (int i = 0; i < 100; i++)
		strcat(line, i % 2 ? "xy " : "'a b' ");
	CHECK_INT(tok(line), 0);
	CHECK_INT(nwords, 100);
	CHECK_STREQ(words[98], "a b");
	CHECK_STREQ(words[99], "xy");
	CHECK(words[100] == NULL);
	CHECK_INT(offsets[99], 50 * 6 + 49 * 3);
	tok_done();
}

/* ---- ctl_parse_line ---- */

static void test_parse_blank(void)
{
	struct ctl_cmd cmd;
	struct sfs_err err = {0};
	CHECK_INT(ctl_parse_line(table, "", &cmd, &err), -ENODATA);
	CHECK_INT(ctl_parse_line(table, "  \t ", &cmd, &err), -ENODATA);
	CHECK(cmd.verb == NULL && cmd.line == NULL);
	CHECK_INT(err.code, 0);
	ctl_cmd_free(&cmd);
}

static void test_parse_positional(void)
{
	struct ctl_cmd cmd;
	CHECK_INT(parse_ok("kill", &cmd), 0);
	CHECK_INT(cmd.verb->id, V_KILL);
	CHECK_INT(cmd.nargs, 0);
	CHECK(cmd.args != NULL && cmd.args[0] == NULL);
	CHECK(cmd.rest == NULL);
	CHECK_STREQ(cmd.line, "kill");
	ctl_cmd_free(&cmd);

	CHECK_INT(parse_ok("  kill 3 'TERM'  ", &cmd), 0);
	CHECK_INT(cmd.nargs, 2);
	CHECK_STREQ(cmd.args[0], "3");
	CHECK_STREQ(cmd.args[1], "TERM");
	CHECK(cmd.args[2] == NULL);
	CHECK_STREQ(cmd.line, "  kill 3 'TERM'  ");
	CHECK_INT(cmd.opts.n, 0);
	ctl_cmd_free(&cmd);
	ctl_cmd_free(&cmd); /* freeing twice is harmless: cmd is zeroed */

	/* the verb itself may be quoted, as sh allows */
	CHECK_INT(parse_ok("'stop'", &cmd), 0);
	CHECK_INT(cmd.verb->id, V_STOP);
	ctl_cmd_free(&cmd);
}

static void test_parse_unknown_command(void)
{
	struct sfs_err err;
	CHECK_INT(parse_err("frob x", &err), -EINVAL);
	CHECK_INT(err.code, -EINVAL);
	CHECK_STREQ(err.msg, "unknown command \"frob x\"\n  frob x\n  ^");
	CHECK_INT(parse_err("  frob  x \t", &err), -EINVAL);
	CHECK_STREQ(err.msg, "unknown command \"frob  x\"\n    frob  x \t\n    ^");
	/* verbs are case-sensitive; an unknown verb wins over a bad quote later on */
	CHECK_INT(parse_err("KILL 'x", &err), -EINVAL);
	CHECK_STREQ(err.msg, "unknown command \"KILL 'x\"\n  KILL 'x\n  ^");
	CHECK_INT(parse_err("'' x", &err), -EINVAL);
	CHECK(strncmp(err.msg, "unknown command \"'' x\"", 22) == 0);
	/* a prefix of a verb is not the verb */
	CHECK_INT(parse_err("kil 3", &err), -EINVAL);
	CHECK_INT(parse_err("kill3", &err), -EINVAL);
	/* no table at all */
	struct ctl_cmd cmd;
	CHECK_INT(ctl_parse_line(NULL, "kill", &cmd, &err), -EINVAL);
	/* err may be NULL */
	CHECK_INT(ctl_parse_line(table, "frob", &cmd, NULL), -EINVAL);
}

static void test_parse_unknown_command_long(void)
{
	char line[400];
	memset(line, 'z', sizeof(line) - 1);
	line[sizeof(line) - 1] = '\0';
	struct sfs_err err;
	CHECK_INT(parse_err(line, &err), -EINVAL);
	CHECK(strlen(err.msg) < sizeof(err.msg) - 1); /* not truncated */
	CHECK(strstr(err.msg, "zzz...\"\n") != NULL);
	CHECK(caret_under(err.msg, "zzzz"));
}

static void test_parse_arg_counts(void)
{
	struct sfs_err err;
	CHECK_INT(parse_err("kill 3 TERM extra more", &err), -EINVAL);
	CHECK_STREQ(err.msg, "kill: too many arguments (usage: kill [RUN] [SIGNAL])\n"
			     "  kill 3 TERM extra more\n"
			     "              ^");
	CHECK_INT(parse_err("stop now", &err), -EINVAL);
	CHECK_STREQ(err.msg, "stop: too many arguments (usage: stop)\n  stop now\n       ^");
	CHECK_INT(parse_err("fork", &err), -EINVAL);
	CHECK_STREQ(err.msg, "fork: too few arguments (usage: fork NEWNAME [from=SNAPSHOT])\n"
			     "  fork\n"
			     "       ^");
	/* trailing blanks do not move the caret for a missing word */
	CHECK_INT(parse_err("fork  from=snap1   ", &err), -EINVAL);
	CHECK(strstr(err.msg, "too few arguments") != NULL);
	CHECK(strstr(err.msg, "\n  fork  from=snap1   \n                   ^") != NULL);
	/* no usage: no "(usage: ...)" */
	CHECK_INT(parse_err("nousage x", &err), -EINVAL);
	CHECK_STREQ(err.msg, "nousage: too many arguments\n  nousage x\n          ^");
	/* max_args -1: no limit */
	struct ctl_cmd cmd;
	CHECK_INT(parse_ok("any 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20", &cmd), 0);
	CHECK_INT(cmd.nargs, 20);
	CHECK_STREQ(cmd.args[19], "20");
	CHECK(cmd.args[20] == NULL);
	ctl_cmd_free(&cmd);
}

static void test_parse_options(void)
{
	struct ctl_cmd cmd;
	CHECK_INT(parse_ok("new box image=ubuntu:24.04 env.A=1 env.B='x y' provider=docker "
			   "setup=\"make deps\"",
			   &cmd),
		  0);
	CHECK_INT(cmd.verb->id, V_NEW);
	CHECK_INT(cmd.nargs, 1);
	CHECK_STREQ(cmd.args[0], "box");
	CHECK(cmd.args[1] == NULL);
	CHECK_INT(cmd.opts.n, 5);
	CHECK_STREQ(cmd.opts.v[0].key, "image");
	CHECK_STREQ(cmd.opts.v[0].val, "ubuntu:24.04");
	CHECK_STREQ(cmd.opts.v[1].key, "env.A");
	CHECK_STREQ(sfs_kv_get(&cmd.opts, "env.B"), "x y");
	CHECK_STREQ(sfs_kv_get(&cmd.opts, "provider"), "docker");
	CHECK_STREQ(sfs_kv_get(&cmd.opts, "setup"), "make deps");
	ctl_cmd_free(&cmd);

	/* options may come before the positional word; values may hold '=' and be empty */
	CHECK_INT(parse_ok("new source=https://x/y?a=b ref= box", &cmd), 0);
	CHECK_STREQ(cmd.args[0], "box");
	CHECK_STREQ(sfs_kv_get(&cmd.opts, "source"), "https://x/y?a=b");
	CHECK_STREQ(sfs_kv_get(&cmd.opts, "ref"), "");
	ctl_cmd_free(&cmd);
}

static void test_parse_duplicate_options(void)
{
	/* a key given twice is refused, with the caret under the second */
	struct sfs_err err;
	CHECK_INT(parse_err("new box image=a env.X=1 image=b", &err), -EINVAL);
	CHECK_STREQ(err.msg, "new: option \"image\" given twice (give it once)\n"
			     "  new box image=a env.X=1 image=b\n"
			     "                          ^");
	CHECK_INT(parse_err("new box env.A=1 env.A=2", &err), -EINVAL);
	CHECK(strstr(err.msg, "option \"env.A\" given twice") != NULL);
	CHECK(caret_under(err.msg, "env.A=2"));
	CHECK_INT(parse_err("new box provider=local provider=local", &err), -EINVAL);
	CHECK_INT(parse_err("env A=1 B=2 A=3", &err), -EINVAL);
	CHECK(caret_under(err.msg, "A=3"));
	/* keys differ by case or by prefix: not the same key */
	struct ctl_cmd cmd;
	CHECK_INT(parse_ok("new box env.A=1 env.a=2 env.AB=3", &cmd), 0);
	CHECK_INT(cmd.opts.n, 3);
	ctl_cmd_free(&cmd);
}

static void test_parse_unknown_option(void)
{
	struct sfs_err err;
	CHECK_INT(parse_err("new box colour=red", &err), -EINVAL);
	CHECK_STREQ(err.msg, "new: unknown option \"colour\" (usage: " NEW_USAGE ")\n"
			     "  new box colour=red\n"
			     "          ^");
	/* "env." admits env.ANYTHING but not env. itself or envX */
	CHECK_INT(parse_err("new box env.=1", &err), -EINVAL);
	CHECK(strstr(err.msg, "unknown option \"env.\"") != NULL);
	CHECK_INT(parse_err("new box envX=1", &err), -EINVAL);
	CHECK(strstr(err.msg, "unknown option \"envX\"") != NULL);
	CHECK_INT(parse_err("new box env=1", &err), -EINVAL);
	/* keys are exact, case-sensitive */
	CHECK_INT(parse_err("new box Image=x", &err), -EINVAL);
	CHECK_INT(parse_err("new box images=x", &err), -EINVAL);
	CHECK_INT(parse_err("fork b2 from=s1 to=s2", &err), -EINVAL);
	CHECK(caret_under(err.msg, "to=s2"));
	/* CTL_OPTS with no keys: every option is unknown */
	CHECK_INT(parse_err("bare a b=c", &err), -EINVAL);
	CHECK(strstr(err.msg, "bare: unknown option \"b\"") != NULL);
	CHECK(caret_under(err.msg, "b=c"));
	/* the first bad word is reported */
	CHECK_INT(parse_err("new box a=1 b=2", &err), -EINVAL);
	CHECK(caret_under(err.msg, "a=1"));
}

static void test_parse_any_keys(void)
{
	struct ctl_cmd cmd;
	CHECK_INT(parse_ok("env PATH=/usr/bin LANG=C.UTF-8 x.y-z_1=ok", &cmd), 0);
	CHECK_INT(cmd.nargs, 0);
	CHECK_INT(cmd.opts.n, 3);
	CHECK_STREQ(sfs_kv_get(&cmd.opts, "PATH"), "/usr/bin");
	CHECK_STREQ(sfs_kv_get(&cmd.opts, "x.y-z_1"), "ok");
	ctl_cmd_free(&cmd);
}

static void test_parse_option_detection(void)
{
	struct ctl_cmd cmd;
	/* only [A-Za-z0-9._-]+ before the first '=' makes an option */
	CHECK_INT(parse_ok("any =x 'a b=c' a/b=c plain k=v=w k2= '$X=1' -=1", &cmd), 0);
	CHECK_INT(cmd.nargs, 5);
	CHECK_STREQ(cmd.args[0], "=x");
	CHECK_STREQ(cmd.args[1], "a b=c");
	CHECK_STREQ(cmd.args[2], "a/b=c");
	CHECK_STREQ(cmd.args[3], "plain");
	CHECK_STREQ(cmd.args[4], "$X=1");
	CHECK_INT(cmd.opts.n, 3);
	CHECK_STREQ(sfs_kv_get(&cmd.opts, "k"), "v=w");
	CHECK_STREQ(sfs_kv_get(&cmd.opts, "k2"), "");
	CHECK_STREQ(sfs_kv_get(&cmd.opts, "-"), "1");
	ctl_cmd_free(&cmd);

	/* without CTL_OPTS, key=value is a positional word */
	CHECK_INT(parse_ok("kill 2 sig=TERM", &cmd), 0);
	CHECK_INT(cmd.nargs, 2);
	CHECK_STREQ(cmd.args[1], "sig=TERM");
	CHECK_INT(cmd.opts.n, 0);
	ctl_cmd_free(&cmd);

	/* a quoted key=value is still an option: quoting only shapes the word */
	CHECK_INT(parse_ok("new box 'env.MSG=a b' \"image\"=x", &cmd), 0);
	CHECK_STREQ(sfs_kv_get(&cmd.opts, "env.MSG"), "a b");
	CHECK_STREQ(sfs_kv_get(&cmd.opts, "image"), "x");
	ctl_cmd_free(&cmd);
}

static void test_parse_exec_rest(void)
{
	struct ctl_cmd cmd;
	const char *line = "exec  echo 'a  b' \"c\\\"d\" | tr a-z A-Z  # don't  ";
	CHECK_INT(parse_ok(line, &cmd), 0);
	CHECK_INT(cmd.verb->id, V_EXEC);
	CHECK_STREQ(cmd.rest, "echo 'a  b' \"c\\\"d\" | tr a-z A-Z  # don't  ");
	CHECK_STREQ(cmd.line, line);
	CHECK_INT(cmd.nargs, 0);
	CHECK(cmd.args != NULL && cmd.args[0] == NULL);
	CHECK_INT(cmd.opts.n, 0);
	ctl_cmd_free(&cmd);

	/* key=value and unbalanced quotes are sh's business, not ours */
	CHECK_INT(parse_ok("exec\t\tFOO=1 make -j2 'x", &cmd), 0);
	CHECK_STREQ(cmd.rest, "FOO=1 make -j2 'x");
	ctl_cmd_free(&cmd);

	CHECK_INT(parse_ok("  exec\tls", &cmd), 0);
	CHECK_STREQ(cmd.rest, "ls");
	ctl_cmd_free(&cmd);

	CHECK_INT(parse_ok("exec \\\\", &cmd), 0);
	CHECK_STREQ(cmd.rest, "\\\\");
	ctl_cmd_free(&cmd);
}

static void test_parse_exec_missing(void)
{
	struct sfs_err err;
	CHECK_INT(parse_err("exec", &err), -EINVAL);
	CHECK_STREQ(err.msg, "exec: missing command (usage: exec CMD...)\n  exec\n       ^");
	CHECK_INT(parse_err("exec  \t ", &err), -EINVAL);
	CHECK(strncmp(err.msg, "exec: missing command", 21) == 0);
}

static void test_parse_bad_quotes(void)
{
	struct sfs_err err;
	CHECK_INT(parse_err("kill 'abc", &err), -EINVAL);
	CHECK_STREQ(err.msg, "kill: unterminated single quote\n  kill 'abc\n       ^");
	CHECK_INT(parse_err("new box env.A=\"x", &err), -EINVAL);
	CHECK_STREQ(err.msg, "new: unterminated double quote\n  new box env.A=\"x\n"
			     "                ^");
	/* in the verb itself: no verb to name */
	CHECK_INT(parse_err("'kill 3", &err), -EINVAL);
	CHECK_STREQ(err.msg, "unterminated single quote\n  'kill 3\n  ^");
}

static void test_parse_caret_tabs_utf8(void)
{
	struct sfs_err err;
	/* tabs are copied into the pad so the caret lines up in a terminal */
	CHECK_INT(parse_err("kill\t1\t2\t3", &err), -EINVAL);
	CHECK(strstr(err.msg, "\n  kill\t1\t2\t3\n      \t \t \t^") != NULL);
	/* a multibyte character takes one column */
	CHECK_INT(parse_err("kill \xc3\xa9t\xc3\xa9 1 2", &err), -EINVAL);
	CHECK(strstr(err.msg, "\n  kill \xc3\xa9t\xc3\xa9 1 2\n             ^") != NULL);
}

static void test_parse_caret_long_line(void)
{
	char line[2048] = "new box";
	for (int i = 0; i < 150; i++) /* distinct keys: a repeated one is refused */
		snprintf(line + strlen(line), sizeof(line) - strlen(line), " env.V%d=1", i);
	strcat(line, " colour=red tail=x");
	struct sfs_err err;
	CHECK_INT(parse_err(line, &err), -EINVAL);
	CHECK(strlen(err.msg) < sizeof(err.msg) - 1);
	CHECK(strstr(err.msg, "\n  ...") != NULL);
	CHECK(caret_under(err.msg, "colour=red"));

	/* near the start: cut only at the end */
	char line2[2048] = "new box colour=red";
	for (int i = 0; i < 150; i++)
		strcat(line2, " env.V=1");
	CHECK_INT(parse_err(line2, &err), -EINVAL);
	CHECK(strstr(err.msg, "\n  new box colour=red env.V=1") != NULL);
	CHECK(strstr(err.msg, "...\n") != NULL);
	CHECK(caret_under(err.msg, "colour=red"));
}

static void test_parse_redacts_secrets(void)
{
	struct sfs_err err;
	CHECK_INT(parse_err("new box env.API_TOKEN=hunter2 colour=red", &err), -EINVAL);
	CHECK(strstr(err.msg, "hunter2") == NULL);
	CHECK(strstr(err.msg, "[redacted]") != NULL);
	CHECK(caret_under(err.msg, "colour=red"));
}

static void test_parse_many_options(void)
{
	char line[4096] = "new box";
	char word[32];
	for (int i = 0; i < 200; i++) {
		snprintf(word, sizeof(word), " env.V%d=%d", i, i);
		strcat(line, word);
	}
	struct ctl_cmd cmd;
	CHECK_INT(parse_ok(line, &cmd), 0);
	CHECK_INT(cmd.opts.n, 200);
	CHECK_STREQ(sfs_kv_get(&cmd.opts, "env.V199"), "199");
	ctl_cmd_free(&cmd);
}

/* ---- ctl_for_each_line ---- */

struct lines {
	char got[16][64];
	int n;
	int stop_at; /* return 7 from this call (1-based), 0: never */
};

static int collect(const char *line, void *arg)
{
	struct lines *l = arg;
	if (l->n < 16)
		snprintf(l->got[l->n], sizeof(l->got[0]), "%s", line);
	l->n++;
	return l->n == l->stop_at ? 7 : 0;
}

static void test_lines_split(void)
{
	struct lines l = {0};
	const char *buf = "kill 1\nexec ls\n";
	CHECK_INT(ctl_for_each_line(buf, strlen(buf), collect, &l), 0);
	CHECK_INT(l.n, 2);
	CHECK_STREQ(l.got[0], "kill 1");
	CHECK_STREQ(l.got[1], "exec ls");

	memset(&l, 0, sizeof(l));
	buf = "kill 1\nexec ls";
	CHECK_INT(ctl_for_each_line(buf, strlen(buf), collect, &l), 0);
	CHECK_INT(l.n, 2);
	CHECK_STREQ(l.got[1], "exec ls");

	memset(&l, 0, sizeof(l));
	buf = "\n\n \t\nstop\n   \n\nstart\n\n";
	CHECK_INT(ctl_for_each_line(buf, strlen(buf), collect, &l), 0);
	CHECK_INT(l.n, 2);
	CHECK_STREQ(l.got[0], "stop");
	CHECK_STREQ(l.got[1], "start");

	/* lines keep their blanks; only the newline goes */
	memset(&l, 0, sizeof(l));
	buf = "  exec a  \n";
	CHECK_INT(ctl_for_each_line(buf, strlen(buf), collect, &l), 0);
	CHECK_STREQ(l.got[0], "  exec a  ");
}

static void test_lines_edges(void)
{
	struct lines l = {0};
	CHECK_INT(ctl_for_each_line("", 0, collect, &l), 0);
	CHECK_INT(ctl_for_each_line(NULL, 0, collect, &l), 0);
	CHECK_INT(ctl_for_each_line("\n", 1, collect, &l), 0);
	CHECK_INT(l.n, 0);
	/* buf need not be NUL-terminated: only len bytes count */
	CHECK_INT(ctl_for_each_line("abc\ndef", 5, collect, &l), 0);
	CHECK_INT(l.n, 2);
	CHECK_STREQ(l.got[0], "abc");
	CHECK_STREQ(l.got[1], "d");
}

static void test_lines_stop(void)
{
	struct lines l = {.stop_at = 2};
	const char *buf = "a\nb\nc\n";
	CHECK_INT(ctl_for_each_line(buf, strlen(buf), collect, &l), 7);
	CHECK_INT(l.n, 2);
}

static void test_lines_nul(void)
{
	struct lines l = {0};
	const char buf[] = "kill 1\nkill\0 2\n";
	CHECK_INT(ctl_for_each_line(buf, sizeof(buf) - 1, collect, &l), -EINVAL);
	CHECK_INT(l.n, 0); /* nothing ran: the write is refused whole */
	CHECK_INT(ctl_for_each_line("stop\n\0", 6, collect, &l), -EINVAL);
	CHECK_INT(l.n, 0);
}

/* ---- names ---- */

static void test_names_ok(void)
{
	const char *ok[] = {"a",    "Z",  "0",	"box", "My-Box_2.test", "1.2.3",
			    "a..b", "a-", "a.", "Ctl", "providers2",	"ctl.d"};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		struct sfs_err err = {0};
		CHECK_INT(ctl_check_sandbox_name(ok[i], &err), 0);
		CHECK_INT(err.code, 0);
	}
	char name[65];
	memset(name, 'a', 63);
	name[63] = '\0';
	CHECK_INT(ctl_check_sandbox_name(name, NULL), 0);
}

static void test_names_bad(void)
{
	const char *bad[] = {
	    "",	   ".",	   "..",  ".hidden",	       "-x",	    "_x",  "a/b",
	    "a b", "a\nb", "a:b", "\xc3\xa9t\xc3\xa9", "a\xc3\xa9", "ctl", "providers",
	    "a*"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct sfs_err err = {0};
		CHECK_INT(ctl_check_sandbox_name(bad[i], &err), -EINVAL);
		CHECK_INT(err.code, -EINVAL);
		CHECK(strstr(err.msg, "sandbox name") != NULL);
	}
	CHECK_INT(ctl_check_sandbox_name(NULL, NULL), -EINVAL);

	char name[65];
	memset(name, 'a', 64);
	name[64] = '\0';
	struct sfs_err err = {0};
	CHECK_INT(ctl_check_sandbox_name(name, &err), -EINVAL);
	CHECK(strstr(err.msg, "too long (64 bytes, at most 63)") != NULL);

	CHECK_INT(ctl_check_sandbox_name("ctl", &err), -EINVAL);
	CHECK_STREQ(err.msg, "sandbox name \"ctl\" is reserved");
	CHECK_INT(ctl_check_sandbox_name(".x", &err), -EINVAL);
	CHECK_STREQ(err.msg, "sandbox name \".x\" must start with a letter or a digit");
	CHECK_INT(ctl_check_sandbox_name("a/b", &err), -EINVAL);
	CHECK_STREQ(
	    err.msg,
	    "sandbox name \"a/b\": bad character '/' at byte 2 (allowed: A-Z a-z 0-9 . _ -)");
	CHECK_INT(ctl_check_sandbox_name("ab\tc", &err), -EINVAL);
	CHECK(strstr(err.msg, "bad byte 0x09 at byte 3") != NULL);
}

/* ---- signals ---- */

static void test_signals_parse(void)
{
	CHECK_INT(ctl_parse_signal("TERM"), 15);
	CHECK_INT(ctl_parse_signal("SIGTERM"), 15);
	CHECK_INT(ctl_parse_signal("term"), 15);
	CHECK_INT(ctl_parse_signal("sigterm"), 15);
	CHECK_INT(ctl_parse_signal("SigTerm"), 15);
	CHECK_INT(ctl_parse_signal("15"), 15);
	CHECK_INT(ctl_parse_signal("KILL"), 9);
	CHECK_INT(ctl_parse_signal("9"), 9);
	CHECK_INT(ctl_parse_signal("HUP"), 1);
	CHECK_INT(ctl_parse_signal("INT"), 2);
	CHECK_INT(ctl_parse_signal("USR1"), 10);
	CHECK_INT(ctl_parse_signal("CHLD"), 17);
	CHECK_INT(ctl_parse_signal("CLD"), 17);
	CHECK_INT(ctl_parse_signal("IO"), 29);
	CHECK_INT(ctl_parse_signal("POLL"), 29);
	CHECK_INT(ctl_parse_signal("IOT"), 6);
	CHECK_INT(ctl_parse_signal("1"), 1);
	CHECK_INT(ctl_parse_signal("34"), 34);
	CHECK_INT(ctl_parse_signal("64"), 64);
}

static void test_signals_reject(void)
{
	const char *bad[] = {
	    "0",   "-1",  "-15",   "65",       "100",	     "99999999999999999999",
	    "",	   "FOO", "SIG",   "SIGFOO",   "15x",	     " 15",
	    "15 ", "+15", "TERM ", "SIG TERM", "SIGSIGTERM", "0x0f",
	    "1.5", "T"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int r = ctl_parse_signal(bad[i]);
		CHECK_INT(r, -EINVAL);
		if (r != -EINVAL)
			fprintf(stderr, "    accepted \"%s\"\n", bad[i]);
	}
	CHECK_INT(ctl_parse_signal(NULL), -EINVAL);
}

static void test_signals_names(void)
{
	CHECK_STREQ(ctl_signal_name(15), "TERM");
	CHECK_STREQ(ctl_signal_name(9), "KILL");
	CHECK_STREQ(ctl_signal_name(1), "HUP");
	CHECK(ctl_signal_name(0) == NULL);
	CHECK(ctl_signal_name(-1) == NULL);
	CHECK(ctl_signal_name(65) == NULL);
	CHECK(ctl_signal_name(1000) == NULL);
	/* every name we print parses back to its number */
	for (int sig = 1; sig <= 64; sig++) {
		const char *name = ctl_signal_name(sig);
		if (name)
			CHECK_INT(ctl_parse_signal(name), sig);
	}
}

/* ---- ints ---- */

static void test_ints(void)
{
	long v = -1;
	CHECK_INT(ctl_parse_int("0", 0, 10, &v), 0);
	CHECK_INT(v, 0);
	CHECK_INT(ctl_parse_int("42", 1, 100, &v), 0);
	CHECK_INT(v, 42);
	CHECK_INT(ctl_parse_int("007", 0, 10, &v), 0);
	CHECK_INT(v, 7);
	CHECK_INT(ctl_parse_int("-5", -10, 10, &v), 0);
	CHECK_INT(v, -5);
	CHECK_INT(ctl_parse_int("65535", 1, 65535, &v), 0);
	CHECK_INT(ctl_parse_int("9223372036854775807", 0, 9223372036854775807L, &v), 0);
	CHECK_INT(v, 9223372036854775807L);
	CHECK_INT(ctl_parse_int("3", 0, 10, NULL), 0);

	v = 99;
	const char *bad[] = {"",    "-",    "4x",  " 4",  "4 ",
			     "+4",  "0x10", "1e3", "4.0", "99999999999999999999",
			     "--1", "x"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK_INT(ctl_parse_int(bad[i], -1000, 1000, &v), -EINVAL);
	CHECK_INT(v, 99); /* untouched on error */
	CHECK_INT(ctl_parse_int(NULL, 0, 1, &v), -EINVAL);
	CHECK_INT(ctl_parse_int("0", 1, 10, &v), -EINVAL);
	CHECK_INT(ctl_parse_int("11", 1, 10, &v), -EINVAL);
	CHECK_INT(ctl_parse_int("-1", 0, 10, &v), -EINVAL);
	CHECK_INT(ctl_parse_int("65536", 1, 65535, &v), -EINVAL);
}

static void test_utf8_valid(void)
{
	CHECK(sfs_utf8_valid(""));
	CHECK(sfs_utf8_valid("plain ascii"));
	CHECK(sfs_utf8_valid("na\xc3\xafve \xe2\x82\xac \xf0\x9f\x98\x80"));
	CHECK(!sfs_utf8_valid("bad\xff"));
	CHECK(!sfs_utf8_valid("\xc3("));	    /* a lead byte without its continuation */
	CHECK(!sfs_utf8_valid("\xc0\xaf"));	    /* overlong '/' */
	CHECK(!sfs_utf8_valid("\xed\xa0\x80"));	    /* a surrogate */
	CHECK(!sfs_utf8_valid("\xf4\x90\x80\x80")); /* past U+10FFFF */
	CHECK(!sfs_utf8_valid("\xe2\x82"));	    /* cut short */
}

CHECK_MAIN(CHECK_CASE(test_utf8_valid), CHECK_CASE(test_tokenize_blanks),
	   CHECK_CASE(test_tokenize_empty), CHECK_CASE(test_tokenize_single_quotes),
	   CHECK_CASE(test_tokenize_double_quotes), CHECK_CASE(test_tokenize_backslash),
	   CHECK_CASE(test_tokenize_concatenation), CHECK_CASE(test_tokenize_unterminated),
	   CHECK_CASE(test_tokenize_no_offsets), CHECK_CASE(test_tokenize_many_words),
	   CHECK_CASE(test_parse_blank), CHECK_CASE(test_parse_positional),
	   CHECK_CASE(test_parse_unknown_command), CHECK_CASE(test_parse_unknown_command_long),
	   CHECK_CASE(test_parse_arg_counts), CHECK_CASE(test_parse_options),
	   CHECK_CASE(test_parse_duplicate_options), CHECK_CASE(test_parse_unknown_option),
	   CHECK_CASE(test_parse_any_keys), CHECK_CASE(test_parse_option_detection),
	   CHECK_CASE(test_parse_exec_rest), CHECK_CASE(test_parse_exec_missing),
	   CHECK_CASE(test_parse_bad_quotes), CHECK_CASE(test_parse_caret_tabs_utf8),
	   CHECK_CASE(test_parse_caret_long_line), CHECK_CASE(test_parse_redacts_secrets),
	   CHECK_CASE(test_parse_many_options), CHECK_CASE(test_lines_split),
	   CHECK_CASE(test_lines_edges), CHECK_CASE(test_lines_stop), CHECK_CASE(test_lines_nul),
	   CHECK_CASE(test_names_ok), CHECK_CASE(test_names_bad), CHECK_CASE(test_signals_parse),
	   CHECK_CASE(test_signals_reject), CHECK_CASE(test_signals_names), CHECK_CASE(test_ints))
