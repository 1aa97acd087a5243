/* In-run arms per communicator (arms.h): the call counter, period detection, block switches,
 * the arm log and the arm-share table the profiler plugin reads (ccltuneArmShare_v1).
 *
 * The schedule is keyed on the communicator's own getCollInfo call count, which is the same on
 * every rank (NCCL asks once per group of merged tasks, in the same order everywhere): call i
 * (0-based) before the period is known runs arm 0; once known at call F (the first call after the
 * check that found it; 0 for period=<int>), block b covers calls [F + b*B, F + (b+1)*B) with
 * B = block_periods * period, and runs ccl_arm_at(b); from block max_blocks on, arm 0 again. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "arms.h"

#define EXPORT __attribute__((visibility("default")))
#define LOG_FLAGS (NCCL_TUNING | NCCL_INIT)
#define LOG(logger, level, ...) \
  do { if (logger) (logger)(level, LOG_FLAGS, __FILE__, __LINE__, __VA_ARGS__); } while (0)

typedef struct {
  uint64_t firstCall;
  int64_t tNs;
  uint64_t block;
  int arm;
} block_entry;

struct ccl_arms {
  ccl_commfile file;
  ccl_arms_cfg cfg;
  ccl_comm* rules[CCLT_ARMS_MAX]; /* [0] and default twins: NULL */
  size_t nRanks;
  int share; /* slot in the share table, -1: none (no commId, a second rank of the same communicator) */
  /* read by the log writer from another thread: atomics */
  _Atomic uint64_t calls;
  _Atomic uint64_t period;    /* 0: not known */
  _Atomic uint64_t repeat;    /* period=auto: the call sequence's own period (period is a multiple of it) */
  _Atomic uint64_t foundAt;
  _Atomic uint32_t nEntries;  /* entries[0..nEntries) are complete (release/acquire) */
  /* only the thread that calls getCollInfo touches these */
  uint64_t blockCalls, blockStart, nextCheck;
  int inBlock, done, arm;
  uint64_t* keys; /* period=auto: the first CCLT_ARMS_KEY_CAP keys; NULL once not needed */
  int32_t* work;
  block_entry* entries;
  uint32_t capEntries;
};

/* ---- the share table: commHash -> arm in force, read lock-free by ccltuneArmShare_v1.arm_of ---- */
#define SHARE_SLOTS 1024
#define SHARE_PROBES 64
#define SHARE_FREE (-2) /* a finalized communicator's slot: only the same commHash takes it again */
typedef struct {
  _Atomic uint64_t hash;
  _Atomic int arm;
} share_slot;
static share_slot share_table[SHARE_SLOTS];

static uint64_t share_home(uint64_t h) { return (h * 0x9e3779b97f4a7c15ull) >> 54; /* 10 bits */ }

/* The first context of a commHash in this process owns its slot; others get -1. */
static int share_claim(uint64_t hash) {
  if (!hash) return -1;
  for (int i = 0; i < SHARE_PROBES; i++) {
    int s = (int)((share_home(hash) + (uint64_t)i) & (SHARE_SLOTS - 1));
    uint64_t expected = 0;
    if (atomic_compare_exchange_strong(&share_table[s].hash, &expected, hash) || expected == hash) {
      int was = SHARE_FREE;
      if (expected == 0) { atomic_store(&share_table[s].arm, 0); return s; }
      return atomic_compare_exchange_strong(&share_table[s].arm, &was, 0) ? s : -1;
    }
  }
  return -1;
}

static int arm_of(uint64_t hash) {
  if (!hash) return -1;
  for (int i = 0; i < SHARE_PROBES; i++) {
    const share_slot* s = &share_table[(share_home(hash) + (uint64_t)i) & (SHARE_SLOTS - 1)];
    uint64_t h = atomic_load_explicit(&s->hash, memory_order_acquire);
    if (h == hash) {
      int arm = atomic_load_explicit(&s->arm, memory_order_relaxed);
      return arm >= 0 ? arm : -1;
    }
    if (h == 0) return -1;
  }
  return -1;
}

EXPORT const ccltuneArmShare_v1_t ccltuneArmShare_v1 = {.version = 1, .arm_of = arm_of};

/* ---- open / close ---- */
static int write_log(FILE* f, void* owner, const char* closedBy);

static void free_arms(ccl_arms* a) {
  for (int i = 0; i < CCLT_ARMS_MAX; i++) ccl_comm_free(a->rules[i]);
  ccl_arms_cfg_free(&a->cfg);
  free(a->keys);
  free(a->work);
  free(a->entries);
  free(a);
}

