/* The eager launch loop (see include/ccltune_series.h). No CUDA or NCCL headers: the NCCL
 * signatures below are the public API's, with opaque pointers and ints for its enums and
 * handles (ncclDataType_t, ncclRedOp_t and ncclResult_t are C enums: int-sized). */
#include "ccltune_series.h"

#define EXPORT __attribute__((visibility("default")))
#define NCCL_SUCCESS 0
#define NCCL_IN_PROGRESS 7

typedef int (*coll_op_fn)(const void*, void*, size_t, int, int, void*, void*);      /* AllReduce, ReduceScatter */
typedef int (*coll_fn)(const void*, void*, size_t, int, void*, void*);              /* AllGather */
typedef int (*rooted_fn)(const void*, void*, size_t, int, int, void*, void*);       /* Broadcast */
typedef int (*rooted_op_fn)(const void*, void*, size_t, int, int, int, void*, void*); /* Reduce */
typedef int (*send_fn)(const void*, size_t, int, int, void*, void*);                /* Send */
typedef int (*recv_fn)(void*, size_t, int, int, void*, void*);                      /* Recv */
typedef int (*group_fn)(void);

static int ok(int rc) { return rc == NCCL_SUCCESS || rc == NCCL_IN_PROGRESS; }

static int issue(const struct ccltune_series* s, const struct ccltune_step* st, char* send, char* recv) {
  const void* sb = send + st->send_off;
  void* rb = recv + st->recv_off;
  size_t n = (size_t)s->count;
  switch (st->kind) {
    case CCLTUNE_ALL_REDUCE:
    case CCLTUNE_REDUCE_SCATTER:
      return ((coll_op_fn)st->fn)(sb, rb, n, s->datatype, s->op, s->comm, s->stream);
    case CCLTUNE_ALL_GATHER:
      return ((coll_fn)st->fn)(sb, rb, n, s->datatype, s->comm, s->stream);
    case CCLTUNE_BROADCAST:
      return ((rooted_fn)st->fn)(sb, rb, n, s->datatype, st->peer, s->comm, s->stream);
    case CCLTUNE_REDUCE:
      return ((rooted_op_fn)st->fn)(sb, rb, n, s->datatype, s->op, st->peer, s->comm, s->stream);
    case CCLTUNE_SEND:
      return ((send_fn)st->fn)(sb, n, s->datatype, st->peer, s->comm, s->stream);
    default: /* CCLTUNE_RECV: kinds are checked before the loop */
      return ((recv_fn)st->fn)(rb, n, s->datatype, st->peer, s->comm, s->stream);
  }
}

static int valid(const struct ccltune_series* s) {
  if (s == 0 || s->steps == 0 || s->nsteps < 1 || s->shift_steps < 1) return 0;
  if ((s->grouped || s->nsteps > 1) && (s->group_start == 0 || s->group_end == 0)) return 0;
  for (int32_t k = 0; k < s->nsteps; k++)
    if (s->steps[k].fn == 0 || s->steps[k].kind < 0 || s->steps[k].kind >= CCLTUNE_KINDS) return 0;
  return 1;
}

static int fail(struct ccltune_failure* f, int rc, int64_t call, int32_t step) {
  if (f) {
    f->call = call;
    f->step = step;
  }
  return rc;
}

EXPORT int ccltune_series_run(const struct ccltune_series* s, int64_t first, int64_t calls,
                              struct ccltune_failure* failure) {
  if (!valid(s) || calls < 0 || first < 0) return fail(failure, CCLTUNE_SERIES_INVALID, -1, -1);
  const int grouped = s->grouped || s->nsteps > 1;
  const group_fn start = (group_fn)s->group_start, end = (group_fn)s->group_end;
  int64_t at = first % s->shift_steps; /* the buffer step of the next call, kept without a division per call */
  for (int64_t i = first; i < first + calls; i++) {
    const uint64_t shift = s->shift_bytes * (uint64_t)at;
    char* send = (char*)s->send + shift;
    char* recv = (char*)s->recv + shift;
    if (++at == s->shift_steps) at = 0;
    int rc;
    if (grouped && !ok(rc = start())) return fail(failure, rc, i, -1);
    for (int32_t k = 0; k < s->nsteps; k++) {
      if (!ok(rc = issue(s, &s->steps[k], send, recv))) {
        if (grouped) (void)end(); /* close the group NCCL opened; its result says nothing new */
        return fail(failure, rc, i, k);
      }
    }
    if (grouped && !ok(rc = end())) return fail(failure, rc, i, s->nsteps);
  }
  return NCCL_SUCCESS;
}

EXPORT int ccltune_series_abi(void) { return CCLTUNE_SERIES_ABI; }
