/* The launch loop against fake NCCL entry points (CPU only): every fake records its arguments,
 * so each case checks how many operations were issued, in which order, on which pointers, and
 * what comes back when one fails. Table-driven; exit status = number of failures (capped). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ccltune_series.h"

static int failures, total;
#define CHECK(name, cond, ...)      \
  do {                              \
    total++;                        \
    if (!(cond)) {                  \
      failures++;                   \
      printf("FAIL %s: ", name);    \
      printf(__VA_ARGS__);          \
      printf("\n");                 \
    }                               \
  } while (0)

/* ---- the fake NCCL: a log of every operation ---- */
#define MAXLOG 4096
static struct rec {
  char what;          /* A allreduce, G allgather, S reducescatter, B broadcast, R reduce, s send, r recv, ( ) group,
                       * T alltoall, g gather, c scatter, W a wait that found the stream idle, | barrier,
                       * e event (send: the event) */
  const void *send;
  void *recv;
  size_t count;
  int dt, op, peer;
  void *comm, *stream;
} LOG[MAXLOG];
static int nlog;
static int failAt = -1, failRc; /* the operation (log index) that returns failRc */

static int rec(char what, const void* s, void* r, size_t n, int dt, int op, int peer, void* c, void* st) {
  int i = nlog;
  if (nlog < MAXLOG) LOG[nlog++] = (struct rec){what, s, r, n, dt, op, peer, c, st};
  return i == failAt ? failRc : 0;
}
static int fAllReduce(const void* s, void* r, size_t n, int dt, int op, void* c, void* st) { return rec('A', s, r, n, dt, op, -1, c, st); }
static int fAllGather(const void* s, void* r, size_t n, int dt, void* c, void* st) { return rec('G', s, r, n, dt, -1, -1, c, st); }
static int fReduceScatter(const void* s, void* r, size_t n, int dt, int op, void* c, void* st) { return rec('S', s, r, n, dt, op, -1, c, st); }
static int fBroadcast(const void* s, void* r, size_t n, int dt, int root, void* c, void* st) { return rec('B', s, r, n, dt, -1, root, c, st); }
static int fReduce(const void* s, void* r, size_t n, int dt, int op, int root, void* c, void* st) { return rec('R', s, r, n, dt, op, root, c, st); }
static int fAlltoAll(const void* s, void* r, size_t n, int dt, void* c, void* st) { return rec('T', s, r, n, dt, -1, -1, c, st); }
static int fGather(const void* s, void* r, size_t n, int dt, int root, void* c, void* st) { return rec('g', s, r, n, dt, -1, root, c, st); }
static int fScatter(const void* s, void* r, size_t n, int dt, int root, void* c, void* st) { return rec('c', s, r, n, dt, -1, root, c, st); }
static int fSend(const void* s, size_t n, int dt, int peer, void* c, void* st) { return rec('s', s, NULL, n, dt, -1, peer, c, st); }
static int fRecv(void* r, size_t n, int dt, int peer, void* c, void* st) { return rec('r', NULL, r, n, dt, -1, peer, c, st); }
static int fStart(void) { return rec('(', NULL, NULL, 0, -1, -1, -1, NULL, NULL); }
static int fEnd(void) { return rec(')', NULL, NULL, 0, -1, -1, -1, NULL, NULL); }

/* the GPU runtime and the barrier: each wait finds the stream busy `busyPolls` times first */
static int busyPolls, polls, asyncErr, failWaitRc, failBarrierRc, failEventAt = -1;
static int fQuery(void* st) {
  if (polls < busyPolls) return polls++, CCLTUNE_NOT_READY;
  polls = 0;
  rec('W', NULL, NULL, 0, -1, -1, -1, NULL, st);
  return failWaitRc;
}
static int fAsync(void* c, int* err) { (void)c; *err = asyncErr; return 0; }
static int fBarrier(void* arg) { rec('|', arg, NULL, 0, -1, -1, -1, NULL, NULL); return failBarrierRc; }
static int fRecord(void* ev, void* st) {
  int i = nlog;
  rec('e', ev, NULL, 0, -1, -1, -1, NULL, st);
  return i == failEventAt ? 999 : 0;
}

static char SEND[1 << 16], RECV[1 << 16];
static int COMM, STREAM;

static struct ccltune_series series(const struct ccltune_step* steps, int nsteps, uint64_t shift, int64_t nshift) {
  return (struct ccltune_series){.send = SEND, .recv = RECV, .count = 3, .datatype = 7, .op = 2,
                                 .comm = &COMM, .stream = &STREAM, .steps = steps, .nsteps = nsteps,
                                 .grouped = nsteps > 1, .group_start = (void*)fStart, .group_end = (void*)fEnd,
                                 .shift_bytes = shift, .shift_steps = nshift, .agg = 1};
}

