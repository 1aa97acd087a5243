/* CPU cost of each profiler call NCCL makes, in nanoseconds per call: the plugin is loaded and
 * driven through tests/harness.c exactly as the C tests drive it (one thread, batches of
 * BATCH calls so every timed call finds its slot free, as in a job whose kernels keep up).
 * Columns: profiling on (every call timed), on with CCLTUNE_PROFILE_EVERY=100 (most calls not
 * sampled: the task start counts the call and returns no handle, so NCCL sends no channel
 * events), and off (CCLTUNE_PROFILE unset: init sets the activation mask to 0 and NCCL makes
 * none of these calls; the figure is what a task start would cost if it did).
 * Usage: profiler_cost LIB [ROUNDS]. Prints a table; not a test. */
#include "../tests/harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BATCH 512
enum { TASK_START, KCH_START, KCH_RECORD, KCH_STOP, TASK_STOP, NPHASE };
static const char* const phase_names[NPHASE] = {"task startEvent (coll)", "KernelCh startEvent",
                                                "recordEventState (KernelChStop)", "KernelCh stopEvent",
                                                "task stopEvent"};

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

/* Median over rounds of the per-call ns of each phase. */
static void measure(fake_nccl* f, void* ctx, int rounds, double out[NPHASE]) {
  static void *task[BATCH], *ch[BATCH];
  double* samples = calloc((size_t)rounds * NPHASE, sizeof *samples);
  uint64_t seq = 0;
  for (int r = 0; r < rounds; r++) {
    double t[NPHASE + 1];
    t[0] = now_ns();
    for (int i = 0; i < BATCH; i++)
      task[i] = fn_coll(f, ctx, 0, 1, seq++, "AllReduce", 65536 + (size_t)(i & 7), "ncclBfloat16", "RING", "LL", 1, 16);
    t[1] = now_ns();
    for (int i = 0; i < BATCH; i++) ch[i] = task[i] ? fn_kch_start(f, ctx, task[i], 0, 1000) : NULL;
    t[2] = now_ns();
    for (int i = 0; i < BATCH; i++)
      if (ch[i]) {
        ncclProfilerEventStateArgs_v5_t a = {.kernelCh = {.pTimer = 5000}};
        ((const ncclProfiler_v5_t*)f->plugin)->recordEventState(ch[i], ncclProfilerKernelChStop, &a);
      }
    t[3] = now_ns();
    for (int i = 0; i < BATCH; i++) fn_stop(f, ch[i]);
    t[4] = now_ns();
    for (int i = 0; i < BATCH; i++) fn_stop(f, task[i]);
    t[5] = now_ns();
    for (int p = 0; p < NPHASE; p++) samples[p * rounds + r] = (t[p + 1] - t[p]) / BATCH;
  }
  for (int p = 0; p < NPHASE; p++) {
    qsort(samples + p * rounds, (size_t)rounds, sizeof *samples, cmp);
    out[p] = samples[p * rounds + rounds / 2];
  }
  free(samples);
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s LIB [ROUNDS]\n", argv[0]);
    return 2;
  }
  int rounds = argc > 2 ? atoi(argv[2]) : 200;
  if (rounds < 1) rounds = 1;
  char dir[] = "/tmp/ccltune-profiler-cost.XXXXXX";
  if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
  fake_nccl f;
  if (fn_load(&f, argv[1], 0) != 0) return 1;
  double on[NPHASE], every[NPHASE], off[NPHASE];

  setenv("CCLTUNE_PROFILE", dir, 1);
  setenv("CCLTUNE_PROFILE_CALLS", "0", 1);
  void* ctx = fn_init(&f, 1, 1, 8, 0, NULL);
  measure(&f, ctx, rounds, on);
  fn_finalize(&f, ctx);

  setenv("CCLTUNE_PROFILE_EVERY", "100", 1);
  ctx = fn_init(&f, 2, 1, 8, 0, NULL);
  measure(&f, ctx, rounds, every);
  fn_finalize(&f, ctx);

  unsetenv("CCLTUNE_PROFILE");
  ctx = fn_init(&f, 3, 1, 8, 0, NULL);
  int mask_off = f.mask;
  f.mask = ~0; /* make the calls anyway, to price the plugin's own early return */
  measure(&f, ctx, rounds, off);

  printf("# ccltune profiler: CPU ns per call (median of %d rounds of %d calls), %s v%d, 1 channel per call\n",
         rounds, BATCH, fn_name(&f), f.abi);
  printf("# off: CCLTUNE_PROFILE unset, init set the activation mask to %d, so NCCL makes none of these calls;\n"
         "#      the column prices each call had it been made (a NULL context: an early return)\n"
         "# every figure includes this driver filling NCCL's descriptor (about the off column), so the\n"
         "# plugin's own cost of a call is its on or every100 figure minus the off figure\n", mask_off);
  printf("%-34s %10s %12s %10s\n", "call", "on_ns", "every100_ns", "off_ns");
  double tot[3] = {0, 0, 0};
  for (int p = 0; p < NPHASE; p++) {
    printf("%-34s %10.1f %12.1f %10.1f\n", phase_names[p], on[p], every[p], off[p]);
    tot[0] += on[p], tot[1] += every[p], tot[2] += off[p];
  }
  printf("%-34s %10.1f %12.1f %10.1f\n", "whole call (sum)", tot[0], tot[1], tot[2]);
  rmdir(dir);
  fn_unload(&f);
  return 0;
}
