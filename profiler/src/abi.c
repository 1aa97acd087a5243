/* The exported ncclProfiler_v1 .. v6 structs: each version's init and startEvent turn NCCL's
 * arguments into the version-free calls of prof.h; stopEvent and finalize are shared, and
 * recordEventState differs only in whether a GPU timer comes with the KernelCh stop (v4+).
 *
 * With CCLTUNE_PROFILE unset, init sets the activation mask to 0 and returns no context:
 * NCCL then starts no event at all, so the plugin costs nothing (NCCL keeps one process-wide
 * mask, which every init writes). */
#include "prof.h"

#include <stdio.h>

#define EXPORT __attribute__((visibility("default")))
#define PLUGIN_NAME "ccltune-profiler"

static ncclResult_t stop_event(void* handle) {
  if (handle) cclp_stop(handle);
  return ncclSuccess;
}

static ncclResult_t finalize(void* context) {
  if (context) cclp_close(context);
  return ncclSuccess;
}

static ncclResult_t init_any(int abi, void** context, int* mask, int has_comm, uint64_t hash, int nnodes,
                             int nranks, int rank, ncclDebugLogger_t logger) {
  *context = NULL;
  int want = -1; /* -1: this communicator could not get tables; leave the others' mask alone */
  cclp_ctx* ctx = cclp_ctx_open(abi, has_comm, hash, rank, nranks, nnodes, logger, &want);
  if (want >= 0) __atomic_store_n(mask, want, __ATOMIC_RELAXED);
  *context = ctx;
  return ncclSuccess;
}

/* ---- v1..v3: no comm facts at init, no GPU timers; host time of the task ------------------ */

static ncclResult_t init_v1(void** c, int* m) { return init_any(1, c, m, 0, 0, -1, -1, -1, NULL); }
static ncclResult_t init_v2(void** c, int* m) { return init_any(2, c, m, 0, 0, -1, -1, -1, NULL); }
static ncclResult_t init_v3(void** c, int* m) { return init_any(3, c, m, 0, 0, -1, -1, -1, NULL); }

static const char* enum_name(unsigned v, const char* const* names, unsigned n, char* buf, const char* what) {
  if (v < n) return names[v];
  snprintf(buf, 16, "%s%u", what, v);
  return buf;
}

static ncclResult_t start_v1(void* context, void** handle, ncclProfilerEventDescr_v1_t* d) {
  static const char* const funcs[] = {CCLP_V1_FUNC_NAMES}, *const dtypes[] = {CCLP_V1_DTYPE_NAMES},
                           *const algos[] = {CCLP_V1_ALGO_NAMES}, *const protos[] = {CCLP_V1_PROTO_NAMES};
  char b0[16], b1[16], b2[16], b3[16];
  cclp_event ev = {.type = CCLP_OTHER, .parent = d->parentObj, .rank = d->rank, .has_hash = 1,
                   .nchannels = -1, .nwarps = -1, .peer = -1};
  if (d->type == ncclProfileColl) {
    ev.type = CCLP_COLL;
    ev.comm_hash = d->coll.commHash;
    ev.seq = d->coll.seqNumber;
    ev.func = enum_name(d->coll.func, funcs, 8, b0, "func");
    ev.dtype = enum_name(d->coll.datatype, dtypes, 12, b1, "type");
    ev.algo = enum_name(d->coll.algo, algos, 7, b2, "algo");
    ev.proto = enum_name(d->coll.proto, protos, 3, b3, "proto");
    ev.count = d->coll.count;
    ev.nchannels = d->coll.nMaxChannels;
    ev.nwarps = d->coll.nWarps;
  } else if (d->type == ncclProfileP2p) {
    ev.type = CCLP_P2P;
    ev.comm_hash = d->p2p.commHash;
    ev.func = enum_name(d->p2p.func, funcs, 8, b0, "func");
    ev.dtype = enum_name(d->p2p.datatype, dtypes, 12, b1, "type");
    ev.count = d->p2p.count;
    ev.peer = d->p2p.peer;
  }
  cclp_start(context, handle, &ev);
  return ncclSuccess;
}

/* v2 and v3 share the coll/p2p fields this plugin reads, at different offsets. */
#define START_V2V3(V)                                                                         \
  static ncclResult_t start_v##V(void* context, void** handle, ncclProfilerEventDescr_v##V##_t* d) { \
    cclp_event ev = {.type = CCLP_OTHER, .parent = d->parentObj, .rank = d->rank, .has_hash = 1, \
                     .nchannels = -1, .nwarps = -1, .peer = -1};                             \
    if (d->type == ncclProfileColl) {                                                         \
      ev.type = CCLP_COLL;                                                                    \
      ev.comm_hash = d->coll.commHash;                                                        \
      ev.seq = d->coll.seqNumber;                                                             \
      ev.func = d->coll.func;                                                                 \
      ev.dtype = d->coll.datatype;                                                            \
      ev.algo = d->coll.algo;                                                                 \
      ev.proto = d->coll.proto;                                                               \
      ev.count = d->coll.count;                                                               \
      ev.nchannels = d->coll.nMaxChannels;                                                    \
      ev.nwarps = d->coll.nWarps;                                                             \
    } else if (d->type == ncclProfileP2p) {                                                   \
      ev.type = CCLP_P2P;                                                                     \
      ev.comm_hash = d->p2p.commHash;                                                         \
      ev.func = d->p2p.func;                                                                  \
      ev.dtype = d->p2p.datatype;                                                             \
      ev.count = d->p2p.count;                                                                \
      ev.peer = d->p2p.peer;                                                                  \
    }                                                                                         \
    cclp_start(context, handle, &ev);                                                         \
    return ncclSuccess;                                                                       \
  }
