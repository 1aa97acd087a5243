/* The profiler's core, independent of the ABI version. The files, each with one concern:
 *  - abi.c: each ABI version's descriptor turned into a cclp_event, then ctx.c or record.c;
 *  - ctx.c: a communicator context's whole life: open at init (config, tables, the arm share,
 *    the live list), close at finalize (flush, write, free), and the exit writer;
 *  - record.c: the lock-free hot path (events into the tables) and the handle -> context table;
 *  - write.c: the file's text from a context (no state of its own);
 *  - share.c: the tuner's ccltuneArmShare_v1, looked up with dlopen(RTLD_NOLOAD);
 *  - config.c, hist.c: the environment, logging, the clock; the histogram.
 * Calls go one way: abi.c -> ctx.c -> {record.c, write.c, share.c} -> {config.c, hist.c}
 * (record.c also -> share.c, for the lookup a communicator's first collective may redo).
 *
 * Per communicator (one cclp_ctx, allocated whole at init; nothing is allocated afterwards):
 *  - entries: an open-addressing table of CCLP_ENTRIES keys (kind, op, count, datatype, algo,
 *    proto, nChannels, nWarps, peer), each with calls, timed, sum, max and a histogram; a key
 *    is claimed with one compare-and-swap, counters are atomic adds;
 *  - arms: per arm in force (the tuner's, -1 without one) calls, timed, GPU sum and the calls
 *    whose key found no room in the entries (atomic adds);
 *  - slots: CCLP_SLOTS in-flight timed calls; call t (t-th sampled call) uses slot t % SLOTS;
 *  - lines: the first `calls_cap` timed calls (start/end ns, arm) for the call lines.
 * An event handle given to NCCL is not a pointer but a number that names the communicator
 * (its index in a process-wide table), the call's ticket and, for a kernel-channel event, the
 * channel: a late or stale event decodes to a slot whose ticket differs and is ignored, so no
 * handle can point at freed or reused memory. */
#ifndef CCLTUNE_PROFILER_PROF_H
#define CCLTUNE_PROFILER_PROF_H

#include "ccltune_profiler_abi.h"
#include "hist.h"

#include <stdatomic.h>
#include <stdint.h>

#define CCLP_ENTRIES 256    /* distinct keys per communicator */
#define CCLP_SLOTS 1024     /* timed calls in flight per communicator */
#define CCLP_MAX_COMMS 4096 /* communicators per process lifetime */
#define CCLP_NAME_LEN 32    /* op/datatype/algo/proto: 31 characters + NUL */
#define CCLP_CALLS_DEFAULT 4096
#define CCLP_CALLS_MAX (1 << 20)
#define CCLP_EVERY_MAX 1000000000
#define CCLP_ARMS 65 /* per-arm sums for arms -1 (none) .. 63; calls of other arms are counted apart */

/* CCLP_CE: a copy-engine collective (ABI v6, NCCL 2.29+): counted, written as a coll with algo CE,
 * never timed (see start_task). */
enum { CCLP_COLL = 1, CCLP_P2P = 2, CCLP_KERNEL_CH = 3, CCLP_OTHER = 4, CCLP_CE = 5 };

/* One start event, whatever the ABI version. Strings are NCCL's (or the v1 enum names). */
typedef struct {
  int type;
  void* parent;
  int rank;
  int has_hash; /* v1..v3: the communicator hash comes with each coll/p2p */
  uint64_t comm_hash;
  uint64_t seq;
  const char *func, *dtype, *algo, *proto; /* NULL: not known ('-') */
  uint64_t count;
  int nchannels, nwarps, peer; /* -1: not known */
  int channel;
  uint64_t ptimer; /* KernelCh start, v4+ */
} cclp_event;

typedef struct {
  _Atomic int state; /* 0 free, 1 being written, 2 ready */
  unsigned order;    /* claim order: the file lists entries in it */
  uint64_t hash;
  char kind, op[CCLP_NAME_LEN], dtype[CCLP_NAME_LEN], algo[CCLP_NAME_LEN], proto[CCLP_NAME_LEN];
  uint64_t count;
  int nchannels, nwarps, peer;
  _Atomic uint64_t calls, timed, sum_ns, max_ns;
  _Atomic uint32_t hist[CCLP_HIST_BUCKETS];
} cclp_entry;

