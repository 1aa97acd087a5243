/* The eager launch loop (see include/ccltune_series.h). No CUDA or NCCL headers: the NCCL
 * signatures below are the public API's, with opaque pointers and ints for its enums and
 * handles (ncclDataType_t, ncclRedOp_t and ncclResult_t are C enums: int-sized). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "ccltune_series.h"

#include <sched.h>
#include <time.h>

#define EXPORT __attribute__((visibility("default")))
#define NCCL_SUCCESS 0
#define NCCL_IN_PROGRESS 7

typedef int (*coll_op_fn)(const void*, void*, size_t, int, int, void*, void*);      /* AllReduce, ReduceScatter */
typedef int (*coll_fn)(const void*, void*, size_t, int, void*, void*);              /* AllGather, AlltoAll */
typedef int (*rooted_fn)(const void*, void*, size_t, int, int, void*, void*);       /* Broadcast, Gather, Scatter */
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
    case CCLTUNE_ALLTOALL:
      return ((coll_fn)st->fn)(sb, rb, n, s->datatype, s->comm, s->stream);
    case CCLTUNE_BROADCAST:
    case CCLTUNE_GATHER:
    case CCLTUNE_SCATTER:
      return ((rooted_fn)st->fn)(sb, rb, n, s->datatype, st->peer, s->comm, s->stream);
    case CCLTUNE_REDUCE:
      return ((rooted_op_fn)st->fn)(sb, rb, n, s->datatype, s->op, st->peer, s->comm, s->stream);
    case CCLTUNE_SEND:
      return ((send_fn)st->fn)(sb, n, s->datatype, st->peer, s->comm, s->stream);
    default: /* CCLTUNE_RECV: kinds are checked before the loop */
      return ((recv_fn)st->fn)(rb, n, s->datatype, st->peer, s->comm, s->stream);
  }
}

typedef int (*query_fn)(void*);
typedef int (*async_fn)(void*, int*);
typedef int (*barrier_fn)(void*);
typedef int (*record_fn)(void*, void*);

static int64_t events_needed(const struct ccltune_series* s, int64_t iterations) {
  return s->blocking == 3 ? 2 * iterations : iterations + 1;
}

static int valid(const struct ccltune_series* s) {
  if (s == 0 || s->steps == 0 || s->nsteps < 1 || s->shift_steps < 1) return 0;
  if ((s->grouped || s->nsteps > 1 || s->agg > 1) && (s->group_start == 0 || s->group_end == 0)) return 0;
  if (s->agg < 1 || s->blocking < 0 || s->blocking > 3) return 0;
  if (s->blocking && s->stream_query == 0) return 0;
  if ((s->blocking == 1 || s->blocking == 3) && s->barrier == 0) return 0;
  if (s->events && (s->event_record == 0 || s->nevents < 0)) return 0;
  for (int32_t k = 0; k < s->nsteps; k++)
    if (s->steps[k].fn == 0 || s->steps[k].kind < 0 || s->steps[k].kind >= CCLTUNE_KINDS) return 0;
  return 1;
}