START_V2V3(2)
START_V2V3(3)

static ncclResult_t record_v1(void* h, ncclProfilerEventState_t s, ncclProfilerEventStateArgs_v1_t* a) {
  (void)h, (void)s, (void)a; /* no GPU timer before v4: nothing to record */
  return ncclSuccess;
}

/* ---- v4..v6: comm facts at init, GPU timers on kernel channels ------------------------------ */

static ncclResult_t init_v4(void** c, int* m, const char* name, uint64_t hash, int nnodes, int nranks, int rank,
                            ncclDebugLogger_t logfn) {
  (void)name;
  return init_any(4, c, m, 1, hash, nnodes, nranks, rank, logfn);
}

static ncclResult_t init_v5(void** c, uint64_t id, int* m, const char* name, int nnodes, int nranks, int rank,
                            ncclDebugLogger_t logfn) {
  (void)name;
  return init_any(5, c, m, 1, id, nnodes, nranks, rank, logfn);
}

static ncclResult_t init_v6(void** c, uint64_t id, int* m, const char* name, int nnodes, int nranks, int rank,
                            ncclDebugLogger_t logfn) {
  (void)name;
  return init_any(6, c, m, 1, id, nnodes, nranks, rank, logfn);
}

/* v4, v5 and v6 name the same fields; v5 and v6 put them at the same offsets. */
#define START_V4PLUS(NAME, V)                                                                 \
  static ncclResult_t NAME(void* context, void** handle, ncclProfilerEventDescr_v##V##_t* d) { \
    cclp_event ev = {.type = CCLP_OTHER, .parent = d->parentObj, .rank = d->rank,             \
                     .nchannels = -1, .nwarps = -1, .peer = -1};                             \
    if (d->type == ncclProfileColl) {                                                         \
      ev.type = CCLP_COLL;                                                                    \
      ev.seq = d->coll.seqNumber;                                                             \
      ev.func = d->coll.func;                                                                 \
      ev.dtype = d->coll.datatype;                                                            \
      ev.algo = d->coll.algo;                                                                 \
      ev.proto = d->coll.proto;                                                               \
      ev.count = d->coll.count;                                                               \
      ev.nchannels = d->coll.nChannels;                                                       \
      ev.nwarps = d->coll.nWarps;                                                             \
    } else if (d->type == ncclProfileP2p) {                                                   \
      ev.type = CCLP_P2P;                                                                     \
      ev.func = d->p2p.func;                                                                  \
      ev.dtype = d->p2p.datatype;                                                             \
      ev.count = d->p2p.count;                                                                \
      ev.peer = d->p2p.peer;                                                                  \
      ev.nchannels = d->p2p.nChannels;                                                        \
    } else if (d->type == ncclProfileKernelCh) {                                              \
      ev.type = CCLP_KERNEL_CH;                                                               \
      ev.channel = d->kernelCh.channelId;                                                     \
      ev.ptimer = d->kernelCh.pTimer;                                                         \
    }                                                                                         \
    cclp_start(context, handle, &ev);                                                         \
    return ncclSuccess;                                                                       \
  }
START_V4PLUS(start_v4, 4)
START_V4PLUS(start_v5, 5)
START_V4PLUS(start_v6_task, 6)

/* v6 adds copy-engine collectives: a CeColl event per call (its CeSync and CeBatch children are
 * not asked for). Counted under algo "CE", not timed (record.c, start_task, says why). */
static ncclResult_t start_v6(void* context, void** handle, ncclProfilerEventDescr_v6_t* d) {
  if (d->type != ncclProfileCeColl) return start_v6_task(context, handle, d);
  cclp_event ev = {.type = CCLP_CE, .parent = d->parentObj, .rank = d->rank, .seq = d->ceColl.seqNumber,
                   .func = d->ceColl.func, .dtype = d->ceColl.datatype, .algo = "CE", .count = d->ceColl.count,
                   .nchannels = -1, .nwarps = -1, .peer = -1};
  cclp_start(context, handle, &ev);
  return ncclSuccess;
}

static ncclResult_t record_v4(void* h, ncclProfilerEventState_t s, ncclProfilerEventStateArgs_v4_t* a) {
  if (h && s == ncclProfilerKernelChStop && a) cclp_record_stop_timer(h, a->kernelCh.pTimer);
  return ncclSuccess;
}

/* ---- the exported structs (exports.map lists exactly these) -------------------------------- */

/* ncclProfiler_v1 .. ncclProfiler_v6, with designated initializers: each member named as in NCCL's
 * ncclProfiler_vN_t (include/ccltune_profiler_abi.h). */
#define PROFILER_STRUCT(V, INIT, START, RECORD)                                                       \
  EXPORT const ncclProfiler_v##V##_t ncclProfiler_v##V = {.name = PLUGIN_NAME, .init = INIT,          \
                                                          .startEvent = START, .stopEvent = stop_event, \
                                                          .recordEventState = RECORD, .finalize = finalize}
PROFILER_STRUCT(1, init_v1, start_v1, record_v1);
PROFILER_STRUCT(2, init_v2, start_v2, record_v1);
PROFILER_STRUCT(3, init_v3, start_v3, record_v1);
PROFILER_STRUCT(4, init_v4, start_v4, record_v4);
PROFILER_STRUCT(5, init_v5, start_v5, record_v4);
PROFILER_STRUCT(6, init_v6, start_v6, record_v4);
