/* Workload capture (see capture.h). One calloc per communicator at init holds a fixed
 * open-addressing table of (key, count) slots. A key packs the call into 64 bits:
 *   bits  0..47  nBytes (below 256 TiB)
 *   bits 48..51  collective + 1 (so a key is never 0, the empty slot)
 *   bits 52..53  regBuff + 1 (-1 unknown, 0, 1)
 *   bits 54..63  numPipeOps (0..1023)
 * The file is written by commfile.c (shared with the arm log).
 * getCollInfo claims a slot with one compare-and-swap and counts with one relaxed atomic
 * add: lock-free, so NCCL may call it from any thread. A call whose key does not pack, or
 * that finds no slot within CCLT_CAPTURE_PROBES probes, is added to overflow_calls and
 * overflow_bytes, which the file reports: nothing is dropped silently. */
#include "capture.h"
#include "commfile.h"
#include "rules.h" /* ccl_coll_names */

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LOG_FLAGS (NCCL_TUNING | NCCL_INIT)
#define LOG(logger, level, ...) \
  do { if (logger) (logger)(level, LOG_FLAGS, __FILE__, __LINE__, __VA_ARGS__); } while (0)

#define MASK (CCLT_CAPTURE_SLOTS - 1)
_Static_assert((CCLT_CAPTURE_SLOTS & MASK) == 0, "slot count must be a power of two");

typedef struct {
  _Atomic uint64_t key;
  _Atomic uint64_t count;
} slot;

struct ccl_capture {
  ccl_commfile file; /* name, folder, live list, exit writer */
  size_t nRanks, nNodes;
  _Atomic uint64_t overflowCalls, overflowBytes; /* calls = these + the slots' counts */
  slot slots[CCLT_CAPTURE_SLOTS];
};

static uint64_t pack(int coll, uint64_t nBytes, int numPipeOps, int regBuff) {
  if (coll < 0 || coll > 14 || nBytes >> 48 || numPipeOps < 0 || numPipeOps > 1023 || regBuff < -1 ||
      regBuff > 1)
    return 0;
  return nBytes | (uint64_t)(coll + 1) << 48 | (uint64_t)(regBuff + 1) << 52 | (uint64_t)numPipeOps << 54;
}

void ccl_capture_record(ccl_capture* c, int coll, uint64_t nBytes, int numPipeOps, int regBuff) {
  if (!c) return;
  uint64_t key = pack(coll, nBytes, numPipeOps, regBuff);
  if (key) {
    uint64_t h = (key * 0x9e3779b97f4a7c15ull) >> 52; /* 12 bits: CCLT_CAPTURE_SLOTS */
    for (int i = 0; i < CCLT_CAPTURE_PROBES; i++) {
      slot* s = &c->slots[(h + (uint64_t)i) & MASK];
      uint64_t k = atomic_load_explicit(&s->key, memory_order_relaxed);
      if (k == 0) {
        uint64_t expected = 0;
        if (atomic_compare_exchange_strong_explicit(&s->key, &expected, key, memory_order_relaxed,
                                                    memory_order_relaxed))
          k = key;
        else
          k = expected; /* another thread claimed it first: maybe with our key */
      }
      if (k == key) {
        atomic_fetch_add_explicit(&s->count, 1, memory_order_relaxed);
        return;
      }
    }
  }
  atomic_fetch_add_explicit(&c->overflowCalls, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&c->overflowBytes, nBytes, memory_order_relaxed);
}

static int write_body(FILE* f, void* owner, const char* closedBy);

ccl_capture* ccl_capture_open(uint64_t commId, int hasCommId, unsigned seq, size_t nRanks, size_t nNodes,
                              ncclDebugLogger_t logger) {
  const char* dir = getenv("CCLTUNE_CAPTURE");
  if (!dir || !*dir) return NULL;
  ccl_capture* c = calloc(1, sizeof *c);
  if (!c) {
    LOG(logger, NCCL_LOG_WARN, "ccltune tuner: out of memory for the capture table; no capture");
    return NULL;
  }
  c->nRanks = nRanks;
  c->nNodes = nNodes;
  if (ccl_commfile_open(&c->file, "capture", "CCLTUNE_CAPTURE", dir, commId, hasCommId, seq, logger, write_body,
                        c) != 0) {
    free(c);
    return NULL;
  }
  LOG(logger, NCCL_LOG_INFO, "ccltune tuner: capturing this communicator's getCollInfo calls into %s", dir);
  return c;
}

static int write_body(FILE* f, void* owner, const char* closedBy) {
  const ccl_capture* c = owner;
  fprintf(f, "# ccltune-capture 1\n");
  fprintf(f, "# written by the ccltune NCCL tuner plugin: one line per distinct getCollInfo call\n");
  fprintf(f, "host=%s\npid=%ld\n", c->file.host, (long)getpid());
  if (c->file.hasCommId) fprintf(f, "comm_id=0x%016llx\n", (unsigned long long)c->file.commId);
  else fprintf(f, "comm_id=unknown\n");
  fprintf(f, "comm_seq=%u\nnranks=%zu\nnnodes=%zu\nclosed_by=%s\nslots=%d\n", c->file.seq, c->nRanks, c->nNodes,
          closedBy, CCLT_CAPTURE_SLOTS);
  uint64_t calls = atomic_load(&c->overflowCalls);
  for (int i = 0; i < CCLT_CAPTURE_SLOTS; i++) calls += atomic_load(&c->slots[i].count);
  fprintf(f, "calls=%llu\noverflow_calls=%llu\noverflow_bytes=%llu\n", (unsigned long long)calls,
          (unsigned long long)atomic_load(&c->overflowCalls), (unsigned long long)atomic_load(&c->overflowBytes));
  fprintf(f, "# collective,nbytes,num_pipe_ops,reg_buff,calls\n");
  for (int i = 0; i < CCLT_CAPTURE_SLOTS; i++) {
    uint64_t k = atomic_load(&c->slots[i].key), n = atomic_load(&c->slots[i].count);
    if (!k || !n) continue;
    int coll = (int)(k >> 48 & 15) - 1, reg = (int)(k >> 52 & 3) - 1, pipe = (int)(k >> 54);
    unsigned long long bytes = k & ((1ull << 48) - 1);
    if (coll < CCLT_NUM_COLL_IDS)
      fprintf(f, "%s,%llu,%d,%d,%llu\n", ccl_coll_names[coll], bytes, pipe, reg, (unsigned long long)n);
    else fprintf(f, "func%d,%llu,%d,%d,%llu\n", coll, bytes, pipe, reg, (unsigned long long)n);
  }
  return fprintf(f, "# end\n") < 0 ? -1 : 0;
}

/* The file is written through commfile.c; a capture that could not be written returns -1. */
int ccl_capture_close(ccl_capture* c) {
  if (!c) return 0;
  int rc = ccl_commfile_close(&c->file);
  free(c);
  return rc;
}