static void reset(void) { nlog = 0; failAt = -1; busyPolls = polls = asyncErr = failWaitRc = failBarrierRc = 0; failEventAt = -1; }

static const char* kinds(void) { /* the log's operation letters */
  static char out[MAXLOG + 1];
  for (int i = 0; i < nlog; i++) out[i] = LOG[i].what;
  out[nlog] = '\0';
  return out;
}

/* ---- one call per collective kind: NCCL's arguments arrive unchanged ---- */
static void test_each_kind(void) {
  static const struct { const char* name; struct ccltune_step step; char what; int usesOp, usesPeer; } K[] = {
    {"all_reduce", {(void*)fAllReduce, CCLTUNE_ALL_REDUCE, 0, 0, 0}, 'A', 1, 0},
    {"all_gather", {(void*)fAllGather, CCLTUNE_ALL_GATHER, 0, 0, 0}, 'G', 0, 0},
    {"reduce_scatter", {(void*)fReduceScatter, CCLTUNE_REDUCE_SCATTER, 0, 0, 0}, 'S', 1, 0},
    {"broadcast root 1", {(void*)fBroadcast, CCLTUNE_BROADCAST, 1, 0, 0}, 'B', 0, 1},
    {"reduce root 1", {(void*)fReduce, CCLTUNE_REDUCE, 1, 0, 0}, 'R', 1, 1},
    {"alltoall (NCCL >= 2.28)", {(void*)fAlltoAll, CCLTUNE_ALLTOALL, 0, 0, 0}, 'T', 0, 0},
    {"gather root 1 (NCCL >= 2.28)", {(void*)fGather, CCLTUNE_GATHER, 1, 0, 0}, 'g', 0, 1},
    {"scatter root 1 (NCCL >= 2.28)", {(void*)fScatter, CCLTUNE_SCATTER, 1, 0, 0}, 'c', 0, 1},
  };
  for (size_t k = 0; k < sizeof K / sizeof K[0]; k++) {
    reset();
    struct ccltune_series s = series(&K[k].step, 1, 0, 1);
    struct ccltune_outcome f = {-9, -9, -9, -1.0};
    int rc = ccltune_series_run(&s, 0, 5, &f);
    CHECK(K[k].name, rc == 0 && nlog == 5, "rc %d, %d operations (want 0, 5)", rc, nlog);
    CHECK(K[k].name, f.call == -9, "failure written on success (call %lld)", (long long)f.call);
    for (int i = 0; i < nlog; i++) {
      struct rec* r = &LOG[i];
      CHECK(K[k].name, r->what == K[k].what && r->send == SEND && r->recv == RECV && r->count == 3 && r->dt == 7
                           && r->comm == &COMM && r->stream == &STREAM,
            "call %d: %c %p %p %zu dt %d", i, r->what, r->send, (void*)r->recv, r->count, r->dt);
      CHECK(K[k].name, !K[k].usesOp || r->op == 2, "call %d: op %d, want 2", i, r->op);
      CHECK(K[k].name, !K[k].usesPeer || r->peer == 1, "call %d: root %d, want 1", i, r->peer);
    }
  }
}

/* ---- the buffer steps: call i at shift * (i % steps), also for a series that starts at first ---- */
static void test_steps(void) {
  static const struct { const char* name; uint64_t shift; int64_t nshift, first, calls; } S[] = {
    {"no stepping", 0, 1, 0, 4},
    {"4 steps of 256 B", 256, 4, 0, 10},
    {"one step", 4096, 1, 0, 3},
    {"resumed at call 6 of 4 steps", 256, 4, 6, 7},
    {"steps > calls", 8, 1000, 0, 50},
    {"first beyond steps", 16, 3, 1000001, 5},
  };
  struct ccltune_step st = {(void*)fAllReduce, CCLTUNE_ALL_REDUCE, 0, 0, 0};
  for (size_t k = 0; k < sizeof S / sizeof S[0]; k++) {
    reset();
    struct ccltune_series s = series(&st, 1, S[k].shift, S[k].nshift);
    int rc = ccltune_series_run(&s, S[k].first, S[k].calls, NULL);
    CHECK(S[k].name, rc == 0 && nlog == S[k].calls, "rc %d, %d calls", rc, nlog);
    for (int i = 0; i < nlog; i++) {
      uint64_t want = S[k].shift * (uint64_t)((S[k].first + i) % S[k].nshift);
      CHECK(S[k].name, LOG[i].send == SEND + want && LOG[i].recv == RECV + want,
            "call %lld at +%td/+%td, want +%llu", (long long)(S[k].first + i), (const char*)LOG[i].send - SEND,
            (char*)LOG[i].recv - RECV, (unsigned long long)want);
    }
  }
}