typedef struct {
  _Atomic uint64_t owner;    /* ticket + 1 of the call using the slot; 0 free */
  _Atomic int remaining;     /* stops still to come: the task's own + one per kernel channel */
  _Atomic uint32_t kstops;   /* kernel channels stopped */
  _Atomic uint64_t gpu_start, gpu_stop; /* earliest channel start, latest channel stop */
  uint64_t host_start;       /* v1..v3: host clock at the task's start */
  uint64_t seq;
  int entry, arm;
} cclp_slot;

typedef struct {
  _Atomic int ready;
  int entry, arm;
  uint64_t ticket, seq, start_ns, end_ns;
} cclp_line;

typedef struct {
  _Atomic uint64_t calls, timed, sum_ns, no_entry;
} cclp_arm_sum;

/* share.c: the tuner plugin's exported arm share (CONTRACTS.md section 2; the tuner writes it as
 * `const ccltuneArmShare_v1`). arm_of(commHash): the arm in force for the communicator, -1 when it
 * has no arms; the tuner answers without locking (it is called on every collective's start). */
typedef struct {
  int version; /* 1 */
  int (*arm_of)(uint64_t commHash);
} ccltuneArmShare_v1_t;

typedef struct {
  int (*arm_of)(uint64_t);
  void* lib;       /* our reference to the tuner's library (RTLD_NOLOAD took one): dropped at close */
  char why[160];   /* "" when found, else why there are no arms (written in the file's '# arms' line) */
} cclp_share;

typedef struct cclp_ctx {
  struct cclp_ctx* next; /* live list, for the exit writer */
  unsigned index;        /* in the process-wide table: part of every handle */
  int abi, gpu_timing;
  int has_comm; /* the hash and rank are known (v4+ at init; v1..v3 from the first event) */
  uint64_t comm_hash;
  int rank, nranks, nnodes;
  uint64_t every;
  uint32_t calls_cap;
  ncclDebugLogger_t logger;
  char dir[4096];
  char host[256];
  _Atomic uint64_t ncalls, nsampled, np2p;
  _Atomic unsigned nentries;
  _Atomic uint64_t dropped_entries, nlines, dropped_lines, lost_calls, arm_outside;
  /* 0: not looked up yet (init found no tuner), 1: a thread is looking, 2: `share` is final */
  _Atomic int share_state;
  cclp_share share;
  cclp_arm_sum arms[CCLP_ARMS]; /* arm a at a + 1 */
  cclp_entry entries[CCLP_ENTRIES];
  cclp_slot slots[CCLP_SLOTS];
  cclp_line* lines; /* calls_cap of them, allocated with the context */
} cclp_ctx;

/* config.c: reads CCLTUNE_PROFILE* once per init; logs bad values (one line each). */
typedef struct {
  const char* dir; /* NULL: profiling off */
  uint64_t every;
  uint32_t calls;
} cclp_config;
int cclp_read_config(cclp_config* cfg, ncclDebugLogger_t logger);
void cclp_log(ncclDebugLogger_t logger, ncclDebugLogLevel level, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));
uint64_t cclp_now_ns(void); /* CLOCK_REALTIME: comparable across processes of a host */

/* ctx.c: a context's life */
cclp_ctx* cclp_ctx_open(int abi, int has_comm, uint64_t comm_hash, int rank, int nranks, int nnodes,
                        ncclDebugLogger_t logger, int* mask);
int cclp_close(cclp_ctx* ctx); /* flushes, writes the file, unregisters and frees ctx */

/* record.c: the hot path, and the process-wide table handles name contexts by */
int cclp_register(cclp_ctx* ctx); /* sets ctx->index; 0, or -1 when the table is full */
void cclp_unregister(cclp_ctx* ctx);
void cclp_start(cclp_ctx* ctx, void** handle, const cclp_event* ev);
void cclp_stop(void* handle);
void cclp_record_stop_timer(void* handle, uint64_t ptimer);
void cclp_flush_pending(cclp_ctx* ctx); /* records calls still waiting for stops, if timed */

/* write.c: the file of ctx. Returns 0, 1 (nothing to write: why says so) or -1 (why: the error). */
int cclp_write_file(cclp_ctx* ctx, const char** why);

/* share.c: never on the hot path's common case (dlopen takes the loader's lock). NOT_LOADED: NCCL_TUNER_PLUGIN
 * names a library not loaded yet (NCCL loads the tuner after the profiler in a communicator's init). */
enum { CCLP_SHARE_FOUND, CCLP_SHARE_NOT_LOADED, CCLP_SHARE_ABSENT };
int cclp_share_find(cclp_share* share);
void cclp_share_release(cclp_share* share);

#endif
