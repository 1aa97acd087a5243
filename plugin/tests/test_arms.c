/* White-box harness of in-run arms (plugin/src/arms_file.c, arms_schedule.c):
 *   test_arms [TEST...]                      named tests (--list: the names)
 *   test_arms --schedule SEED K W NBLOCKS    prints the arm of blocks 0..NBLOCKS-1, space-separated
 *   test_arms --period < KEYS                one "COLL NBYTES PIPEOPS" a line (COLL 0..4, NCCL's ids):
 *                                            prints "PERIOD FOUND_AT" as period=auto finds them, or "none"
 * The two modes are the C half of the C-vs-Python comparison in tests/plugin/test_arms.py
 * (src/ccltune/ab/schedule.py is the twin). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arms.h"

#include "check.h"

static void test_splitmix(void) {
  /* Vigna's splitmix64 from state 0: the published first outputs */
  uint64_t s = 0;
  CHECK(ccl_splitmix64(&s) == 0xe220a8397b1dcdafull, "first output");
  CHECK(ccl_splitmix64(&s) == 0x6e789e6aa1b965f4ull, "second output");
  CHECK(ccl_splitmix64(&s) == 0x06c45d188009454full, "third output");
}

static void expect_seq(const char* name, uint64_t seed, int k, int w, const int* want, int n) {
  for (int b = 0; b < n; b++) {
    int got = ccl_arm_at((uint64_t)b, k, seed, (uint64_t)w);
    CHECKN(name, got == want[b], "block %d: arm %d, want %d", b, got, want[b]);
  }
}

static void test_schedule(void) {
  /* golden sequences (the same numbers are pinned in tests/plugin/test_arms.py for the Python twin) */
  static const int a[] = {0, 0, 0, 1, 2, 0, 1, 2, 2, 0, 1, 2, 1, 0, 2, 0, 1, 1, 0, 2};
  static const int b[] = {0, 1, 2, 3, 2, 0, 1, 3, 2, 0, 1, 3, 1, 3, 0, 2, 2, 3, 1, 0};
  static const int c[] = {0, 0, 1, 0, 1, 1, 0, 1, 0, 0, 1, 0, 1, 0, 1, 0};
  expect_seq("seed 1, 3 arms, 2 warm-up blocks", 1, 3, 2, a, 20);
  expect_seq("seed 0xdeadbeefcafef00d, 4 arms", 0xdeadbeefcafef00dull, 4, 0, b, 20);
  expect_seq("seed 42, 2 arms, 1 warm-up block", 42, 2, 1, c, 16);
  /* every round after the warm-up round runs each arm exactly once */
  for (uint64_t seed = 0; seed < 50; seed++)
    for (int k = 1; k <= CCLT_ARMS_MAX; k += 5) {
      for (uint64_t r = 0; r < 20; r++) {
        unsigned seen = 0;
        for (int pos = 0; pos < k; pos++) seen |= 1u << ccl_arm_at(3 + (uint64_t)k * (r + 1) + (uint64_t)pos, k, seed, 3);
        CHECK(seen == (k == 32 ? 0xffffffffu : (1u << k) - 1), "seed %llu k %d round %llu: a permutation",
              (unsigned long long)seed, k, (unsigned long long)r);
      }
    }
  CHECK(ccl_arm_at(5, 0, 1, 0) == 0 && ccl_arm_at(5, CCLT_ARMS_MAX + 1, 1, 0) == 0, "bad arm counts give arm 0");
  CHECK(ccl_arm_at(UINT64_MAX, 3, 9, 0) >= 0, "the last block has an arm");
}

static uint32_t period_of(const char* s, int32_t* work) {
  uint64_t keys[256];
  uint32_t n = (uint32_t)strlen(s);
  for (uint32_t i = 0; i < n; i++) keys[i] = ccl_arms_key(4, (uint64_t)s[i], 1);
  return ccl_period_detect(keys, n, work);
}

