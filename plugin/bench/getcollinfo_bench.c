/* getCollInfo microbenchmark: 1,000 random rules, timed through the exported v6 struct
 * exactly as NCCL calls it. Prints ns/call for a hit and for a miss (target: <= 50 ns),
 * then the same with CCLTUNE_CAPTURE set and the capture's added cost (target: <= 20 ns), and with in-run
 * arms (CCLTUNE_ARMS: NCCL's default, its twin and the same rules, switched every 1,000 calls).
 * Each figure is the fastest of REPS runs of CALLS calls (the least disturbed by other
 * processes on the machine). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ccltune_tuner_abi.h"

extern const ncclTuner_v6_t ncclTunerPlugin_v6;

#define NRULES 1000
#define CALLS 2000000
#define REPS 5

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void fill(float table[7][3]) {
  for (int a = 0; a < 7; a++)
    for (int p = 0; p < 3; p++) table[a][p] = 10.0f + a + p;
}

/* One timed run of CALLS calls: ns/call. */
static double run(void* ctx, ncclFunc_t coll, size_t bytes) {
  float table[7][3];
  int nCh = 0;
  fill(table);
  double t0 = now_ns();
  for (int i = 0; i < CALLS; i++) {
    /* the size varies so the branch predictor cannot learn one path */
    ncclTunerPlugin_v6.getCollInfo(ctx, coll, bytes + (size_t)(i & 7), 1, (float**)table, 7, 3, 0, &nCh);
    __asm__ volatile("" ::: "memory");
  }
  return (now_ns() - t0) / CALLS;
}

/* Whether a query matches a rule (one cell set to 0.0, or nChannels set). */
static int matches(void* ctx, ncclFunc_t coll, size_t bytes) {
  float table[7][3];
  int nCh = 0, zero = 0;
  fill(table);
  ncclTunerPlugin_v6.getCollInfo(ctx, coll, bytes, 1, (float**)table, 7, 3, 0, &nCh);
  for (int a = 0; a < 7; a++)
    for (int p = 0; p < 3; p++) zero += table[a][p] == 0.0f;
  return zero == 1 || nCh != 0;
}

/* Runs without and with capture alternate, so both see the same machine load; the
 * fastest of REPS runs of each is kept. */
static void bench(void* off, void* on, ncclFunc_t coll, size_t bytes, double* tOff, double* tOn) {
  *tOff = *tOn = 1e30;
  for (int r = 0; r < REPS; r++) {
    double a = run(off, coll, bytes), b = run(on, coll, bytes);
    if (a < *tOff) *tOff = a;
    if (b < *tOn) *tOn = b;
  }
}

static const struct { ncclFunc_t coll; size_t bytes; const char* what; } CASES[3] = {
    {ncclFuncAllGather, 1 << 20, "hit: "},
    {ncclFuncAllGather, 1ull << 40, "miss: (size above every rule)"},
    {ncclFuncAllReduce, 1 << 20, "miss: (collective without rules)"}, /* no allreduce rules */
};

/* Each case with ctx off and with ctx on, printed; the largest added cost. */
static double added(void* off, void* on, const char* with) {
  double worst = 0;
  for (int k = 0; k < 3; k++) {
    double tOff, tOn;
    bench(off, on, CASES[k].coll, CASES[k].bytes, &tOff, &tOn);
    printf("%-34s %5.1f ns/call; with %s %5.1f ns/call, added %5.1f ns\n", CASES[k].what, tOff, with, tOn,
           tOn - tOff);
    if (tOn - tOff > worst) worst = tOn - tOff;
  }
  return worst;
}

static void* init_ctx(void) {
  void* ctx = NULL;
  ncclNvlDomainInfo_v6_t nvl = {1, 8, 8};
  ncclTunerPlugin_v6.init(&ctx, 1, 8, 1, NULL, &nvl, NULL);
  return ctx;
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
  char dir[] = "/tmp/ccltune_bench_capture_XXXXXX";
  if (!mkdtemp(dir)) { perror("bench: mkdtemp"); return 1; }
  unsetenv("CCLTUNE_CAPTURE");
  void* off = init_ctx();
  setenv("CCLTUNE_CAPTURE", dir, 1);
  void* on = init_ctx();
  unsetenv("CCLTUNE_CAPTURE");
  char arms_path[4200];
  snprintf(arms_path, sizeof arms_path, "%s/arms.txt", dir);
  FILE* af = fopen(arms_path, "w");
  if (!af) { perror("bench: arms file"); return 1; }
  fprintf(af, "# ccltune-arms 1\nseed=1\nwarmup_blocks=0\nblock_periods=1\nperiod=1000\nmax_blocks=100000\n"
          "log=%s\narm=default\narm=twin\narm=rules rules=%s\n", dir, path);
  fclose(af);
  setenv("CCLTUNE_ARMS", arms_path, 1);
  void* arms = init_ctx();
  unsetenv("CCLTUNE_ARMS");
  unlink(path);
  if (!off || !on || !arms) { fprintf(stderr, "bench: init produced no context\n"); return 1; }
  printf("rules: %d, calls: %d, fastest of %d runs\n", NRULES, CALLS, REPS);
  if (!matches(off, CASES[0].coll, CASES[0].bytes)) printf("warning: the hit query did not match\n");
  printf("capture added cost: %.1f ns/call at most (target <= 20 ns)\n", added(off, on, "capture"));
  printf("in-run arms added cost: %.1f ns/call at most (a third of the calls on the rules, the rest on NCCL's "
         "default)\n", added(off, arms, "in-run arms"));
  ncclTunerPlugin_v6.finalize(off);
  ncclTunerPlugin_v6.finalize(on);
  ncclTunerPlugin_v6.finalize(arms);
  char cmd[9000]; /* the capture file and the arm log the finalizes wrote */
  snprintf(cmd, sizeof cmd, "rm -f %s/ccltune-capture.*.txt %s/ccltune-arms.*.txt %s && rmdir %s", dir, dir,
           arms_path, dir);
  if (system(cmd) != 0) fprintf(stderr, "bench: could not remove %s\n", dir);
  return 0;
}
