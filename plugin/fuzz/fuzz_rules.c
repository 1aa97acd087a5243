/* libFuzzer target: arbitrary bytes through the rule parser, then through a compiled
 * communicator and a few getCollInfo-style decisions (catches index/segment bugs too). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "rules.h"

static void ignore_diag(void* user, int line, const char* reason) {
  (void)user;
  if (line <= 0 || !reason || !reason[0]) __builtin_trap(); /* every diagnostic names a line */
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ccl_ruleset rs;
  memset(&rs, 0, sizeof rs);
  if (ccl_parse_buffer((const char*)data, size, &rs, ignore_diag, NULL) == 0) {
    ccl_platform p;
    memset(&p, 0, sizeof p);
    strcpy(p.gpu, "NVIDIA H100");
    strcpy(p.partition, "CPX");
    ccl_platform_set_nvl(&p, 8, 1, NULL);
    ccl_comm* c = ccl_comm_build(&rs, 8, 1, &p);
    float t[8 * 3];
    for (int i = 0; i < 24; i++) t[i] = (i % 4 == 0) ? -1.0f : (float)i;
    static const uint64_t sizes[] = {0, 1, 1023, 1024, 65536, 1ull << 32, UINT64_MAX};
    for (int coll = 0; c && coll < 5; coll++)
      for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int cell, ch;
        int numAlgo = (int)(s % 2) ? 8 : 7;
        int line = ccl_comm_decide(c, coll, sizes[s], 1, (int)(s % 2), t, numAlgo, 3, 1, &cell, &ch);
        if (line < 0 || cell >= numAlgo * 3 || (cell >= 0 && t[cell] < 0.0f) || ch < 0 || ch > 64)
          __builtin_trap();
      }
    ccl_comm_free(c);
  }
  ccl_ruleset_free(&rs);
  return 0;
}
