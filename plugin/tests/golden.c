/* Golden harness: C side of the C-vs-Python agreement test (tests/plugin/test_golden.py).
 *   golden RULEFILE [D,MIN,MAX]   (D,MIN,MAX: nvlDomainInfo as v5+ passes it)
 * Prints "diag LINE: REASON" per rejected line, "rules N", "platform DESC", then for each
 * stdin query line
 *   COLL SIZE NRANKS NNODES PIPEOPS REGBUFF NALGO NPROTO COST...   (REGBUFF -1 = unknown)
 * one line "LINE ALGO PROTO CHANNELS" ('-' where no rule matched or no cell changed).
 *   golden --names
 * Prints the C name tables, one line each: "collectives ...", "aliases ..." (ccltune's name of each),
 * "algorithms ...", "protocols ...". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rules.h"

static void print_diag(void* user, int line, const char* reason) {
  (void)user;
  printf("diag %d: %s\n", line, reason);
}

/* names[i], or fallback[i] where names[i] is NULL */
static void print_names(const char* what, const char* const* names, const char* const* fallback, int n) {
  printf("%s", what);
  for (int i = 0; i < n; i++) printf(" %s", names[i] ? names[i] : fallback[i]);
  printf("\n");
}

static int coll_id(const char* s) {
  for (int i = 0; i < CCLT_NUM_COLL_IDS; i++)
    if (strcmp(s, ccl_coll_names[i]) == 0) return i;
  return -1;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: golden RULEFILE [D,MIN,MAX] < queries | golden --names\n");
    return 2;
  }
  if (strcmp(argv[1], "--names") == 0) {
    print_names("collectives", ccl_coll_names, NULL, CCLT_NUM_COLL_IDS);
    print_names("aliases", ccl_coll_aliases, ccl_coll_names, CCLT_NUM_COLL_IDS);  /* ccltune's names */
    print_names("algorithms", ccl_algo_names, NULL, CCLT_NUM_ALGOS);
    print_names("protocols", ccl_proto_names, NULL, CCLT_NUM_PROTOS);
    return 0;
  }
  ccl_ruleset rs;
  memset(&rs, 0, sizeof rs);
  if (ccl_parse_file(argv[1], &rs, print_diag, NULL) != 0) {
    fprintf(stderr, "golden: cannot read %s\n", argv[1]);
    return 2;
  }
  int nvl3[3], haveNvl = argc > 2 && sscanf(argv[2], "%d,%d,%d", &nvl3[0], &nvl3[1], &nvl3[2]) == 3;
  ccl_platform plat;
  ccl_platform_detect(&plat);
  char desc[256];
  ccl_platform_set_nvl(&plat, 8, 1, haveNvl ? nvl3 : NULL);
  printf("rules %d\n", rs.nRules);
  ccl_platform_describe(&plat, desc, sizeof desc);
  printf("platform %s\n", desc);

  char line[4096], coll[64];
  ccl_comm* comm = NULL;
  unsigned long long lastRanks = 0, lastNodes = 0;
  while (fgets(line, sizeof line, stdin)) {
    unsigned long long size, nRanks, nNodes;
    int pipe, reg, nA, nP, off = 0, used = 0;
    if (sscanf(line, "%63s %llu %llu %llu %d %d %d %d%n", coll, &size, &nRanks, &nNodes, &pipe,
               &reg, &nA, &nP, &off) != 8 || nA < 0 || nP < 0 || nA * nP > 64) {
      fprintf(stderr, "golden: bad query: %s", line);
      return 2;
    }
    float table[64];
    for (int i = 0; i < nA * nP; i++) {
      if (sscanf(line + off, "%f%n", &table[i], &used) != 1) {
        fprintf(stderr, "golden: missing cost %d: %s", i, line);
        return 2;
      }
      off += used;
    }
    if (!comm || nRanks != lastRanks || nNodes != lastNodes) {
      ccl_comm_free(comm);
      ccl_platform_set_nvl(&plat, nRanks, nNodes, haveNvl ? nvl3 : NULL);
      comm = ccl_comm_build(&rs, nRanks, nNodes, &plat);
      lastRanks = nRanks;
      lastNodes = nNodes;
      if (!comm) return 3;
    }
    int cell, ch;
    int won = ccl_comm_decide(comm, coll_id(coll), size, pipe, reg, nA ? table : NULL, nA, nP, 1,
                              &cell, &ch);
    if (!won) printf("- - - -\n");
    else if (cell < 0) printf("%d - - %d\n", won, ch);
    else printf("%d %s %s %d\n", won, ccl_algo_names[cell / nP], ccl_proto_names[cell % nP], ch);
  }
  ccl_comm_free(comm);
  ccl_ruleset_free(&rs);
  return 0;
}
