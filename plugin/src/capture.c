/* Workload capture (see capture.h). One calloc per communicator at init holds a fixed
 * open-addressing table of (key, count) slots. A key packs the call into 64 bits:
 *   bits  0..47  nBytes (below 256 TiB)
 *   bits 48..51  collective + 1 (so a key is never 0, the empty slot)
 *   bits 52..53  regBuff + 1 (-1 unknown, 0, 1)
 *   bits 54..63  numPipeOps (0..1023)
 * getCollInfo claims a slot with one compare-and-swap and counts with one relaxed atomic
 * add: lock-free, so NCCL may call it from any thread. A call whose key does not pack, or
 * that finds no slot within CCLT_CAPTURE_PROBES probes, is added to overflow_calls and
 * overflow_bytes, which the file reports: nothing is dropped silently. */
#include "capture.h"
#include "rules.h" /* ccl_coll_names */

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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
  struct ccl_capture* next; /* live list, for the exit writer */
  uint64_t commId;
  int hasCommId;
  unsigned seq;
  size_t nRanks, nNodes;
  ncclDebugLogger_t logger;
  char dir[4096];
  char host[256];
  _Atomic uint64_t overflowCalls, overflowBytes; /* calls = these + the slots' counts */
  slot slots[CCLT_CAPTURE_SLOTS];
};

static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static ccl_capture* live;
static unsigned next_seq;
static int exit_hook;

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

static void sanitize(char* s) {
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '.' ||
          *s == '-' || *s == '_'))
      *s = '_';
}

static void write_at_exit(void);

ccl_capture* ccl_capture_open(uint64_t commId, int hasCommId, size_t nRanks, size_t nNodes,
                              ncclDebugLogger_t logger) {
  const char* dir = getenv("CCLTUNE_CAPTURE");
  if (!dir || !*dir) return NULL;
  if (strlen(dir) >= sizeof(((ccl_capture*)0)->dir) - 256) {
    LOG(logger, NCCL_LOG_WARN, "ccltune tuner: CCLTUNE_CAPTURE is too long (%zu bytes); no capture", strlen(dir));
    return NULL;
  }
  if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
    LOG(logger, NCCL_LOG_WARN, "ccltune tuner: CCLTUNE_CAPTURE=%s: cannot create it (%s); no capture", dir,
        strerror(errno));
    return NULL;
  }
  if (access(dir, W_OK | X_OK) != 0) {
    LOG(logger, NCCL_LOG_WARN, "ccltune tuner: CCLTUNE_CAPTURE=%s: not a writable directory (%s); no capture",
        dir, strerror(errno));
    return NULL;
  }
  ccl_capture* c = calloc(1, sizeof *c);
  if (!c) {
    LOG(logger, NCCL_LOG_WARN, "ccltune tuner: out of memory for the capture table; no capture");
    return NULL;
  }
  c->commId = commId;
  c->hasCommId = hasCommId;
  c->nRanks = nRanks;
  c->nNodes = nNodes;
  c->logger = logger;
  strcpy(c->dir, dir);
  if (gethostname(c->host, sizeof c->host - 1) != 0 || !c->host[0]) strcpy(c->host, "unknown");
  sanitize(c->host);
  pthread_mutex_lock(&live_lock);
  if (!exit_hook) exit_hook = atexit(write_at_exit) == 0;
  c->seq = next_seq++;
  c->next = live;
  live = c;
  pthread_mutex_unlock(&live_lock);
  LOG(logger, NCCL_LOG_INFO, "ccltune tuner: capturing this communicator's getCollInfo calls into %s", dir);
  return c;
}

/* Writes the file of c; closedBy names the event. Returns 0 or -1 (errno-style reason in why). */
static int write_file(ccl_capture* c, const char* closedBy, const char** why) {
  char name[512], path[sizeof c->dir + sizeof name + 2], tmp[sizeof path + 8];
  if (c->hasCommId)
    snprintf(name, sizeof name, "ccltune-capture.%s.%ld.%016llx.%u.txt", c->host, (long)getpid(),
             (unsigned long long)c->commId, c->seq);
  else
    snprintf(name, sizeof name, "ccltune-capture.%s.%ld.nocommid.%u.txt", c->host, (long)getpid(), c->seq);
  snprintf(path, sizeof path, "%s/%s", c->dir, name);
  snprintf(tmp, sizeof tmp, "%s/.%s.XXXXXX", c->dir, name);
  int fd = mkstemp(tmp);
  if (fd < 0) { *why = strerror(errno); return -1; }
  FILE* f = fdopen(fd, "w");
  if (!f) { *why = strerror(errno); close(fd); unlink(tmp); return -1; }
  fprintf(f, "# ccltune-capture 1\n");
  fprintf(f, "# written by the ccltune NCCL tuner plugin: one line per distinct getCollInfo call\n");
  fprintf(f, "host=%s\npid=%ld\n", c->host, (long)getpid());
  if (c->hasCommId) fprintf(f, "comm_id=0x%016llx\n", (unsigned long long)c->commId);
  else fprintf(f, "comm_id=unknown\n");
  fprintf(f, "comm_seq=%u\nnranks=%zu\nnnodes=%zu\nclosed_by=%s\nslots=%d\n", c->seq, c->nRanks, c->nNodes,
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
  fprintf(f, "# end\n");
  int bad = fflush(f) != 0 || fsync(fd) != 0;
  int err = errno;
  if (fclose(f) != 0 && !bad) { bad = 1; err = errno; }
  if (!bad && rename(tmp, path) != 0) { bad = 1; err = errno; }
  if (bad) { unlink(tmp); *why = strerror(err); return -1; }
  return 0;
}

static int unlink_live(ccl_capture* c) {
  int found = 0;
  pthread_mutex_lock(&live_lock);
  for (ccl_capture** p = &live; *p; p = &(*p)->next)
    if (*p == c) { *p = c->next; found = 1; break; }
  pthread_mutex_unlock(&live_lock);
  return found;
}

int ccl_capture_close(ccl_capture* c) {
  if (!c) return 0;
  unlink_live(c);
  const char* why = "";
  int rc = write_file(c, "finalize", &why);
  if (rc) LOG(c->logger, NCCL_LOG_WARN, "ccltune tuner: cannot write the capture into %s: %s", c->dir, why);
  free(c);
  return rc;
}

/* Communicators never finalized (common: a job exits without destroying its process
 * group). NCCL's logger may be gone by now, so failures go to stderr. The tables stay
 * allocated and listed: other threads may still be inside getCollInfo, and a finalize
 * that comes later still writes its (complete) file over this one. */
static void write_at_exit(void) {
  pthread_mutex_lock(&live_lock);
  for (ccl_capture* c = live; c; c = c->next) {
    const char* why = "";
    if (write_file(c, "exit", &why))
      fprintf(stderr, "ccltune tuner: cannot write the capture into %s: %s\n", c->dir, why);
  }
  pthread_mutex_unlock(&live_lock);
}