static void test_period(void) {
  int32_t work[256];
  CHECK(period_of("aaaaaaaaaaaa", work) == 1, "constant: 1");
  CHECK(period_of("xyzabcabcabcabcabc", work) == 3, "a start, then abc");
  CHECK(period_of("abcabcabcabcabcabd", work) == 0, "the last call breaks it");
  /* the last 3p keys repeat, but not the last half: no period */
  CHECK(period_of("qwertyuiopasdfghABABABAB", work) == 0, "tail shorter than half");
  CHECK(period_of("qwertyuiABABABABABABABAB", work) == 2, "tail of half repeats");
  /* the smallest period wins, and a period of 3 periods is found at n = 3p */
  CHECK(period_of("abcdabcdabcd", work) == 4, "exactly 3 periods");
  CHECK(period_of("abcdabcdabc", work) == 0, "under 3 periods");
  CHECK(period_of("ab", work) == 0, "too short");
  /* step_calls: the found period raised to its multiple nearest to the step, never below it */
  CHECK(ccl_arms_step_period(1, 257) == 257 && ccl_arms_step_period(1, 0) == 1, "one key: the step");
  CHECK(ccl_arms_step_period(51, 50) == 51 && ccl_arms_step_period(51, 102) == 102 && ccl_arms_step_period(51, 10) == 51,
        "nearest multiple, at least the period");
  CHECK(ccl_arms_step_period(4, 5) == 4 && ccl_arms_step_period(4, 6) == 8 && ccl_arms_step_period(0, 9) == 0,
        "ties round up; no period stays none");
  /* keys: equal calls equal keys; a field's difference differs; out-of-range fields still key */
  CHECK(ccl_arms_key(2, 100, 1) == ccl_arms_key(2, 100, 1), "equal");
  CHECK(ccl_arms_key(2, 100, 1) != ccl_arms_key(3, 100, 1) && ccl_arms_key(2, 100, 1) != ccl_arms_key(2, 101, 1) &&
        ccl_arms_key(2, 100, 1) != ccl_arms_key(2, 100, 2), "distinct");
  CHECK(ccl_arms_key(2, 1ull << 50, 1) == ccl_arms_key(2, 1ull << 50, 1) &&
        ccl_arms_key(2, 1ull << 50, 1) != ccl_arms_key(2, 1ull << 50, 2) && ccl_arms_key(-1, 5, 99999) >> 63,
        "hashed keys");
}

/* ---- the arms file ---- */
static int parse(const char* text, ccl_arms_cfg* cfg, char* why) {
  return ccl_arms_parse_buffer(text, strlen(text), "/base", cfg, why, 600);
}

static void bad(const char* name, const char* text, const char* reason) {
  ccl_arms_cfg cfg;
  char why[600] = "";
  int rc = parse(text, &cfg, why);
  CHECKN(name, rc == -1 && strstr(why, reason), "rc %d, why '%s', want '%s'", rc, why, reason);
  ccl_arms_cfg_free(&cfg);
}

#define HEAD "# ccltune-arms 1\n"
#define KEYS_OK "seed=18446744073709551615\nwarmup_blocks=2\nblock_periods=3\nperiod=auto\nmax_blocks=100\nlog=logs\n"

