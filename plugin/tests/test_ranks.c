/* Ranks harness: N threads act as the N ranks of one communicator in one process, each driving the
 * built plugin exactly as NCCL does (dlopen; ncclTunerPlugin_v6 or _v5; init with the communicator's
 * commHash, nvlDomainInfo and constants; getCollInfo with a contiguous float[7][3] cost table whose
 * CollNet/NVLS cells are IGNORE and nChannels preset to 0; finalize), each replaying its own rank's
 * call sequence (derived from the job's NCCL COLL log by tests/plugin/test_arms.py). The caller sets
 * CCLTUNE_ARMS. A further thread reads ccltuneArmShare_v1.arm_of as the profiler plugin would.
 *   test_ranks LIB v4|v5|v6 CHOICES_OUT SEQ_RANK0 [SEQ_RANK1 ...]
 * v4: init without a commHash (arms run; arm_of knows nothing). TEST_RANKS_KEEP_LAST=1: the last rank
 * never finalizes (its arm log is the exit writer's).
 * SEQ: one call a line, "COLL NBYTES PIPEOPS" (COLL: ncclFunc_t 0..4). Every rank's choice (the cell
 * set to 0.0, or -1, and nChannels) at every call is compared with rank 0's; rank 0's choices go to
 * CHOICES_OUT, one "CELL NCHANNELS" line per call. Prints "ranks N calls C mismatches M arms_seen A";
 * exits 1 on a mismatch, on sequences of different lengths, or on a failed check. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccltune_arm_share.h"
#include "ccltune_tuner_abi.h"

#include "check.h"

enum { NA = 7, NP = 3, MAX_RANKS = 16, MAX_CALLS = 1 << 22 };
#define COMM_ID 0x5eed0000c0ffee01ull

typedef struct {
  int coll, pipe;
  unsigned long long bytes;
} call;

typedef struct {
  int rank, nRanks;
  const call* seq;
  size_t n;
  int* choice; /* cell | nChannels << 8, per call */
  int initOk;
} rank_arg;

static const ncclTuner_v6_t* tuner; /* v5 has the same first four members */
static const ncclTuner_v4_t* tuner4; /* or, for v4: */
static void* volatile kept;          /* the last rank's context when it is never finalized */
static int keepLast;
static const ccltuneArmShare_v1_t* share;
static pthread_barrier_t start;
static _Atomic int running, nWarn, badArm;
static _Atomic unsigned armsSeen; /* bit per arm arm_of returned */

static void logger(ncclDebugLogLevel level, unsigned long flags, const char* file, int line, const char* fmt, ...) {
  (void)flags; (void)file; (void)line;
  if (level != NCCL_LOG_WARN) return;
  atomic_fetch_add(&nWarn, 1);
  va_list ap;
  va_start(ap, fmt);
  printf("WARN ");
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
}

static void fill(float* t) {
  for (int a = 0; a < NA; a++)
    for (int p = 0; p < NP; p++)
      t[a * NP + p] = (a >= CCLT_ALGO_COLLNET_DIRECT && a <= CCLT_ALGO_NVLS_TREE) ? CCLT_COST_IGNORE
                                                                                : 10.0f + (float)(a * NP + p);
}

static void* run_rank(void* p) {
  rank_arg* r = p;
  void* ctx = NULL;
  ncclNvlDomainInfo_v6_t nvl = {1, r->nRanks, r->nRanks};
  ncclTunerConstants_v6_t consts;
  memset(&consts, 0, sizeof consts);
  if (tuner4) r->initOk = tuner4->init((size_t)r->nRanks, 1, logger, &ctx) == ncclSuccess;
  else r->initOk = tuner->init(&ctx, COMM_ID, (size_t)r->nRanks, 1, logger, &nvl, &consts) == ncclSuccess;
  pthread_barrier_wait(&start);
  for (size_t i = 0; i < r->n; i++) {
    float t[NA * NP];
    int nCh = 0, cell = -1;
    fill(t);
    /* regBuff differs between ranks (registration is per rank): the schedule must not depend on it */
    ncclResult_t rc = (tuner4 ? tuner4->getCollInfo : tuner->getCollInfo)(ctx, (ncclFunc_t)r->seq[i].coll, (size_t)r->seq[i].bytes, r->seq[i].pipe,
                                         (float**)t, NA, NP, r->rank & 1, &nCh);
    if (rc != ncclSuccess) r->initOk = 0;
    for (int k = 0; k < NA * NP; k++)
      if (t[k] == 0.0f) cell = cell == -1 ? k : -2;
    r->choice[i] = cell + 2 + (nCh << 8); /* cell -2..20 -> 0..22 */
  }
  if (keepLast && r->rank == r->nRanks - 1) kept = ctx; /* left to the exit writer, reachable for LSan */
  else if ((tuner4 ? tuner4->destroy : tuner->finalize)(ctx) != ncclSuccess) r->initOk = 0;
  return NULL;
}

