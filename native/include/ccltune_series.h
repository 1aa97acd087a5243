/* ccltune's eager launch loop: one call from Python issues a whole series of NCCL calls.
 *
 * Without CUDA graphs every timed call is issued by the host. From Python (ctypes) that cost
 * more per call than NCCL's own small-message latency, so ccltune's eager times were Python's
 * (docs/performance.md, "Eager calls issued from C"). This library issues the series in C instead; Python pays one call per
 * series. It links against nothing: NCCL's entry points are passed in as function pointers,
 * taken from the libnccl (or librccl) the caller already loaded, so one build serves any NCCL.
 *
 * A call of the series is one or more NCCL operations ("steps"); several steps, or send/recv steps,
 * are issued inside ncclGroupStart/ncclGroupEnd (sendrecv; alltoall, gather and scatter before
 * NCCL 2.28, which has one entry point for each). Call i works
 * shift_bytes * (i % shift_steps) bytes further into both buffers, as nccl-tests' calls step
 * through buffers of the largest size.
 *
 * The series also carries nccl-tests' timed schedule (BenchTime and startColl in nccl-tests
 * 2.19.6 src/common.cu): iterations of `agg` calls (-m, one more ncclGroupStart/End around them),
 * the blocking modes (-z: wait for the stream after each call, a barrier after each call or after
 * each iteration), and per-iteration events (-I). The overall clock stays with the caller (host
 * clock or events around the series); busy_s reports what -z 3 times (waits, not barriers).
 */
#ifndef CCLTUNE_SERIES_H
#define CCLTUNE_SERIES_H

#include <stddef.h>
#include <stdint.h>

#define CCLTUNE_SERIES_ABI 5 /* bumped whenever a struct, a function or the kinds below change (3: alltoall, gather,
                              * scatter; 4: CUDA graphs captured and launched here; 5: ccltune_series_time) */

/* Which NCCL signature a step's entry point has (the step's fn is cast to it). */
enum ccltune_step_kind {
  CCLTUNE_ALL_REDUCE = 0,     /* ncclAllReduce(send, recv, count, dt, op, comm, stream) */
  CCLTUNE_ALL_GATHER = 1,     /* ncclAllGather(send, recv, count, dt, comm, stream) */
  CCLTUNE_REDUCE_SCATTER = 2, /* ncclReduceScatter(send, recv, count, dt, op, comm, stream) */
  CCLTUNE_BROADCAST = 3,      /* ncclBroadcast(send, recv, count, dt, root, comm, stream) */
  CCLTUNE_REDUCE = 4,         /* ncclReduce(send, recv, count, dt, op, root, comm, stream) */
  CCLTUNE_SEND = 5,           /* ncclSend(send, count, dt, peer, comm, stream) */
  CCLTUNE_RECV = 6,           /* ncclRecv(recv, count, dt, peer, comm, stream) */
  CCLTUNE_ALLTOALL = 7,       /* ncclAlltoAll(send, recv, count, dt, comm, stream), NCCL >= 2.28 */
  CCLTUNE_GATHER = 8,         /* ncclGather(send, recv, count, dt, root, comm, stream), NCCL >= 2.28 */
  CCLTUNE_SCATTER = 9,        /* ncclScatter(send, recv, count, dt, root, comm, stream), NCCL >= 2.28 */
  CCLTUNE_KINDS = 10
};

/* One NCCL operation of a call. */
struct ccltune_step {
  void* fn;          /* the NCCL entry point of `kind` */
  int32_t kind;      /* enum ccltune_step_kind */
  int32_t peer;      /* root (broadcast, reduce, gather, scatter) or peer (send, recv); unused otherwise */
  uint64_t send_off; /* bytes from the send base (the step's own block: alltoall, scatter) */
  uint64_t recv_off; /* bytes from the recv base */
};

