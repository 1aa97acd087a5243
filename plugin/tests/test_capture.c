/* Capture harness: dlopen the built plugin and drive it as NCCL does, with CCLTUNE_CAPTURE
 * set by the caller (tests/plugin/test_capture.py, which reads the files back):
 *   test_capture /abs/path/libnccl-tuner-ccltune.so [TEST...]   (one test: communicators)
 * Several communicators live at once, through v6, v4 and v3, each called from its own
 * threads (communicator A from four threads at once), with a contiguous float[7][3] cost
 * table and nChannels preset to 0. A, B and D are finalized; C is not, so its file is the
 * one written at process exit. Every count below is known, so the reader can check it
 * exactly; the harness itself checks that rules still apply while capturing. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccltune_tuner_abi.h"

#include "check.h"

enum { NA = 7, NP = 3, THREADS_A = 4, SIZES_A = 100, DISTINCT_B = 5000 };

static const ncclTuner_v6_t* v6;
static const ncclTuner_v4_t* v4;
static const ncclTuner_v3_t* v3;
static void* ctxC; /* never finalized: kept reachable so LeakSanitizer does not flag it */

static void fill(float* t) {
  for (int i = 0; i < NA * NP; i++) t[i] = 10.0f + (float)i;
}

static void call6(void* ctx, ncclFunc_t coll, size_t bytes, int pipe, int reg) {
  float t[NA * NP];
  int nCh = 0;
  fill(t);
  CHECK(v6->getCollInfo(ctx, coll, bytes, pipe, (float**)t, NA, NP, reg, &nCh) == ncclSuccess, "v6 call");
}

/* A: allreduce of 100 sizes, size k called k+1 times by each of four threads at once. */
static void* thread_a(void* ctx) {
  for (int k = 0; k < SIZES_A; k++)
    for (int n = 0; n <= k; n++) call6(ctx, ncclFuncAllReduce, 4096u * (size_t)(k + 1), 1, 0);
  return NULL;
}

/* B: a few repeated sizes first, then more distinct sizes than the table holds. */
static void* thread_b(void* ctx) {
  for (int i = 0; i < 1000; i++) call6(ctx, ncclFuncAllGather, 1 << 20, 1, 1);
  for (int i = 0; i < 10; i++) call6(ctx, ncclFuncReduceScatter, 65536, 2, 0);
  for (int i = 0; i < DISTINCT_B; i++) call6(ctx, ncclFuncBroadcast, 1000000u + (size_t)i, 1, 0);
  call6(ctx, ncclFuncAllReduce, 1ull << 50, 1, 0); /* does not pack: counted as overflow */
  return NULL;
}

static void* thread_c(void* ctx) {
  float t[NA * NP];
  int nCh = 0;
  for (int i = 0; i < 7; i++) {
    fill(t);
    CHECK(v4->getCollInfo(ctx, ncclFuncReduce, 100, 1, (float**)t, NA, NP, 0, &nCh) == ncclSuccess, "v4");
  }
  return NULL;
}

static void* thread_d(void* ctx) {
  float t[NA * NP];
  int nCh = 0;
  for (int i = 0; i < 3; i++) {
    fill(t);
    CHECK(v3->getCollInfo(ctx, ncclFuncAllReduce, 64, 1, (float**)t, NA, NP, &nCh) == ncclSuccess, "v3");
  }
  return NULL;
}

static void test_communicators(void) {
  void *ctxA = NULL, *ctxB = NULL, *ctxD = NULL;
  ncclNvlDomainInfo_v6_t nvl = {1, 4, 4};
  ncclTunerConstants_v6_t consts;
  memset(&consts, 0, sizeof consts);
  CHECK(v6->init(&ctxA, 0xa11ce, 4, 1, NULL, &nvl, &consts) == ncclSuccess && ctxA, "init A");
  CHECK(v6->init(&ctxB, 0xb0b, 8, 2, NULL, &nvl, &consts) == ncclSuccess && ctxB, "init B");
  CHECK(v4->init(2, 1, NULL, &ctxC) == ncclSuccess && ctxC, "init C");
  CHECK(v3->init(2, 1, NULL, &ctxD) == ncclSuccess && ctxD, "init D");
  if (!ctxA || !ctxB || !ctxC || !ctxD) return;

  pthread_t th[THREADS_A + 3];
  for (int i = 0; i < THREADS_A; i++) pthread_create(&th[i], NULL, thread_a, ctxA);
  pthread_create(&th[THREADS_A], NULL, thread_b, ctxB);
  pthread_create(&th[THREADS_A + 1], NULL, thread_c, ctxC);
  pthread_create(&th[THREADS_A + 2], NULL, thread_d, ctxD);
  for (int i = 0; i < THREADS_A + 3; i++) pthread_join(th[i], NULL);

  /* rules still apply while capturing (the caller's rule file: allreduce 0..1K ring/ll) */
  float t[NA * NP];
  int nCh = 0;
  fill(t);
  v6->getCollInfo(ctxA, ncclFuncAllReduce, 512, 1, (float**)t, NA, NP, 0, &nCh);
  CHECK(t[1 * NP + 0] == 0.0f, "ring/ll rule applied while capturing");

  CHECK(v6->finalize(ctxA) == ncclSuccess, "finalize A");
  CHECK(v6->finalize(ctxB) == ncclSuccess, "finalize B");
  CHECK(v3->destroy(ctxD) == ncclSuccess, "destroy D");
  /* C is left to the exit writer; the library stays loaded, as NCCL keeps it */
}

int main(int argc, char** argv) {
  if (argc < 2) { fprintf(stderr, "usage: %s /abs/path/libnccl-tuner-ccltune.so [TEST...]\n", argv[0]); return 2; }
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 2; }
  v6 = dlsym(lib, "ncclTunerPlugin_v6");
  v4 = dlsym(lib, "ncclTunerPlugin_v4");
  v3 = dlsym(lib, "ncclTunerPlugin_v3");
  if (!v6 || !v4 || !v3) { fprintf(stderr, "missing tuner symbols\n"); return 2; }
  static const check_test TESTS[] = {{"communicators", test_communicators}};
  return check_main(TESTS, CHECK_COUNT(TESTS), argc - 2, argv + 2);
}
