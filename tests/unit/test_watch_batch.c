/* ws_batch (fs/workspace/watch_batch.c): the watcher's wait grows while
 * bursts are the daemon's own and is back at the minimum at the first
 * foreign change or after a quiet spell. */
#include "check.h"

#include "../../fs/workspace/watch_batch.h"

#define MS 1000000ull

static void test_starts_at_the_minimum(void)
{
	struct ws_batch b;

	ws_batch_init(&b);
	CHECK_INT(ws_batch_wait(&b, 1000 * MS), WS_BATCH_MIN_US);
}

static void test_own_bursts_double_up_to_the_maximum(void)
{
	struct ws_batch b;
	uint64_t t = 1000 * MS;
	unsigned want[] = {2000, 4000, 8000, 16000, 16000, 16000};

	ws_batch_init(&b);
	for (unsigned i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		CHECK_INT(ws_batch_wait(&b, t), want[i]);
		t += want[i] * 1000ull;
		ws_batch_done(&b, false, t);
		t += 1 * MS; /* the next event follows closely */
	}
}

static void test_a_foreign_change_resets(void)
{
	struct ws_batch b;
	uint64_t t = 1000 * MS;

	ws_batch_init(&b);
	for (int i = 0; i < 5; i++) {
		t += ws_batch_wait(&b, t) * 1000ull;
		ws_batch_done(&b, false, t);
	}
	CHECK_INT(ws_batch_wait(&b, t + MS), WS_BATCH_MAX_US);
	ws_batch_done(&b, true, t + 17 * MS);
	CHECK_INT(ws_batch_wait(&b, t + 18 * MS), WS_BATCH_MIN_US);
}

static void test_a_quiet_spell_resets(void)
{
	struct ws_batch b;
	uint64_t t = 1000 * MS;

	ws_batch_init(&b);
	for (int i = 0; i < 5; i++) {
		t += ws_batch_wait(&b, t) * 1000ull;
		ws_batch_done(&b, false, t);
	}
	CHECK_INT(ws_batch_wait(&b, t + WS_BATCH_QUIET_NS / 2), WS_BATCH_MAX_US);
	CHECK_INT(ws_batch_wait(&b, t + WS_BATCH_QUIET_NS + 1), WS_BATCH_MIN_US);
}

CHECK_MAIN(CHECK_CASE(test_starts_at_the_minimum),
	   CHECK_CASE(test_own_bursts_double_up_to_the_maximum),
	   CHECK_CASE(test_a_foreign_change_resets), CHECK_CASE(test_a_quiet_spell_resets))