struct ccltune_series {
  void* send;                      /* device buffers: base pointers of call 0 */
  void* recv;
  uint64_t count;                  /* elements each step moves (NCCL's count argument) */
  int32_t datatype;                /* ncclDataType_t */
  int32_t op;                      /* ncclRedOp_t */
  void* comm;                      /* ncclComm_t */
  void* stream;                    /* cudaStream_t */
  const struct ccltune_step* steps;
  int32_t nsteps;
  int32_t grouped;                 /* non-zero: each call's steps inside GroupStart/GroupEnd */
  void* group_start;               /* ncclGroupStart, ncclGroupEnd (needed when grouped) */
  void* group_end;
  uint64_t shift_bytes;            /* call i works shift_bytes * (i % shift_steps) further on */
  int64_t shift_steps;             /* >= 1 */
  /* nccl-tests' schedule. Iteration i issues calls i*agg .. i*agg+agg-1 (call c at buffer step
   * c % shift_steps); agg > 1: the iteration's calls inside one more GroupStart/GroupEnd. */
  int32_t agg;                     /* -m: calls per iteration, >= 1 */
  int32_t blocking;                /* -z: 0 calls back to back; 1 wait for the stream and barrier
                                    * after each call; 2 wait after each call; 3 as 2, and after each
                                    * iteration's GroupEnd wait, record its stop event, barrier */
  void* stream_query;              /* int (*)(void* stream): 0 idle, 600 not ready, else an error
                                    * (cuStreamQuery, hipStreamQuery); needed when blocking */
  void* async_error;               /* ncclCommGetAsyncError, polled while waiting (optional) */
  void* barrier;                   /* int (*)(void* arg), 0 on success: every rank meets (blocking 1, 3) */
  void* barrier_arg;
  void* event_record;              /* int (*)(void* event, void* stream), 0 on success (cuEventRecord,
                                    * hipEventRecord); needed with events */
  void* const* events;             /* NULL, or one event per iteration start and one after the last
                                    * (iterations + 1); blocking 3: a start and a stop per iteration
                                    * (2 x iterations), the barrier between them left out */
  int64_t nevents;                 /* the length of events */
};

/* Where a failure happened besides a step (`step` of ccltune_outcome). */
#define CCLTUNE_AT_GROUP_START (-1) /* the call's own ncclGroupStart (its GroupEnd: nsteps) */
#define CCLTUNE_AT_AGG_START (-2)   /* the iteration's ncclGroupStart (agg > 1) */
#define CCLTUNE_AT_AGG_END (-3)     /* the iteration's ncclGroupEnd */
#define CCLTUNE_AT_WAIT (-4)        /* waiting for the stream (blocking) */
#define CCLTUNE_AT_BARRIER (-5)
#define CCLTUNE_AT_EVENT (-6)       /* recording an event */
#define CCLTUNE_AT_CAPTURE_BEGIN (-7) /* beginning the stream capture (ccltune_series_capture) */
#define CCLTUNE_AT_CAPTURE_END (-8)   /* ending it */
#define CCLTUNE_AT_INSTANTIATE (-9)   /* instantiating the captured graph */
#define CCLTUNE_AT_LAUNCH (-10)       /* launching it (ccltune_graph_launch; call: the launch's index) */
/* Whose code the result is. */
#define CCLTUNE_FROM_NCCL 0    /* an ncclResult_t */
#define CCLTUNE_FROM_GPU 1     /* the stream query's or event record's (CUresult, hipError_t) */
#define CCLTUNE_FROM_BARRIER 2 /* the barrier's */
#define CCLTUNE_NOT_READY 600  /* CUDA_ERROR_NOT_READY, cudaErrorNotReady, hipErrorNotReady */

/* What happened: busy_s always; the rest only when ccltune_series_run does not return success. */
struct ccltune_outcome {
  int64_t call;   /* index of the failing call (an iteration's first call for its group, wait,
                   * barrier or event), -1 when the series was refused */
  int32_t step;   /* its step, or CCLTUNE_AT_* */
  int32_t source; /* CCLTUNE_FROM_* */
  double busy_s;  /* blocking 3: seconds from each iteration's start to the end of its wait, summed
                   * (nccl-tests' collOnlySec: barriers excluded); else 0 */
};

/* A result that is not NCCL's: the series description itself is unusable (a NULL entry point,
 * an unknown kind, shift_steps < 1, nsteps < 1, agg < 1, blocking outside 0..3, a wait or barrier
 * without its function, too few events); nothing was issued. */
#define CCLTUNE_SERIES_INVALID (-1)

/* Issue iterations first .. first+iterations-1 of the series (agg calls each). Returns 0 when
 * every NCCL operation returned ncclSuccess or ncclInProgress (a non-blocking communicator) and
 * every wait, barrier and event succeeded, else the first other result, with where it happened in
 * *outcome; nothing after it is issued. A failure inside a group still closes the group(s)
 * opened (ncclGroupEnd, whose result is then ignored). */
