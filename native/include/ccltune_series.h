/* ccltune's eager launch loop: one call from Python issues a whole series of NCCL calls.
 *
 * Without CUDA graphs every timed call is issued by the host. From Python (ctypes) that cost
 * 8-11 us per call on an H100, more than NCCL's own small-message latency, so ccltune's eager
 * times were Python's. This library issues the series in C instead; Python pays one call per
 * series. It links against nothing: NCCL's entry points are passed in as function pointers,
 * taken from the libnccl (or librccl) the caller already loaded, so one build serves any NCCL.
 *
 * A call of the series is one or more NCCL operations ("steps"); several steps are issued
 * inside ncclGroupStart/ncclGroupEnd (alltoall, gather, scatter, sendrecv). Call i works
 * shift_bytes * (i % shift_steps) bytes further into both buffers, as nccl-tests' calls step
 * through buffers of the largest size. Timing stays with the caller (host clock or events around
 * the series), so results compare with the Python path they replace.
 */
#ifndef CCLTUNE_SERIES_H
#define CCLTUNE_SERIES_H

#include <stddef.h>
#include <stdint.h>

#define CCLTUNE_SERIES_ABI 1 /* bumped whenever a struct below changes */

/* Which NCCL signature a step's entry point has (the step's fn is cast to it). */
enum ccltune_step_kind {
  CCLTUNE_ALL_REDUCE = 0,     /* ncclAllReduce(send, recv, count, dt, op, comm, stream) */
  CCLTUNE_ALL_GATHER = 1,     /* ncclAllGather(send, recv, count, dt, comm, stream) */
  CCLTUNE_REDUCE_SCATTER = 2, /* ncclReduceScatter(send, recv, count, dt, op, comm, stream) */
  CCLTUNE_BROADCAST = 3,      /* ncclBroadcast(send, recv, count, dt, root, comm, stream) */
  CCLTUNE_REDUCE = 4,         /* ncclReduce(send, recv, count, dt, op, root, comm, stream) */
  CCLTUNE_SEND = 5,           /* ncclSend(send, count, dt, peer, comm, stream) */
  CCLTUNE_RECV = 6,           /* ncclRecv(recv, count, dt, peer, comm, stream) */
  CCLTUNE_KINDS = 7
};

/* One NCCL operation of a call. */
struct ccltune_step {
  void* fn;          /* the NCCL entry point of `kind` */
  int32_t kind;      /* enum ccltune_step_kind */
  int32_t peer;      /* root (broadcast, reduce) or peer (send, recv); unused otherwise */
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
};

/* What went wrong (filled only when ccltune_series_run does not return success). */
struct ccltune_failure {
  int64_t call;  /* index of the failing call (first + k), -1 when the series was refused */
  int32_t step;  /* its step (-1: ncclGroupStart, nsteps: ncclGroupEnd) */
};

/* A result that is not NCCL's: the series description itself is unusable (a NULL entry point,
 * an unknown kind, shift_steps < 1, nsteps < 1); nothing was issued. */
#define CCLTUNE_SERIES_INVALID (-1)

/* Issue calls first .. first+calls-1 of the series. Returns 0 (ncclSuccess) when every NCCL
 * operation returned ncclSuccess or ncclInProgress (a non-blocking communicator), else the
 * first other ncclResult_t, with the failing call and step in *failure; the calls after it are
 * not issued. A failing step inside a group still closes the group (ncclGroupEnd, whose result
 * is then ignored). */
int ccltune_series_run(const struct ccltune_series* s, int64_t first, int64_t calls,
                       struct ccltune_failure* failure);

/* CCLTUNE_SERIES_ABI of the built library (the binding refuses a stale build). */
int ccltune_series_abi(void);

#endif