/* ---- grouped calls: alltoall over 3 peers, each block at its offset, inside one group per call ---- */
static void test_grouped(void) {
  struct ccltune_step a2a[6];
  for (int p = 0; p < 3; p++) {
    a2a[2 * p] = (struct ccltune_step){(void*)fSend, CCLTUNE_SEND, p, (uint64_t)p * 12, 0};
    a2a[2 * p + 1] = (struct ccltune_step){(void*)fRecv, CCLTUNE_RECV, p, 0, (uint64_t)p * 12};
  }
  reset();
  struct ccltune_series s = series(a2a, 6, 36, 2);
  int rc = ccltune_series_run(&s, 0, 3, NULL);
  CHECK("alltoall", rc == 0 && strcmp(kinds(), "(srsrsr)(srsrsr)(srsrsr)") == 0, "rc %d, log %s", rc, kinds());
  for (int call = 0; call < 3 && nlog == 24; call++) {
    uint64_t base = 36 * (uint64_t)(call % 2);
    for (int p = 0; p < 3; p++) {
      struct rec* snd = &LOG[8 * call + 1 + 2 * p];
      struct rec* rcv = &LOG[8 * call + 2 + 2 * p];
      CHECK("alltoall", snd->send == SEND + base + 12 * p && snd->peer == p && rcv->recv == RECV + base + 12 * p
                            && rcv->peer == p && snd->count == 3,
            "call %d peer %d: send +%td recv +%td", call, p, (const char*)snd->send - SEND, (char*)rcv->recv - RECV);
    }
  }
  /* sendrecv on one rank: one send and one recv, still a group */
  struct ccltune_step sr[2] = {{(void*)fSend, CCLTUNE_SEND, 0, 0, 0}, {(void*)fRecv, CCLTUNE_RECV, 0, 0, 0}};
  reset();
  s = series(sr, 2, 0, 1);
  rc = ccltune_series_run(&s, 0, 2, NULL);
  CHECK("sendrecv", rc == 0 && strcmp(kinds(), "(sr)(sr)") == 0, "rc %d, log %s", rc, kinds());
  /* a one-step group (scatter on a non-root rank: a recv only) */
  reset();
  s = series(&sr[1], 1, 0, 1);
  s.grouped = 1;
  rc = ccltune_series_run(&s, 0, 2, NULL);
  CHECK("grouped recv", rc == 0 && strcmp(kinds(), "(r)(r)") == 0, "rc %d, log %s", rc, kinds());
}

/* ---- errors: the failing call's index and step, nothing issued after it, groups closed ---- */
static void test_errors(void) {
  struct ccltune_step ar = {(void*)fAllReduce, CCLTUNE_ALL_REDUCE, 0, 0, 0};
  struct ccltune_step sr[2] = {{(void*)fSend, CCLTUNE_SEND, 0, 0, 0}, {(void*)fRecv, CCLTUNE_RECV, 0, 0, 0}};
  struct ccltune_outcome f;
  reset();
  failAt = 7, failRc = 3; /* ncclInternalError at the 8th call */
  struct ccltune_series s = series(&ar, 1, 0, 1);
  int rc = ccltune_series_run(&s, 100, 20, &f);
  CHECK("fails at call 107", rc == 3 && f.call == 107 && f.step == 0 && nlog == 8, "rc %d call %lld step %d, %d issued",
        rc, (long long)f.call, f.step, nlog);
  reset();
  failAt = 4, failRc = 7; /* ncclInProgress: a non-blocking communicator, not an error */
  rc = ccltune_series_run(&s, 0, 6, &f);
  CHECK("in progress is success", rc == 0 && nlog == 6, "rc %d, %d issued", rc, nlog);
  reset();
  failAt = 6, failRc = 5; /* the recv of the 2nd call: "(sr)(s" + r fails */
  s = series(sr, 2, 0, 1);
  rc = ccltune_series_run(&s, 0, 5, &f);
  CHECK("fails inside a group", rc == 5 && f.call == 1 && f.step == 1 && strcmp(kinds(), "(sr)(sr)") == 0,
        "rc %d call %lld step %d log %s", rc, (long long)f.call, f.step, kinds());
  reset();
  failAt = 3, failRc = 2; /* the 1st call's GroupEnd */
  rc = ccltune_series_run(&s, 0, 5, &f);
  CHECK("fails at group end", rc == 2 && f.call == 0 && f.step == 2 && nlog == 4, "rc %d call %lld step %d",
        rc, (long long)f.call, f.step);
  reset();
  failAt = 4, failRc = 1; /* the 2nd call's GroupStart */
  rc = ccltune_series_run(&s, 0, 5, &f);
  CHECK("fails at group start", rc == 1 && f.call == 1 && f.step == -1 && nlog == 5, "rc %d call %lld step %d",
        rc, (long long)f.call, f.step);
}