int ccltune_series_run(const struct ccltune_series* s, int64_t first, int64_t iterations,
                       struct ccltune_outcome* outcome);

/* The timed calls as nccl-tests' BenchTime times them without graphs: the host clock read, the series issued
 * (ccltune_series_run), then its completeColl: the stream waited for by polling (stream_query, and async_error
 * while busy, yielding the CPU between polls, as its testStreamSynchronize; left out where -z already waited
 * after every call: blocking and agg 1), the clock read again. Nothing but this C code runs between the two
 * readings, as nothing but nccl-tests' loop does. *cpu_s: the seconds issuing the calls (-C's cputime; -z 3:
 * busy_s), *elapsed_s: until the stream was idle (-z 3: busy_s). Needs stream_query. Returns as
 * ccltune_series_run, a failed wait with step CCLTUNE_AT_WAIT. */
int ccltune_series_time(const struct ccltune_series* s, int64_t first, int64_t iterations,
                        struct ccltune_outcome* outcome, double* cpu_s, double* elapsed_s);

/* CUDA graphs (-G), as nccl-tests' BenchTime makes and launches them: the timed calls captured on
 * the series' stream in thread-local mode, the graph instantiated with no flags, then launched
 * -G times. The GPU runtime's graph entry points come in as function pointers, like NCCL's, from
 * the driver library the process already has (CUDA's driver API or HIP: the same shapes, 0 for
 * success). Doing this here rather than through a framework's graph object keeps the graph and
 * its first launch what nccl-tests times (no instantiation flags, nothing else enqueued around a
 * launch). */
struct ccltune_graph_api {
  void* begin_capture; /* int (*)(void* stream, int mode): cuStreamBeginCapture_v2, hipStreamBeginCapture */
  void* end_capture;   /* int (*)(void* stream, void** graph): cuStreamEndCapture, hipStreamEndCapture */
  void* instantiate;   /* int (*)(void** exec, void* graph, unsigned long long flags): cuGraphInstantiateWithFlags,
                        * hipGraphInstantiateWithFlags */
  void* launch;        /* int (*)(void* exec, void* stream): cuGraphLaunch, hipGraphLaunch */
  void* exec_destroy;  /* int (*)(void* exec): cuGraphExecDestroy, hipGraphExecDestroy */
  void* graph_destroy; /* int (*)(void* graph): cuGraphDestroy, hipGraphDestroy */
};
#define CCLTUNE_CAPTURE_THREAD_LOCAL 1 /* CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, hipStreamCaptureModeThreadLocal */

/* Capture iterations first .. first+iterations-1 of the series (as ccltune_series_run issues them)
 * into a graph on s->stream and instantiate it: *exec receives the executable graph, which the
 * caller launches with ccltune_graph_launch and frees with ccltune_graph_destroy. The series must
 * not block or record events (nccl-tests refuses -z and -I with -G too): CCLTUNE_SERIES_INVALID.
 * A failure while capturing still ends the capture and destroys what was captured (the stream is
 * never left capturing); *exec is then NULL and *outcome says where (an NCCL call's index, or
 * CCLTUNE_AT_CAPTURE_BEGIN / _END / INSTANTIATE with CCLTUNE_FROM_GPU). */
int ccltune_series_capture(const struct ccltune_series* s, const struct ccltune_graph_api* g, int64_t first,
                           int64_t iterations, void** exec, struct ccltune_outcome* outcome);

/* Launch `exec` `launches` times on `stream`, back to back (no wait). Returns 0, or the runtime's
 * error with outcome->call the launch's index and outcome->step CCLTUNE_AT_LAUNCH. */
int ccltune_graph_launch(const struct ccltune_graph_api* g, void* exec, void* stream, int64_t launches,
                         struct ccltune_outcome* outcome);

/* Free an executable graph of ccltune_series_capture (NULL: nothing). Returns the runtime's result. */
int ccltune_graph_destroy(const struct ccltune_graph_api* g, void* exec);

/* CCLTUNE_SERIES_ABI of the built library (the binding refuses a stale build). */
int ccltune_series_abi(void);

#endif
