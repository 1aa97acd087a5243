/* The one check macro and named-test runner of every C harness ccltune has (plugin/tests,
 * native/tests, profiler/tests: native and profiler include it by its relative path, so the sdist,
 * which ships the three folders, builds them too).
 *   CHECK(cond, fmt, ...)              FAIL file:line: cond: message
 *   CHECKN(name, cond, fmt, ...)       FAIL file:line: name: message  (a table-driven case's name)
 * Each check is counted; a failed one is printed and counted as a failure.
 *   check_main(TESTS, n, argc, argv)   runs the tests named in argv (all of them when none, in table
 * order), `--list` prints the names; an unknown name is an error that lists them (exit 2). It prints
 * "OK: 0 of N checks failed" or "FAILED: F of N checks failed" and returns 1 on any failure. */
#ifndef CCLTUNE_TESTS_CHECK_H
#define CCLTUNE_TESTS_CHECK_H

#include <stdio.h>
#include <string.h>

static int failures, total;

#define CHECKN(name, cond, ...)                               \
  do {                                                        \
    total++;                                                  \
    if (!(cond)) {                                            \
      failures++;                                             \
      printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, name);   \
      printf(__VA_ARGS__);                                    \
      printf("\n");                                           \
    }                                                         \
  } while (0)
#define CHECK(cond, ...) CHECKN(#cond, cond, __VA_ARGS__)

typedef struct {
  const char* name;
  void (*run)(void);
} check_test;

#define CHECK_COUNT(table) ((int)(sizeof(table) / sizeof((table)[0])))

static int check_find(const check_test* tests, int n, const char* name) {
  for (int i = 0; i < n; i++)
    if (strcmp(tests[i].name, name) == 0) return i;
  return -1;
}

/* argv[0..argc) are test names (the harness's own positional arguments already taken off). */
static int check_main(const check_test* tests, int n, int argc, char** argv) {
  if (argc == 1 && strcmp(argv[0], "--list") == 0) {
    for (int i = 0; i < n; i++) printf("%s\n", tests[i].name);
    return 0;
  }
  for (int a = 0; a < argc; a++) {
    if (check_find(tests, n, argv[a]) < 0) {
      fprintf(stderr, "unknown test '%s'; the tests are:", argv[a]);
      for (int i = 0; i < n; i++) fprintf(stderr, " %s", tests[i].name);
      fprintf(stderr, "\n");
      return 2;
    }
  }
  if (argc == 0)
    for (int i = 0; i < n; i++) tests[i].run();
  for (int a = 0; a < argc; a++) tests[check_find(tests, n, argv[a])].run();
  printf("%s: %d of %d checks failed\n", failures ? "FAILED" : "OK", failures, total);
  return failures ? 1 : 0;
}

#endif