/* ---- a series that cannot be run: refused before anything is issued ---- */
static void test_invalid(void) {
  struct ccltune_step ar = {(void*)fAllReduce, CCLTUNE_ALL_REDUCE, 0, 0, 0};
  struct ccltune_step bad = {(void*)fAllReduce, CCLTUNE_KINDS, 0, 0, 0};
  struct ccltune_step none = {NULL, CCLTUNE_ALL_REDUCE, 0, 0, 0};
  struct ccltune_step two[2] = {ar, ar};
  struct ccltune_series ok = series(&ar, 1, 0, 1);
  struct ccltune_series cases[6];
  const char* names[6] = {"unknown kind", "NULL entry point", "shift_steps 0", "no steps", "group without entry points", "ok"};
  cases[0] = series(&bad, 1, 0, 1);
  cases[1] = series(&none, 1, 0, 1);
  cases[2] = series(&ar, 1, 0, 0);
  cases[3] = series(&ar, 0, 0, 1);
  cases[4] = series(two, 2, 0, 1);
  cases[4].group_end = NULL;
  cases[5] = ok;
  for (int k = 0; k < 6; k++) {
    reset();
    struct ccltune_outcome f = {0, 0, 0, 0.0};
    int rc = ccltune_series_run(&cases[k], 0, 3, &f);
    int want = k == 5 ? 0 : CCLTUNE_SERIES_INVALID;
    CHECK(names[k], rc == want && (k == 5 ? nlog == 3 : nlog == 0 && f.call == -1), "rc %d, %d issued", rc, nlog);
  }
  reset();
  CHECK("NULL series", ccltune_series_run(NULL, 0, 1, NULL) == CCLTUNE_SERIES_INVALID && nlog == 0, "issued %d", nlog);
  CHECK("negative calls", ccltune_series_run(&ok, 0, -1, NULL) == CCLTUNE_SERIES_INVALID, "accepted");
  CHECK("zero calls", ccltune_series_run(&ok, 0, 0, NULL) == 0 && nlog == 0, "issued %d", nlog);
  CHECK("abi", ccltune_series_abi() == CCLTUNE_SERIES_ABI, "%d", ccltune_series_abi());
}