ccl_arms* ccl_arms_open(uint64_t commId, int hasCommId, unsigned seq, size_t nRanks, ncclDebugLogger_t logger,
                        ccl_arms_loader load, void* user) {
  const char* path = getenv("CCLTUNE_ARMS");
  if (!path || !*path) return NULL;
  ccl_arms* a = calloc(1, sizeof *a);
  if (!a) {
    LOG(logger, NCCL_LOG_WARN, "ccltune tuner: out of memory for in-run arms; NCCL's default runs");
    return NULL;
  }
  char why[600];
  if (ccl_arms_parse_file(path, &a->cfg, why, sizeof why)) {
    LOG(logger, NCCL_LOG_WARN, "ccltune tuner: CCLTUNE_ARMS=%s: %s; no in-run arms, NCCL's default runs", path, why);
    free(a);
    return NULL;
  }
  if (a->cfg.onlyRanks && (size_t)a->cfg.onlyRanks != nRanks) {
    LOG(logger, NCCL_LOG_INFO, "ccltune tuner: CCLTUNE_ARMS=%s: in-run arms on communicators of %d ranks only: this "
        "one has %zu, NCCL's default runs", path, a->cfg.onlyRanks, nRanks);
    ccl_arms_cfg_free(&a->cfg);
    free(a);
    return NULL;
  }
  for (int i = 1; i < a->cfg.nArms; i++) {
    if (!a->cfg.rules[i]) continue;
    why[0] = '\0';
    a->rules[i] = load(a->cfg.rules[i], user, why, sizeof why);
    if (!a->rules[i]) {
      LOG(logger, NCCL_LOG_WARN, "ccltune tuner: CCLTUNE_ARMS=%s: arm %s: its rule file %s cannot be used (%s); no "
          "in-run arms, NCCL's default runs", path, a->cfg.names[i], a->cfg.rules[i], why);
      free_arms(a);
      return NULL;
    }
  }
  a->nRanks = nRanks;
  a->capEntries = (uint32_t)a->cfg.maxBlocks + 1;
  a->entries = malloc(sizeof *a->entries * a->capEntries);
  if (a->cfg.period) {
    a->blockCalls = (uint64_t)a->cfg.period * (uint64_t)a->cfg.blockPeriods;
    atomic_store(&a->period, (uint64_t)a->cfg.period);
  } else {
    a->keys = malloc(sizeof *a->keys * CCLT_ARMS_KEY_CAP);
    a->work = malloc(sizeof *a->work * CCLT_ARMS_KEY_CAP);
    a->nextCheck = CCLT_ARMS_FIRST_CHECK;
  }
  if (!a->entries || (!a->cfg.period && (!a->keys || !a->work))) {
    LOG(logger, NCCL_LOG_WARN, "ccltune tuner: out of memory for in-run arms; NCCL's default runs");
    free_arms(a);
    return NULL;
  }
  if (ccl_commfile_open(&a->file, "arms", "CCLTUNE_ARMS log=", a->cfg.log, commId, hasCommId, seq, logger,
                        write_log, a) != 0) {
    free_arms(a);
    return NULL;
  }
  a->share = hasCommId ? share_claim(commId) : -1;
  char period[48];
  if (a->cfg.period) snprintf(period, sizeof period, "%d", a->cfg.period);
  else if (a->cfg.stepCalls) snprintf(period, sizeof period, "auto (step ~%d calls)", a->cfg.stepCalls);
  else strcpy(period, "auto");
  LOG(logger, NCCL_LOG_INFO, "ccltune tuner: in-run arms from %s: %d arms, period %s, %d periods a block, "
      "%d warm-up blocks, at most %d blocks, seed %llu; arm log into %s", path, a->cfg.nArms, period,
      a->cfg.blockPeriods, a->cfg.warmupBlocks, a->cfg.maxBlocks, (unsigned long long)a->cfg.seed, a->cfg.log);
  return a;
}

int ccl_arms_close(ccl_arms* a) {
  if (!a) return 0;
  if (a->share >= 0) atomic_store(&share_table[a->share].arm, SHARE_FREE);
  int rc = ccl_commfile_close(&a->file);
  free_arms(a);
  return rc;
}

/* ---- hot path ---- */
static void publish(ccl_arms* a, int arm) {
  a->arm = arm;
  if (a->share >= 0) atomic_store_explicit(&share_table[a->share].arm, arm, memory_order_relaxed);
}

