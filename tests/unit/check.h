/*
 * A tiny test harness: CHECK* macros record failures with file:line and keep
 * going; CHECK_MAIN runs the listed cases and prints one summary line.
 *
 *	static void test_foo(void) { CHECK_INT(foo(1), 2); }
 *	CHECK_MAIN(CHECK_CASE(test_foo), CHECK_CASE(test_bar))
 */
#ifndef SFS_CHECK_H
#define SFS_CHECK_H

#include <stdio.h>
#include <string.h>

static int check_count __attribute__((unused));
static int check_failed __attribute__((unused));

static inline void check_report(const char *file, int line, const char *what)
{
	fprintf(stderr, "%s:%d: FAILED: %s\n", file, line, what);
	check_failed++;
}

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		check_count++;                                                                     \
		if (!(cond))                                                                       \
			check_report(__FILE__, __LINE__, #cond);                                   \
	} while (0)

#define CHECK_STREQ(got, want)                                                                     \
	do {                                                                                       \
		const char *check_g_ = (got), *check_w_ = (want);                                  \
		check_count++;                                                                     \
		if (!check_g_ || !check_w_ ? check_g_ != check_w_ : strcmp(check_g_, check_w_)) {  \
			check_report(__FILE__, __LINE__, #got " == " #want);                       \
			fprintf(stderr, "    got:  %s%s%s\n    want: %s%s%s\n",                    \
				check_g_ ? "\"" : "", check_g_ ? check_g_ : "NULL",                \
				check_g_ ? "\"" : "", check_w_ ? "\"" : "",                        \
				check_w_ ? check_w_ : "NULL", check_w_ ? "\"" : "");               \
		}                                                                                  \
	} while (0)

#define CHECK_INT(got, want)                                                                       \
	do {                                                                                       \
		long long check_g_ = (long long)(got), check_w_ = (long long)(want);               \
		check_count++;                                                                     \
		if (check_g_ != check_w_) {                                                        \
			check_report(__FILE__, __LINE__, #got " == " #want);                       \
			fprintf(stderr, "    got:  %lld\n    want: %lld\n", check_g_, check_w_);   \
		}                                                                                  \
	} while (0)

struct check_case {
	const char *name;
	void (*fn)(void);
};

#define CHECK_CASE(f)                                                                              \
	{                                                                                          \
		.name = #f, .fn = f                                                                \
	}

#define CHECK_MAIN(...)                                                                            \
	int main(int argc, char **argv)                                                            \
	{                                                                                          \
		static const struct check_case cases_[] = {__VA_ARGS__};                           \
		size_t ncases_ = sizeof(cases_) / sizeof(cases_[0]);                               \
		for (size_t i_ = 0; i_ < ncases_; i_++) {                                          \
			int before_ = check_failed;                                                \
			cases_[i_].fn();                                                           \
			if (check_failed != before_)                                               \
				fprintf(stderr, "  in %s\n", cases_[i_].name);                     \
		}                                                                                  \
		const char *name_ = argc > 0 ? argv[0] : "test";                                   \
		if (strrchr(name_, '/'))                                                           \
			name_ = strrchr(name_, '/') + 1;                                           \
		printf("%s: %zu cases, %d checks, %d failed\n", name_, ncases_, check_count,       \
		       check_failed);                                                              \
		return check_failed ? 1 : 0;                                                       \
	}

#endif