/* ---- nccl-tests' schedule: -m, -z 0..3, per-iteration events ---- */
static void test_schedule(void) {
  static const struct { const char* name; int agg, blocking, events; int64_t iters; const char* log; } S[] = {
    {"plain", 1, 0, 0, 3, "AAA"},
    {"-m 3", 3, 0, 0, 2, "(AAA)(AAA)"},
    {"-z 1", 1, 1, 0, 2, "AW|AW|"},
    {"-z 2", 1, 2, 0, 2, "AWAW"},
    {"-z 3", 1, 3, 0, 2, "AWW|AWW|"},
    {"-m 2 -z 1", 2, 1, 0, 1, "(AW|AW|)"},
    {"-m 2 -z 3", 2, 3, 0, 2, "(AWAW)W|(AWAW)W|"},
    {"-I", 1, 0, 1, 3, "eAeAeAe"},
    {"-I -m 2", 2, 0, 1, 2, "(eAA)(eAA)e"},
    {"-I -z 3", 1, 3, 1, 2, "eAWWe|eAWWe|"},
  };
  static int EV[16];
  void* events[16];
  for (int i = 0; i < 16; i++) events[i] = &EV[i];
  struct ccltune_step ar = {(void*)fAllReduce, CCLTUNE_ALL_REDUCE, 0, 0, 0};
  int barrierArg = 0;
  for (size_t k = 0; k < sizeof S / sizeof S[0]; k++) {
    reset();
    busyPolls = 2; /* every wait polls a busy stream twice first */
    struct ccltune_series s = series(&ar, 1, 64, 3);
    s.agg = S[k].agg, s.blocking = S[k].blocking, s.stream_query = (void*)fQuery, s.barrier = (void*)fBarrier;
    s.barrier_arg = &barrierArg, s.async_error = (void*)fAsync, s.event_record = (void*)fRecord;
    if (S[k].events) s.events = events, s.nevents = 16;
    struct ccltune_outcome o = {0, 0, 0, -1.0};
    int rc = ccltune_series_run(&s, 1, S[k].iters, &o);
    CHECK(S[k].name, rc == 0 && strcmp(kinds(), S[k].log) == 0, "rc %d, log %s, want %s", rc, kinds(), S[k].log);
    CHECK(S[k].name, S[k].blocking == 3 ? o.busy_s > 0.0 : o.busy_s == 0.0, "busy_s %g", o.busy_s);
    int call = 0, ev = 0;
    for (int i = 0; i < nlog; i++) { /* calls from iteration 1 on: call c at buffer step c % 3; events in order */
      if (LOG[i].what == 'A') {
        int64_t c = S[k].agg + call++;
        CHECK(S[k].name, LOG[i].send == SEND + 64 * (c % 3), "call %lld at +%td", (long long)c, (const char*)LOG[i].send - SEND);
      }
      if (LOG[i].what == 'e') {
        CHECK(S[k].name, LOG[i].send == events[ev] && LOG[i].stream == &STREAM, "event %d", ev);
        ev++;
      }
      if (LOG[i].what == 'W') CHECK(S[k].name, LOG[i].stream == &STREAM, "waited on another stream");
      if (LOG[i].what == '|') CHECK(S[k].name, LOG[i].send == &barrierArg, "barrier argument");
    }
  }
  /* failures: where, whose, and nothing after */
  static const struct { const char* name; int blocking, events, waitRc, asyncErr, barrierRc, eventAt, failAt, failRc;
                        int rc; int64_t call; int step, source; const char* log; } F[] = {
    {"wait: GPU error", 2, 0, 700, 0, 0, -1, -1, 0, 700, 0, CCLTUNE_AT_WAIT, CCLTUNE_FROM_GPU, "(AW)"},
    {"wait: NCCL async error", 2, 0, 0, 6, 0, -1, -1, 0, 6, 0, CCLTUNE_AT_WAIT, CCLTUNE_FROM_NCCL, "(A)"},
    {"barrier", 1, 0, 0, 0, 4, -1, -1, 0, 4, 0, CCLTUNE_AT_BARRIER, CCLTUNE_FROM_BARRIER, "(AW|)"},
    {"event", 0, 1, 0, 0, 0, 6, -1, 0, 999, 2, CCLTUNE_AT_EVENT, CCLTUNE_FROM_GPU, "(eAA)(e)"},
    {"agg group end", 0, 0, 0, 0, 0, -1, 3, 2, 2, 0, CCLTUNE_AT_AGG_END, CCLTUNE_FROM_NCCL, "(AA)"},
    {"agg group start", 0, 0, 0, 0, 0, -1, 4, 1, 1, 2, CCLTUNE_AT_AGG_START, CCLTUNE_FROM_NCCL, "(AA)("},
    {"a call inside the agg group", 0, 0, 0, 0, 0, -1, 2, 5, 5, 1, 0, CCLTUNE_FROM_NCCL, "(AA)"},
  };
  for (size_t k = 0; k < sizeof F / sizeof F[0]; k++) {
    reset();
    struct ccltune_series s = series(&ar, 1, 0, 1);
    s.agg = 2, s.blocking = F[k].blocking, s.stream_query = (void*)fQuery, s.barrier = (void*)fBarrier;
    s.async_error = (void*)fAsync, s.event_record = (void*)fRecord;
    if (F[k].events) s.events = events, s.nevents = 16;
    failWaitRc = F[k].waitRc, asyncErr = F[k].asyncErr, failBarrierRc = F[k].barrierRc, failEventAt = F[k].eventAt;
    busyPolls = F[k].asyncErr ? 1 : 0; /* the async error is read while the stream is busy */
    failAt = F[k].failAt, failRc = F[k].failRc;
    struct ccltune_outcome o = {0, 0, 0, 0.0};
    int rc = ccltune_series_run(&s, 0, 3, &o);
    CHECK(F[k].name, rc == F[k].rc && o.call == F[k].call && o.step == F[k].step && o.source == F[k].source
                         && strcmp(kinds(), F[k].log) == 0,
          "rc %d call %lld step %d source %d log %s", rc, (long long)o.call, o.step, o.source, kinds());
  }
  /* refused before anything is issued */
  struct ccltune_series bad[5];
  const char* names[5] = {"agg 0", "blocking 4", "wait without a query", "barrier missing", "too few events"};
  for (int k = 0; k < 5; k++) {
    bad[k] = series(&ar, 1, 0, 1);
    bad[k].stream_query = (void*)fQuery, bad[k].barrier = (void*)fBarrier, bad[k].event_record = (void*)fRecord;
  }
  bad[0].agg = 0;
  bad[1].blocking = 4;
  bad[2].blocking = 2, bad[2].stream_query = NULL;
  bad[3].blocking = 3, bad[3].barrier = NULL;
  bad[4].events = events, bad[4].nevents = 3; /* 3 iterations need 4 */
  for (int k = 0; k < 5; k++) {
    reset();
    int rc = ccltune_series_run(&bad[k], 0, 3, NULL);
    CHECK(names[k], rc == CCLTUNE_SERIES_INVALID && nlog == 0, "rc %d, %d issued", rc, nlog);
  }
}