static void test_arms_file(void) {
  ccl_arms_cfg cfg;
  char why[600] = "";
  int rc = parse(HEAD "# a comment\n\r\n  seed = 7 \nwarmup_blocks=2\nblock_periods=3\nperiod=48\nmax_blocks=100\n"
                 "log=/abs/logs\narm=default\narm=aa\narm=cand.1 rules=rules/c 1.conf \r\narm=c2 rules=/abs/c2.conf\n",
                 &cfg, why);
  CHECK(rc == 0, "valid file: %s", why);
  CHECK(cfg.seed == 7 && cfg.warmupBlocks == 2 && cfg.blockPeriods == 3 && cfg.period == 48 && cfg.maxBlocks == 100,
        "numbers");
  CHECK(cfg.nArms == 4 && !strcmp(cfg.names[0], "default") && !strcmp(cfg.names[2], "cand.1"), "names");
  CHECK(!cfg.rules[0] && !cfg.rules[1], "arm 0 and the twin have no rules");
  CHECK(cfg.rules[2] && !strcmp(cfg.rules[2], "/base/rules/c 1.conf"), "relative rules path: %s", cfg.rules[2]);
  CHECK(cfg.rules[3] && !strcmp(cfg.rules[3], "/abs/c2.conf"), "absolute rules path");
  CHECK(!strcmp(cfg.log, "/abs/logs"), "log");
  ccl_arms_cfg_free(&cfg);
  rc = parse(HEAD KEYS_OK "arm=a\n", &cfg, why);
  CHECK(rc == 0 && cfg.period == 0 && cfg.seed == UINT64_MAX && !strcmp(cfg.log, "/base/logs") && cfg.nArms == 1,
        "auto, the largest seed, a relative log: %s", why);
  CHECK(cfg.stepCalls == 0, "step_calls is optional: 0 when not given");
  ccl_arms_cfg_free(&cfg);
  rc = parse(HEAD KEYS_OK "step_calls=257\narm=a\n", &cfg, why);
  CHECK(rc == 0 && cfg.stepCalls == 257, "step_calls: %s", why);
  ccl_arms_cfg_free(&cfg);
  rc = parse(HEAD KEYS_OK "nranks=4\narm=a\n", &cfg, why);
  CHECK(rc == 0 && cfg.onlyRanks == 4, "nranks: %s", why);
  ccl_arms_cfg_free(&cfg);
  bad("nranks 0", HEAD KEYS_OK "nranks=0\narm=a\n", "line 8: nranks must be a whole number from 1 to");
  bad("step_calls word", HEAD KEYS_OK "step_calls=many\narm=a\n", "line 8: step_calls must be a whole number from 0 to");
  bad("step_calls twice", HEAD KEYS_OK "step_calls=2\nstep_calls=3\narm=a\n", "line 9: step_calls given twice");
  bad("step_calls too big", HEAD KEYS_OK "step_calls=16777217\narm=a\n", "step_calls must be");

  bad("no header", KEYS_OK "arm=a\n", "line 1: expected the header '# ccltune-arms 1'");
  bad("empty", "", "is empty");
  bad("other version", "# ccltune-arms 2\n" KEYS_OK "arm=a\n", "line 1: expected the header");
  bad("missing key", HEAD "seed=1\nwarmup_blocks=0\nblock_periods=1\nperiod=auto\nlog=x\narm=a\n", "max_blocks= is missing");
  bad("no arms", HEAD KEYS_OK, "no arm= line");
  bad("twice", HEAD KEYS_OK "seed=2\narm=a\n", "line 8: seed given twice");
  bad("unknown key", HEAD KEYS_OK "sed=2\narm=a\n", "line 8: unknown key 'sed'");
  bad("no =", HEAD KEYS_OK "arm a\n", "line 8: expected key=value");
  bad("seed overflow", HEAD "seed=18446744073709551616\n", "line 2: seed must be a whole number");
  bad("negative", HEAD "warmup_blocks=-1\n", "line 2: warmup_blocks must be a whole number from 0 to 100000");
  bad("zero block", HEAD "block_periods=0\n", "block_periods must be a whole number from 1");
  bad("period word", HEAD "period=detect\n", "period must be auto or a whole number");
  bad("period 0", HEAD "period=0\n", "period must be auto");
  bad("too many blocks", HEAD "max_blocks=100001\n", "max_blocks must be");
  bad("inline comment", HEAD "max_blocks=10  # ten\n", "max_blocks must be");
  bad("empty log", HEAD "log=\n", "log: '' is empty");
  bad("rules on arm 0", HEAD KEYS_OK "arm=a rules=x.conf\n", "the first arm (a) is arm 0, NCCL's default");
  bad("bad name", HEAD KEYS_OK "arm=a\narm=b/c\n", "arm name 'b/c' is not");
  bad("same name", HEAD KEYS_OK "arm=a\narm=a\n", "arm name 'a' given twice");
  bad("empty rules", HEAD KEYS_OK "arm=a\narm=b rules=\n", "arm b: rules= names no file");
  bad("not rules=", HEAD KEYS_OK "arm=a\narm=b file=x\n", "arm b: expected rules=PATH");
  char many[4096] = HEAD KEYS_OK;
  for (int i = 0; i <= CCLT_ARMS_MAX; i++) snprintf(many + strlen(many), sizeof many - strlen(many), "arm=a%d\n", i);
  bad("33 arms", many, "more than 32 arms");
  char nul[] = HEAD "seed=1\0\n";
  ccl_arms_cfg c2;
  rc = ccl_arms_parse_buffer(nul, sizeof nul - 1, "", &c2, why, sizeof why);
  CHECK(rc == -1 && strstr(why, "NUL byte"), "NUL: %s", why);
  char* longl = malloc(9000);
  if (longl) {
    strcpy(longl, HEAD "log=");
    memset(longl + strlen(longl), 'x', 8500);
    longl[8500 + strlen(HEAD "log=")] = '\0';
    bad("long line", longl, "line 2: longer than 8192 bytes");
    free(longl);
  }
}

