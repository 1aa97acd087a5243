/* The failure counter and CHECK macro the dlopen harnesses share (test_loader, test_capture,
 * test_rccl): a failed check prints FAIL file:line: condition: message and is counted. */
#ifndef CCLTUNE_TESTS_CHECK_H
#define CCLTUNE_TESTS_CHECK_H

#include <stdio.h>

static int failures;
#define CHECK(cond, ...)                                                     \
  do {                                                                       \
    if (!(cond)) {                                                           \
      failures++;                                                            \
      printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                 \
      printf(__VA_ARGS__);                                                   \
      printf("\n");                                                          \
    }                                                                        \
  } while (0)

#endif