/* ---- CUDA graphs: capture the series, instantiate, launch, free ---- */
static int GRAPH, EXEC, failBeginRc, failEndRc, failInstRc, failLaunchAt = -1, modeSeen = -1;
static unsigned long long flagsSeen = 99;
static void* capturedOn;
static int fBegin(void* st, int mode) { modeSeen = mode, capturedOn = st; rec('C', NULL, NULL, 0, -1, mode, -1, NULL, st); return failBeginRc; }
static int fEndCapture(void* st, void** graph) {
  rec('E', NULL, NULL, 0, -1, -1, -1, NULL, st);
  *graph = failEndRc ? NULL : &GRAPH;
  return failEndRc;
}
static int fInstantiate(void** exec, void* graph, unsigned long long flags) {
  flagsSeen = flags;
  rec('I', graph, NULL, 0, -1, -1, -1, NULL, NULL);
  *exec = failInstRc ? NULL : &EXEC;
  return failInstRc;
}
static int fLaunch(void* exec, void* st) {
  int i = nlog;
  rec('L', exec, NULL, 0, -1, -1, -1, NULL, st);
  return i == failLaunchAt ? 800 : 0;
}
static int fExecDestroy(void* exec) { rec('x', exec, NULL, 0, -1, -1, -1, NULL, NULL); return 0; }
static int fGraphDestroy(void* graph) { rec('X', graph, NULL, 0, -1, -1, -1, NULL, NULL); return 0; }

static void reset_graph(void) { reset(); failBeginRc = failEndRc = failInstRc = 0; failLaunchAt = -1; modeSeen = -1; flagsSeen = 99; capturedOn = NULL; }