static void test_arms_file_kinds(void) {
  ccl_arms_cfg cfg;
  char why[600] = "";
  CHECK(ccl_arms_parse_file("/nonexistent/arms.txt", &cfg, why, sizeof why) == -1 && strstr(why, "No such file"),
        "missing: %s", why);
  CHECK(ccl_arms_parse_file("/", &cfg, why, sizeof why) == -1 && strstr(why, "not a regular file"), "a folder: %s", why);
  char path[] = "/tmp/ccltune-arms-test.XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0, "mkstemp");
  if (fd < 0) return;
  const char* text = HEAD KEYS_OK "arm=a\narm=b rules=b.conf\n";
  CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text), "write");
  close(fd);
  CHECK(ccl_arms_parse_file(path, &cfg, why, sizeof why) == 0 && !strcmp(cfg.rules[1], "/tmp/b.conf") &&
        !strcmp(cfg.log, "/tmp/logs"), "paths from the file's folder: %s %s", cfg.rules[1], cfg.log);
  ccl_arms_cfg_free(&cfg);
  FILE* f = fopen(path, "w");
  if (f) {
    fputs(HEAD, f);
    for (int i = 0; i < 70000; i++) fputc('#', f);
    fclose(f);
  }
  CHECK(ccl_arms_parse_file(path, &cfg, why, sizeof why) == -1 && strstr(why, "larger than 65536 bytes"), "%s", why);
  unlink(path);
}

/* ---- the modes the Python comparison runs ---- */
static int schedule_mode(int argc, char** argv) {
  if (argc != 6) { fprintf(stderr, "usage: test_arms --schedule SEED K W NBLOCKS\n"); return 2; }
  uint64_t seed = strtoull(argv[2], NULL, 0);
  int k = atoi(argv[3]);
  uint64_t w = strtoull(argv[4], NULL, 0), n = strtoull(argv[5], NULL, 0);
  for (uint64_t b = 0; b < n; b++) printf("%s%d", b ? " " : "", ccl_arm_at(b, k, seed, w));
  printf("\n");
  return 0;
}

static int period_mode(void) {
  uint64_t* keys = malloc(sizeof *keys * CCLT_ARMS_KEY_CAP);
  int32_t* work = malloc(sizeof *work * CCLT_ARMS_KEY_CAP);
  if (!keys || !work) return 2;
  uint32_t n = 0, check = CCLT_ARMS_FIRST_CHECK;
  int coll, pipe;
  unsigned long long bytes;
  while (n < CCLT_ARMS_KEY_CAP && scanf("%d %llu %d", &coll, &bytes, &pipe) == 3) {
    keys[n++] = ccl_arms_key(coll, bytes, pipe);
    if (n == check) {
      uint32_t p = ccl_period_detect(keys, n, work);
      if (p) { printf("%u %u\n", p, n); free(keys); free(work); return 0; }
      check *= 4;
    }
  }
  printf("none\n");
  free(keys);
  free(work);
  return 0;
}

int main(int argc, char** argv) {
  if (argc > 1 && !strcmp(argv[1], "--schedule")) return schedule_mode(argc, argv);
  if (argc > 1 && !strcmp(argv[1], "--period")) return period_mode();
  static const check_test TESTS[] = {{"splitmix", test_splitmix}, {"schedule", test_schedule}, {"period", test_period},
                                     {"arms_file", test_arms_file}, {"arms_file_kinds", test_arms_file_kinds}};
  return check_main(TESTS, CHECK_COUNT(TESTS), argc - 1, argv + 1);
}
