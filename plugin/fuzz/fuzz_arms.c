/* libFuzzer target for the arms file parser (CCLTUNE_ARMS): any bytes must parse or be refused with a reason,
 * never crash, leak or read past the buffer. Seeds: fuzz/arms_corpus. */
#include <stdint.h>
#include <string.h>

#include "arms.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ccl_arms_cfg cfg;
  char why[600];
  if (ccl_arms_parse_buffer((const char*)data, size, "/base", &cfg, why, sizeof why) == 0) {
    if (cfg.nArms < 1 || cfg.nArms > CCLT_ARMS_MAX || cfg.rules[0]) __builtin_trap(); /* the parser's promises */
  } else if (!memchr(why, '\0', sizeof why) || !why[0]) {
    __builtin_trap(); /* a refusal always says why */
  }
  ccl_arms_cfg_free(&cfg);
  return 0;
}