static void test_graph(void) {
  const struct ccltune_graph_api api = {(void*)fBegin, (void*)fEndCapture, (void*)fInstantiate, (void*)fLaunch,
                                        (void*)fExecDestroy, (void*)fGraphDestroy};
  struct ccltune_step ar = {(void*)fAllReduce, CCLTUNE_ALL_REDUCE, 0, 0, 0};
  struct ccltune_step sr[2] = {{(void*)fSend, CCLTUNE_SEND, 0, 0, 0}, {(void*)fRecv, CCLTUNE_RECV, 0, 0, 0}};
  struct ccltune_outcome o = {0, 0, 0, 0.0};
  void* exec = (void*)&o;

  /* the timed calls between BeginCapture and EndCapture, stepping as eagerly; no instantiation flags;
   * the template freed once instantiated */
  reset_graph();
  struct ccltune_series s = series(&ar, 1, 8, 3);
  int rc = ccltune_series_capture(&s, &api, 0, 5, &exec, &o);
  CHECK("capture: order", rc == 0 && exec == &EXEC && strcmp(kinds(), "CAAAAAEIX") == 0, "rc %d log %s", rc, kinds());
  CHECK("capture: thread-local mode on the series' stream", modeSeen == CCLTUNE_CAPTURE_THREAD_LOCAL && capturedOn == &STREAM,
        "mode %d", modeSeen);
  CHECK("capture: no instantiation flags (nccl-tests' cudaGraphInstantiate)", flagsSeen == 0, "flags %llu", flagsSeen);
  CHECK("capture: steps through the buffers", LOG[1].send == SEND && LOG[2].send == SEND + 8 && LOG[3].send == SEND + 16
                                                  && LOG[4].send == SEND && LOG[5].recv == RECV + 8,
        "pointers");
  CHECK("capture: the template is the graph ended", LOG[7].send == &GRAPH && LOG[8].send == &GRAPH, "graph");

  /* -m 2 with send/recv: each iteration's group around the calls' groups, all captured */
  reset_graph();
  s = series(sr, 2, 0, 1);
  s.agg = 2;
  rc = ccltune_series_capture(&s, &api, 0, 1, &exec, &o);
  CHECK("capture: -m 2 of sendrecv", rc == 0 && strcmp(kinds(), "C((sr)(sr))EIX") == 0, "rc %d log %s", rc, kinds());

  /* launches: back to back on the stream given, the executable graph each time */
  reset_graph();
  rc = ccltune_graph_launch(&api, &EXEC, &STREAM, 4, &o);
  CHECK("launch: 4 launches", rc == 0 && strcmp(kinds(), "LLLL") == 0 && LOG[3].send == &EXEC && LOG[3].stream == &STREAM,
        "rc %d log %s", rc, kinds());
  reset_graph();
  rc = ccltune_graph_launch(&api, &EXEC, &STREAM, 0, &o);
  CHECK("launch: none", rc == 0 && nlog == 0, "rc %d, %d", rc, nlog);
  reset_graph();
  failLaunchAt = 2;
  rc = ccltune_graph_launch(&api, &EXEC, &STREAM, 10, &o);
  CHECK("launch: the failing launch named, none after it", rc == 800 && o.call == 2 && o.step == CCLTUNE_AT_LAUNCH
                                                               && o.source == CCLTUNE_FROM_GPU && nlog == 3,
        "rc %d call %lld step %d, %d launched", rc, (long long)o.call, o.step, nlog);
  reset_graph();
  rc = ccltune_graph_destroy(&api, &EXEC);
  CHECK("destroy: the executable graph", rc == 0 && strcmp(kinds(), "x") == 0 && LOG[0].send == &EXEC, "log %s", kinds());
  reset_graph();
  rc = ccltune_graph_destroy(&api, NULL);
  CHECK("destroy: NULL is nothing", rc == 0 && nlog == 0, "log %s", kinds());

  /* NCCL fails during the capture: the capture still ends, what it held is freed, nothing is
   * instantiated, and the failing call is named as eagerly */
  reset_graph();
  s = series(&ar, 1, 0, 1);
  failAt = 3, failRc = 5; /* the third call (log: C A A A) */
  exec = (void*)&o;
  rc = ccltune_series_capture(&s, &api, 10, 6, &exec, &o);
  CHECK("capture: NCCL fails", rc == 5 && o.call == 12 && o.step == 0 && o.source == CCLTUNE_FROM_NCCL && exec == NULL
                                   && strcmp(kinds(), "CAAAEX") == 0,
        "rc %d call %lld step %d source %d log %s", rc, (long long)o.call, o.step, o.source, kinds());
  /* the runtime fails: at the capture's start, end, or instantiation */
  reset_graph();
  failBeginRc = 900;
  rc = ccltune_series_capture(&s, &api, 0, 2, &exec, &o);
  CHECK("capture: begin fails, nothing issued", rc == 900 && o.step == CCLTUNE_AT_CAPTURE_BEGIN && o.source == CCLTUNE_FROM_GPU
                                                    && strcmp(kinds(), "C") == 0 && exec == NULL,
        "rc %d step %d log %s", rc, o.step, kinds());
  reset_graph();
  failEndRc = 901;
  rc = ccltune_series_capture(&s, &api, 0, 2, &exec, &o);
  CHECK("capture: end fails", rc == 901 && o.step == CCLTUNE_AT_CAPTURE_END && strcmp(kinds(), "CAAE") == 0 && exec == NULL,
        "rc %d step %d log %s", rc, o.step, kinds());
  reset_graph();
  failInstRc = 902;
  rc = ccltune_series_capture(&s, &api, 0, 2, &exec, &o);
  CHECK("capture: instantiation fails, the template still freed",
        rc == 902 && o.step == CCLTUNE_AT_INSTANTIATE && strcmp(kinds(), "CAAEIX") == 0 && exec == NULL,
        "rc %d step %d log %s", rc, o.step, kinds());

  /* refused before anything is captured: a schedule that waits or records events (-z, -I), an
   * incomplete graph API, no place for the result */
  static void* events[4];
  struct ccltune_series bad[3] = {series(&ar, 1, 0, 1), series(&ar, 1, 0, 1), series(&ar, 1, 0, 1)};
  bad[0].blocking = 2, bad[0].stream_query = (void*)fQuery;
  bad[1].events = events, bad[1].nevents = 4, bad[1].event_record = (void*)fRecord;
  const char* why[3] = {"-z 2 with -G", "-I with -G", "-z 1 with -G"};
  bad[2].blocking = 1, bad[2].stream_query = (void*)fQuery, bad[2].barrier = (void*)fBarrier;
  for (int k = 0; k < 3; k++) {
    reset_graph();
    rc = ccltune_series_capture(&bad[k], &api, 0, 3, &exec, &o);
    CHECK(why[k], rc == CCLTUNE_SERIES_INVALID && nlog == 0 && exec == NULL, "rc %d, %d issued", rc, nlog);
  }
  struct ccltune_graph_api partial = api;
  partial.launch = NULL;
  reset_graph();
  rc = ccltune_series_capture(&s, &partial, 0, 3, &exec, &o);
  CHECK("graph API without launch", rc == CCLTUNE_SERIES_INVALID && nlog == 0, "rc %d, %d issued", rc, nlog);
  rc = ccltune_graph_launch(&partial, &EXEC, &STREAM, 3, &o);
  CHECK("launch without launch", rc == CCLTUNE_SERIES_INVALID && nlog == 0, "rc %d", rc);
  rc = ccltune_series_capture(&s, &api, 0, 3, NULL, &o);
  CHECK("capture without a place for the graph", rc == CCLTUNE_SERIES_INVALID && nlog == 0, "rc %d", rc);
}

