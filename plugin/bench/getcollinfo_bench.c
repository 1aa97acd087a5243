/* getCollInfo microbenchmark: 1,000 random rules, timed through the exported v6 struct
 * exactly as NCCL calls it. Prints ns/call for a hit and for a miss. Target: <= 50 ns. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ccltune_tuner_abi.h"

extern const ncclTuner_v6_t ncclTunerPlugin_v6;

#define NRULES 1000
#define CALLS 5000000

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static double bench(void* ctx, ncclFunc_t coll, size_t bytes, int* hit) {
  float table[7][3];
  for (int a = 0; a < 7; a++)
    for (int p = 0; p < 3; p++) table[a][p] = 10.0f + a + p;
  int nCh = 0;
  ncclTunerPlugin_v6.getCollInfo(ctx, coll, bytes, 1, (float**)table, 7, 3, 0, &nCh);
  int zero = 0;
  for (int a = 0; a < 7; a++)
    for (int p = 0; p < 3; p++) zero += table[a][p] == 0.0f;
  *hit = zero == 1 || nCh != 0;
  double t0 = now_ns();
  for (int i = 0; i < CALLS; i++) {
    /* the size varies so the branch predictor cannot learn one path */
    ncclTunerPlugin_v6.getCollInfo(ctx, coll, bytes + (size_t)(i & 7), 1, (float**)table, 7, 3, 0, &nCh);
    __asm__ volatile("" ::: "memory");
  }
  return (now_ns() - t0) / CALLS;
}

int main(void) {
  char path[] = "/tmp/ccltune_bench_XXXXXX";
  int fd = mkstemp(path);
  FILE* f = fdopen(fd, "w");
  static const char* const colls[] = {"broadcast", "reduce", "allgather", "reducescatter", "allreduce"};
  static const char* const algos[] = {"tree", "ring", "nvls", "pat"};
  static const char* const protos[] = {"ll", "ll128", "simple"};
  for (int i = 0; i < NRULES; i++) {
    int lg = (int)(next() % 36); /* sizes up to 64 GiB; nothing above 2^37 */
    unsigned long long lo = 1ull << lg, hi = lo + next() % (lo * 3 + 1);
    fprintf(f, "%s,%llu,%llu,%s,%s,%d,%d,%d\n", colls[next() % 4], lo, hi, algos[next() % 4],
            protos[next() % 3], (int)(next() % 3) - 1, next() % 2 ? -1 : 1, next() % 2 ? -1 : 8);
  }
  fclose(f);
  setenv("NCCL_TUNER_CONFIG_FILE", path, 1);
  void* ctx = NULL;
  ncclNvlDomainInfo_v6_t nvl = {1, 8, 8};
  ncclTunerPlugin_v6.init(&ctx, 1, 8, 1, NULL, &nvl, NULL);
  unlink(path);
  if (!ctx) { fprintf(stderr, "bench: init produced no context\n"); return 1; }
  int hit, miss;
  double tHit = bench(ctx, ncclFuncAllGather, 1 << 20, &hit);
  double tMiss = bench(ctx, ncclFuncAllGather, 1ull << 50, &miss);
  double tNone = bench(ctx, ncclFuncAllReduce, 1 << 20, &miss); /* no allreduce rules */
  printf("rules: %d, calls: %d each\n", NRULES, CALLS);
  printf("hit:  %.1f ns/call%s\n", tHit, hit ? "" : " (warning: query did not match)");
  printf("miss: %.1f ns/call (size above every rule)\n", tMiss);
  printf("miss: %.1f ns/call (collective without rules)\n", tNone);
  ncclTunerPlugin_v6.finalize(ctx);
  return 0;
}