/* The profiler's view: arm_of while the ranks run, from another thread. */
static void* run_profiler(void* p) {
  (void)p;
  while (atomic_load(&running)) {
    int arm = share->arm_of(COMM_ID);
    if (arm < -1 || arm >= 32) atomic_store(&badArm, 1);
    else if (arm >= 0) atomic_fetch_or(&armsSeen, 1u << arm);
    if (share->arm_of(COMM_ID ^ 1) != -1) atomic_store(&badArm, 1); /* an unknown communicator */
  }
  return NULL;
}

static call* read_seq(const char* path, size_t* n) {
  FILE* f = fopen(path, "r");
  if (!f) { perror(path); return NULL; }
  size_t cap = 1024;
  call* s = malloc(cap * sizeof *s);
  *n = 0;
  call c;
  while (s && fscanf(f, "%d %llu %d", &c.coll, &c.bytes, &c.pipe) == 3 && *n < MAX_CALLS) {
    if (*n == cap) {
      call* ns = realloc(s, 2 * cap * sizeof *s);
      if (!ns) { free(s); s = NULL; break; }
      s = ns;
      cap *= 2;
    }
    s[(*n)++] = c;
  }
  fclose(f);
  return s;
}

int main(int argc, char** argv) {
  if (argc < 5) { fprintf(stderr, "usage: %s LIB v5|v6 CHOICES_OUT SEQ_RANK0 [SEQ_RANK1 ...]\n", argv[0]); return 2; }
  int nRanks = argc - 4;
  if (nRanks > MAX_RANKS) { fprintf(stderr, "at most %d ranks\n", MAX_RANKS); return 2; }
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 2; }
  if (strcmp(argv[2], "v4") == 0) tuner4 = dlsym(lib, "ncclTunerPlugin_v4");
  else tuner = dlsym(lib, strcmp(argv[2], "v5") == 0 ? "ncclTunerPlugin_v5" : "ncclTunerPlugin_v6");
  share = dlsym(lib, "ccltuneArmShare_v1");
  if ((!tuner && !tuner4) || !share || share->version != 1) { fprintf(stderr, "missing symbols\n"); return 2; }
  keepLast = getenv("TEST_RANKS_KEEP_LAST") && !strcmp(getenv("TEST_RANKS_KEEP_LAST"), "1");
  CHECK(share->arm_of(COMM_ID) == -1, "no communicator yet: -1");
  rank_arg ranks[MAX_RANKS];
  pthread_t th[MAX_RANKS], prof;
  for (int r = 0; r < nRanks; r++) {
    ranks[r] = (rank_arg){.rank = r, .nRanks = nRanks};
    ranks[r].seq = read_seq(argv[4 + r], &ranks[r].n);
    if (!ranks[r].seq) return 2;
    ranks[r].choice = calloc(ranks[r].n ? ranks[r].n : 1, sizeof(int));
    CHECK(ranks[r].n == ranks[0].n, "rank %d has %zu calls, rank 0 %zu", r, ranks[r].n, ranks[0].n);
  }
  pthread_barrier_init(&start, NULL, (unsigned)nRanks);
  atomic_store(&running, 1);
  pthread_create(&prof, NULL, run_profiler, NULL);
  for (int r = 0; r < nRanks; r++) pthread_create(&th[r], NULL, run_rank, &ranks[r]);
  for (int r = 0; r < nRanks; r++) pthread_join(th[r], NULL);
  atomic_store(&running, 0);
  pthread_join(prof, NULL);
  if (!keepLast) CHECK(share->arm_of(COMM_ID) == -1, "every rank finalized: -1");
  if (tuner4) CHECK(atomic_load(&armsSeen) == 0, "v4 passes no commHash: arm_of knows nothing");
  CHECK(!atomic_load(&badArm), "arm_of returned an arm out of range");

  size_t mismatches = 0, n = ranks[0].n;
  for (int r = 0; r < nRanks; r++) {
    CHECK(ranks[r].initOk, "rank %d: init, getCollInfo and finalize returned ncclSuccess", r);
    for (size_t i = 0; i < n && i < ranks[r].n; i++)
      if (ranks[r].choice[i] != ranks[0].choice[i]) {
        if (mismatches++ < 5)
          printf("MISMATCH call %zu: rank %d chose %d, rank 0 %d\n", i, r, ranks[r].choice[i], ranks[0].choice[i]);
      }
  }
  CHECK(mismatches == 0, "%zu calls where a rank chose differently from rank 0", mismatches);
  FILE* out = fopen(argv[3], "w");
  CHECK(out != NULL, "open %s", argv[3]);
  if (out) {
    for (size_t i = 0; i < n; i++) fprintf(out, "%d %d\n", (ranks[0].choice[i] & 255) - 2, ranks[0].choice[i] >> 8);
    fclose(out);
  }
  printf("ranks %d calls %zu mismatches %zu arms_seen %u warnings %d\n", nRanks, n, mismatches, atomic_load(&armsSeen),
         atomic_load(&nWarn));
  for (int r = 0; r < nRanks; r++) {
    free((void*)ranks[r].seq);
    free(ranks[r].choice);
  }
  pthread_barrier_destroy(&start);
  (void)check_main; /* one fixed run: no named tests */
  printf("%s: %d of %d checks failed\n", failures ? "FAILED" : "OK", failures, total);
  return failures ? 1 : 0;
}
