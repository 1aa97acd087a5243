/* The profiler's core, independent of the ABI version: abi.c turns each version's descriptor
 * into a cclp_event and calls these; record.c keeps the tables; write.c writes the file.
 *
 * Per communicator (one cclp_ctx, allocated whole at init; nothing is allocated afterwards):
 *  - entries: an open-addressing table of CCLP_ENTRIES keys (kind, op, count, datatype, algo,
 *    proto, nChannels, nWarps, peer), each with calls, timed, sum, max and a histogram; a key
 *    is claimed with one compare-and-swap, counters are atomic adds;
 *  - slots: CCLP_SLOTS in-flight timed calls; call t (t-th sampled call) uses slot t % SLOTS;
 *  - lines: the first `calls_cap` timed calls (start/end ns) for the call lines.
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
  int entry;
} cclp_slot;

typedef struct {
  _Atomic int ready;
  int entry;
  uint64_t ticket, seq, start_ns, end_ns;
} cclp_line;

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
  _Atomic uint64_t dropped_entries, nlines, dropped_lines, lost_calls;
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

/* record.c */
cclp_ctx* cclp_ctx_open(int abi, int has_comm, uint64_t comm_hash, int rank, int nranks, int nnodes,
                        ncclDebugLogger_t logger, int* mask);
void cclp_start(cclp_ctx* ctx, void** handle, const cclp_event* ev);
void cclp_stop(void* handle);
void cclp_record_stop_timer(void* handle, uint64_t ptimer);
void cclp_flush_pending(cclp_ctx* ctx); /* records calls still waiting for stops, if timed */
cclp_ctx* cclp_ctx_of(unsigned index);
void cclp_ctx_forget(cclp_ctx* ctx);

/* write.c */
void cclp_live_add(cclp_ctx* ctx);
int cclp_close(cclp_ctx* ctx); /* writes the file, unlinks and frees ctx */

#endif