/* ---- nccl-tests' timed region in C: issue, then wait for the stream (completeColl), clock around both ---- */
static void test_time(void) {
  struct ccltune_step ar = {(void*)fAllReduce, CCLTUNE_ALL_REDUCE, 0, 0, 0};
  static const struct { const char* name; int agg, blocking; const char* log; } T[] = {
    {"eager: one wait after the calls", 1, 0, "AAAW"},
    {"-z 2: waited after each call, no wait after", 1, 2, "AWAWAW"},
    {"-m 2 -z 2: one more wait (nccl-tests' completeColl)", 2, 2, "(AWAW)(AWAW)(AWAW)W"},
    {"-z 3: busy time, no wait after", 1, 3, "AWW|AWW|AWW|"},
  };
  int barrierArg = 0;
  for (size_t k = 0; k < sizeof T / sizeof T[0]; k++) {
    reset();
    busyPolls = 2;
    struct ccltune_series s = series(&ar, 1, 0, 1);
    s.agg = T[k].agg, s.blocking = T[k].blocking, s.stream_query = (void*)fQuery, s.async_error = (void*)fAsync;
    s.barrier = (void*)fBarrier, s.barrier_arg = &barrierArg;
    struct ccltune_outcome o = {0, 0, 0, -1.0};
    double cpu = -1.0, elapsed = -1.0;
    int rc = ccltune_series_time(&s, 0, 3, &o, &cpu, &elapsed);
    CHECK(T[k].name, rc == 0 && strcmp(kinds(), T[k].log) == 0, "rc %d, log %s, want %s", rc, kinds(), T[k].log);
    CHECK(T[k].name, cpu >= 0.0 && elapsed >= cpu, "cpu %g elapsed %g", cpu, elapsed);
    CHECK(T[k].name, T[k].blocking != 3 || (cpu == o.busy_s && elapsed == o.busy_s && o.busy_s > 0.0),
          "-z 3: cpu %g elapsed %g busy %g", cpu, elapsed, o.busy_s);
  }
  reset();
  failWaitRc = 700;
  struct ccltune_series s = series(&ar, 1, 0, 1);
  s.stream_query = (void*)fQuery;
  struct ccltune_outcome o = {0, 0, 0, 0.0};
  double cpu, elapsed;
  int rc = ccltune_series_time(&s, 2, 3, &o, &cpu, &elapsed);
  CHECK("time: the final wait fails", rc == 700 && o.step == CCLTUNE_AT_WAIT && o.source == CCLTUNE_FROM_GPU
                                          && o.call == 5 && strcmp(kinds(), "AAAW") == 0,
        "rc %d step %d source %d call %lld log %s", rc, o.step, o.source, (long long)o.call, kinds());
  reset();
  failAt = 1, failRc = 3;
  rc = ccltune_series_time(&s, 0, 3, &o, &cpu, &elapsed);
  CHECK("time: a call fails, nothing waited", rc == 3 && o.call == 1 && o.step == 0 && strcmp(kinds(), "AA") == 0,
        "rc %d call %lld log %s", rc, (long long)o.call, kinds());
  reset();
  s.stream_query = NULL;
  rc = ccltune_series_time(&s, 0, 3, &o, &cpu, &elapsed);
  CHECK("time: no stream query", rc == CCLTUNE_SERIES_INVALID && nlog == 0 && cpu == 0.0, "rc %d, %d issued", rc, nlog);
}

int main(void) {
  test_each_kind();
  test_steps();
  test_grouped();
  test_errors();
  test_invalid();
  test_schedule();
  test_graph();
  test_time();
  printf("%s: %d of %d checks failed\n", failures ? "FAILED" : "OK", failures, total);
  return failures > 100 ? 100 : failures;
}