static int fail(struct ccltune_outcome* o, int rc, int64_t call, int32_t step, int32_t source) {
  if (o) {
    o->call = call;
    o->step = step;
    o->source = source;
  }
  return rc;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* nccl-tests' testStreamSynchronize: poll the stream, and NCCL's asynchronous error while it is
 * busy, yielding the CPU between polls. Returns 0, or the failure (*source says whose). */
static int wait_stream(const struct ccltune_series* s, int32_t* source) {
  for (;;) {
    int rc = ((query_fn)s->stream_query)(s->stream);
    if (rc == 0) return 0;
    if (rc != CCLTUNE_NOT_READY) {
      *source = CCLTUNE_FROM_GPU;
      return rc;
    }
    if (s->async_error) {
      int err = NCCL_SUCCESS;
      rc = ((async_fn)s->async_error)(s->comm, &err);
      if (!ok(rc) || !ok(err)) {
        *source = CCLTUNE_FROM_NCCL;
        return ok(rc) ? err : rc;
      }
    }
    sched_yield();
  }
}

static int record(const struct ccltune_series* s, int64_t index) {
  return ((record_fn)s->event_record)(s->events[index], s->stream);
}

/* One call (startColl): its steps, in a group when it has several; then the blocking wait and barrier. */
static int one_call(const struct ccltune_series* s, int64_t c, char* send, char* recv,
                    struct ccltune_outcome* o) {
  const int grouped = s->grouped || s->nsteps > 1;
  int rc;
  if (grouped && !ok(rc = ((group_fn)s->group_start)())) return fail(o, rc, c, CCLTUNE_AT_GROUP_START, CCLTUNE_FROM_NCCL);
  for (int32_t k = 0; k < s->nsteps; k++) {
    if (!ok(rc = issue(s, &s->steps[k], send, recv))) {
      if (grouped) (void)((group_fn)s->group_end)(); /* close the group NCCL opened; its result says nothing new */
      return fail(o, rc, c, k, CCLTUNE_FROM_NCCL);
    }
  }
  if (grouped && !ok(rc = ((group_fn)s->group_end)())) return fail(o, rc, c, s->nsteps, CCLTUNE_FROM_NCCL);
  int32_t source = CCLTUNE_FROM_NCCL;
  if (s->blocking && (rc = wait_stream(s, &source)) != 0) return fail(o, rc, c, CCLTUNE_AT_WAIT, source);
  if (s->blocking == 1 && (rc = ((barrier_fn)s->barrier)(s->barrier_arg)) != 0)
    return fail(o, rc, c, CCLTUNE_AT_BARRIER, CCLTUNE_FROM_BARRIER);
  return NCCL_SUCCESS;
}

EXPORT int ccltune_series_run(const struct ccltune_series* s, int64_t first, int64_t iterations,
                              struct ccltune_outcome* outcome) {
  if (outcome) outcome->busy_s = 0.0;
  if (!valid(s) || iterations < 0 || first < 0 || (s->events && s->nevents < events_needed(s, iterations)))
    return fail(outcome, CCLTUNE_SERIES_INVALID, -1, -1, CCLTUNE_FROM_NCCL);
  const int aggregated = s->agg > 1, paired = s->blocking == 3;
  const group_fn start = (group_fn)s->group_start, end = (group_fn)s->group_end;
  int64_t at = (first * s->agg) % s->shift_steps; /* the buffer step of the next call, kept without a division per call */
  double busy = 0.0;
  int rc;
  for (int64_t k = 0; k < iterations; k++) {
    const int64_t c0 = (first + k) * s->agg;
    const double t0 = paired ? now_s() : 0.0;
    if (aggregated && !ok(rc = start())) return fail(outcome, rc, c0, CCLTUNE_AT_AGG_START, CCLTUNE_FROM_NCCL);
    if (s->events && (rc = record(s, paired ? 2 * k : k)) != 0) {
      if (aggregated) (void)end();
      return fail(outcome, rc, c0, CCLTUNE_AT_EVENT, CCLTUNE_FROM_GPU);
    }
    for (int32_t a = 0; a < s->agg; a++) {
      const uint64_t shift = s->shift_bytes * (uint64_t)at;
      if (++at == s->shift_steps) at = 0;
      if ((rc = one_call(s, c0 + a, (char*)s->send + shift, (char*)s->recv + shift, outcome)) != 0) {
        if (aggregated) (void)end();
        return rc;
      }
    }
    if (aggregated && !ok(rc = end())) return fail(outcome, rc, c0, CCLTUNE_AT_AGG_END, CCLTUNE_FROM_NCCL);
    if (paired) {
      int32_t source = CCLTUNE_FROM_NCCL;
      if ((rc = wait_stream(s, &source)) != 0) return fail(outcome, rc, c0, CCLTUNE_AT_WAIT, source);
      if (s->events && (rc = record(s, 2 * k + 1)) != 0) return fail(outcome, rc, c0, CCLTUNE_AT_EVENT, CCLTUNE_FROM_GPU);
      busy += now_s() - t0;
      if (outcome) outcome->busy_s = busy;
      if ((rc = ((barrier_fn)s->barrier)(s->barrier_arg)) != 0)
        return fail(outcome, rc, c0, CCLTUNE_AT_BARRIER, CCLTUNE_FROM_BARRIER);
    }
  }
  if (s->events && !paired && (rc = record(s, iterations)) != 0)
    return fail(outcome, rc, (first + iterations) * s->agg, CCLTUNE_AT_EVENT, CCLTUNE_FROM_GPU);
  return NCCL_SUCCESS;
}

EXPORT int ccltune_series_time(const struct ccltune_series* s, int64_t first, int64_t iterations,
                               struct ccltune_outcome* outcome, double* cpu_s, double* elapsed_s) {
  if (cpu_s) *cpu_s = 0.0;
  if (elapsed_s) *elapsed_s = 0.0;
  if (s == 0 || s->stream_query == 0 || cpu_s == 0 || elapsed_s == 0)
    return fail(outcome, CCLTUNE_SERIES_INVALID, -1, -1, CCLTUNE_FROM_NCCL);
  struct ccltune_outcome inner = {0, 0, 0, 0.0};
  const double t0 = now_s();
  int rc = ccltune_series_run(s, first, iterations, &inner);
  const double issued = now_s() - t0;
  if (outcome) *outcome = inner;
  if (rc != 0) return rc;
  int32_t source = CCLTUNE_FROM_NCCL;
  /* completeColl: no wait where -z waited after every call already (blocking, agg 1) */
  if (!(s->blocking && s->agg <= 1) && (rc = wait_stream(s, &source)) != 0)
    return fail(outcome, rc, (first + iterations) * s->agg, CCLTUNE_AT_WAIT, source);
  const double elapsed = now_s() - t0;
  *cpu_s = s->blocking == 3 ? inner.busy_s : issued;
  *elapsed_s = s->blocking == 3 ? inner.busy_s : elapsed;
  return NCCL_SUCCESS;
}

/* ---- CUDA graphs (-G) ---- */
typedef int (*begin_fn)(void*, int);
typedef int (*end_fn)(void*, void**);
typedef int (*instantiate_fn)(void**, void*, unsigned long long);
typedef int (*launch_fn)(void*, void*);
typedef int (*destroy_fn)(void*);

static int graph_api_valid(const struct ccltune_graph_api* g) {
  return g && g->begin_capture && g->end_capture && g->instantiate && g->launch && g->exec_destroy && g->graph_destroy;
}

EXPORT int ccltune_series_capture(const struct ccltune_series* s, const struct ccltune_graph_api* g, int64_t first,
                                  int64_t iterations, void** exec, struct ccltune_outcome* outcome) {
  if (exec) *exec = 0;
  if (outcome) outcome->busy_s = 0.0;
  if (exec == 0 || !graph_api_valid(g) || !valid(s) || s->blocking != 0 || s->events != 0 || iterations < 0 || first < 0)
    return fail(outcome, CCLTUNE_SERIES_INVALID, -1, -1, CCLTUNE_FROM_NCCL);
  int rc = ((begin_fn)g->begin_capture)(s->stream, CCLTUNE_CAPTURE_THREAD_LOCAL);
  if (rc != 0) return fail(outcome, rc, first * s->agg, CCLTUNE_AT_CAPTURE_BEGIN, CCLTUNE_FROM_GPU);
  struct ccltune_outcome inner = {0, 0, 0, 0.0};
  const int issued = ccltune_series_run(s, first, iterations, &inner);
  void* graph = 0;
  const int ended = ((end_fn)g->end_capture)(s->stream, &graph); /* always: never leave the stream capturing */
  if (issued != 0) { /* NCCL's failure is the one to report; the capture it broke is thrown away */
    if (graph) (void)((destroy_fn)g->graph_destroy)(graph);
    if (outcome) *outcome = inner;
    return issued;
  }
  if (ended != 0) {
    if (graph) (void)((destroy_fn)g->graph_destroy)(graph);
    return fail(outcome, ended, (first + iterations) * s->agg, CCLTUNE_AT_CAPTURE_END, CCLTUNE_FROM_GPU);
  }
  rc = ((instantiate_fn)g->instantiate)(exec, graph, 0ULL); /* no flags, as nccl-tests' cudaGraphInstantiate */
  (void)((destroy_fn)g->graph_destroy)(graph); /* the executable graph does not need its template */
  if (rc != 0) {
    *exec = 0;
    return fail(outcome, rc, (first + iterations) * s->agg, CCLTUNE_AT_INSTANTIATE, CCLTUNE_FROM_GPU);
  }
  return NCCL_SUCCESS;
}

EXPORT int ccltune_graph_launch(const struct ccltune_graph_api* g, void* exec, void* stream, int64_t launches,
                                struct ccltune_outcome* outcome) {
  if (outcome) outcome->busy_s = 0.0;
  if (!graph_api_valid(g) || exec == 0 || launches < 0) return fail(outcome, CCLTUNE_SERIES_INVALID, -1, -1, CCLTUNE_FROM_GPU);
  const launch_fn launch = (launch_fn)g->launch;
  for (int64_t i = 0; i < launches; i++) {
    const int rc = launch(exec, stream);
    if (rc != 0) return fail(outcome, rc, i, CCLTUNE_AT_LAUNCH, CCLTUNE_FROM_GPU);
  }
  return NCCL_SUCCESS;
}

EXPORT int ccltune_graph_destroy(const struct ccltune_graph_api* g, void* exec) {
  if (exec == 0) return 0;
  if (!graph_api_valid(g)) return CCLTUNE_SERIES_INVALID;
  return ((destroy_fn)g->exec_destroy)(exec);
}

EXPORT int ccltune_series_abi(void) { return CCLTUNE_SERIES_ABI; }