/* Call i starts a block (or, past max_blocks, the end of the schedule: arm 0 from then on). */
static void switch_block(ccl_arms* a, uint64_t i) {
  uint64_t found = atomic_load_explicit(&a->foundAt, memory_order_relaxed);
  uint64_t b = (i - found) / a->blockCalls;
  int arm = 0;
  if (b >= (uint64_t)a->cfg.maxBlocks) {
    a->done = 1;
    b = (uint64_t)a->cfg.maxBlocks;
  } else {
    arm = ccl_arm_at(b, a->cfg.nArms, a->cfg.seed, (uint64_t)a->cfg.warmupBlocks);
  }
  a->inBlock = 1;
  a->blockStart = found + b * a->blockCalls;
  struct timespec ts = {0, 0};
  clock_gettime(CLOCK_REALTIME, &ts);
  uint32_t n = atomic_load_explicit(&a->nEntries, memory_order_relaxed);
  if (n < a->capEntries) {
    a->entries[n] = (block_entry){.firstCall = i, .tNs = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec,
                                  .block = b, .arm = arm};
    atomic_store_explicit(&a->nEntries, n + 1, memory_order_release);
  }
  publish(a, arm);
}

static void detect(ccl_arms* a, uint64_t n) {
  uint32_t p = ccl_period_detect(a->keys, (uint32_t)n, a->work);
  if (p) {
    uint64_t period = ccl_arms_step_period(p, a->cfg.stepCalls);
    a->blockCalls = period * (uint64_t)a->cfg.blockPeriods;
    atomic_store_explicit(&a->foundAt, n, memory_order_relaxed);
    atomic_store_explicit(&a->repeat, p, memory_order_relaxed);
    atomic_store_explicit(&a->period, period, memory_order_release);
    a->nextCheck = 0;
  } else {
    a->nextCheck = n * 4 <= CCLT_ARMS_KEY_CAP ? n * 4 : 0; /* 0: gave up, period=none */
  }
}

const ccl_comm* ccl_arms_rules(ccl_arms* a, int coll, uint64_t nBytes, int numPipeOps) {
  uint64_t i = atomic_fetch_add_explicit(&a->calls, 1, memory_order_relaxed);
  if (a->done) return NULL;
  if (!a->blockCalls) { /* period=auto, not found yet: arm 0 */
    if (a->nextCheck && i < CCLT_ARMS_KEY_CAP) {
      a->keys[i] = ccl_arms_key(coll, nBytes, numPipeOps);
      if (i + 1 == a->nextCheck) detect(a, i + 1);
    }
    return NULL;
  }
  if (!a->inBlock || i - a->blockStart >= a->blockCalls) {
    switch_block(a, i);
    if (a->done) return NULL;
  }
  return a->rules[a->arm];
}

/* ---- the arm log (format: docs/plugin.md "In-run arms") ---- */
static int write_log(FILE* f, void* owner, const char* closedBy) {
  (void)closedBy;
  const ccl_arms* a = owner;
  fprintf(f, "# ccltune-arms 1\nhost=%s\npid=%ld\n", a->file.host, (long)getpid());
  if (a->file.hasCommId) fprintf(f, "comm_id=0x%016llx\n", (unsigned long long)a->file.commId);
  else fprintf(f, "comm_id=unknown\n");
  fprintf(f, "comm_seq=%u\nnranks=%zu\nseed=%llu\n", a->file.seq, a->nRanks, (unsigned long long)a->cfg.seed);
  uint64_t period = atomic_load_explicit(&a->period, memory_order_acquire);
  uint64_t repeat = atomic_load_explicit(&a->repeat, memory_order_relaxed);
  if (period)
    fprintf(f, "period=%llu\nperiod_found_at=%llu\nblock_calls=%llu\n", (unsigned long long)period,
            (unsigned long long)atomic_load_explicit(&a->foundAt, memory_order_relaxed),
            (unsigned long long)period * (unsigned long long)a->cfg.blockPeriods);
  else
    fprintf(f, "period=none\nperiod_found_at=none\nblock_calls=none\n");
  if (repeat) fprintf(f, "sequence_period=%llu\nstep_calls=%d\n", (unsigned long long)repeat, a->cfg.stepCalls);
  fprintf(f, "arms=");
  for (int i = 0; i < a->cfg.nArms; i++) fprintf(f, "%s%s", i ? "," : "", a->cfg.names[i]);
  fprintf(f, "\ncalls=%llu\n# block,arm,first_call,t_ns\n",
          (unsigned long long)atomic_load_explicit(&a->calls, memory_order_relaxed));
  uint32_t n = atomic_load_explicit(&a->nEntries, memory_order_acquire);
  for (uint32_t k = 0; k < n; k++)
    fprintf(f, "%llu,%d,%llu,%lld\n", (unsigned long long)a->entries[k].block, a->entries[k].arm,
            (unsigned long long)a->entries[k].firstCall, (long long)a->entries[k].tNs);
  return fprintf(f, "# end\n") < 0 ? -1 : 0;
}
