/*
 * libFuzzer harness: a ctl write, as the kernel hands it over, parsed against
 * the real verb tables (ctl/verbs.c).  The first byte picks the table (mount,
 * sandbox, run ctl); the rest is the write.  Every line is also tokenized on
 * its own and its words run through the small parsers the dispatcher uses,
 * and error messages pass the redactor, as they do in the daemon.
 */
#include "ctl/ctl.h"
#include "ctl/verbs.h"
#include "providers/redact.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct ctx {
	const struct ctl_verb *table;
};

static void check_message(struct sfs_err *err)
{
	/* the message must be a terminated string within its buffer */
	if (memchr(err->msg, '\0', sizeof(err->msg)) == NULL)
		abort();
	sfs_redact(err->msg, sizeof(err->msg));
}

static int one_line(const char *line, void *arg)
{
	struct ctx *c = arg;
	struct sfs_err err = {0};
	char **words = NULL;
	size_t *offsets = NULL;
	int n = 0;
	if (ctl_tokenize(line, &words, &n, &offsets, &err) == 0) {
		for (int i = 0; i < n; i++) {
			if (offsets[i] > strlen(line))
				abort(); /* a word must start inside its line */
			long v;
			(void)ctl_parse_signal(words[i]);
			(void)ctl_parse_int(words[i], 1, 1L << 24, &v);
			struct sfs_err e2 = {0};
			(void)ctl_check_sandbox_name(words[i], &e2);
			check_message(&e2);
		}
		ctl_words_free(words);
		free(offsets);
	} else {
		check_message(&err);
	}
	struct ctl_cmd cmd;
	memset(&cmd, 0, sizeof(cmd));
	sfs_err_clear(&err);
	int r = ctl_parse_line(c->table, line, &cmd, &err);
	if (r == 0) {
		if (!cmd.verb || !cmd.line)
			abort();
		if (cmd.verb->flags & CTL_REST) {
			if (!cmd.rest) /* exec's command line is its one argument */
				abort();
		} else {
			if (cmd.nargs < cmd.verb->min_args ||
			    (cmd.verb->max_args >= 0 && cmd.nargs > cmd.verb->max_args))
				abort(); /* the parser accepted what the table forbids */
			for (int i = 0; i < cmd.nargs; i++)
				if (!cmd.args[i])
					abort();
			if (cmd.args[cmd.nargs])
				abort();
		}
		ctl_cmd_free(&cmd);
	} else if (r != -ENODATA) {
		check_message(&err);
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct ctl_verb *const tables[] = {ctl_mount_verbs, ctl_sandbox_verbs,
							ctl_run_verbs};
	if (size < 1)
		return 0;
	struct ctx c = {.table = tables[data[0] % 3]};
	/* the daemon refuses a write with a NUL byte before parsing; so do we */
	if (memchr(data + 1, '\0', size - 1))
		return 0;
	(void)ctl_for_each_line((const char *)data + 1, size - 1, one_line, &c);
	return 0;
}
