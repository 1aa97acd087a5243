/* A fake libnccl for the Python binding's CPU test (tests/plugin/test_series.py): NCCL's entry
 * points with NCCL's signatures, each appending one line to a log instead of touching a GPU.
 * Pointers are printed as given (the test passes made-up addresses: nothing is dereferenced). */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))
static char LOG[1 << 20];
static size_t used;
static int calls, failAt = -1, failRc;

static int rec(const char* what, const void* s, const void* r, size_t n, int dt, int op, int peer, void* comm, void* st) {
  int i = calls++;
  if (used < sizeof LOG - 256)
    used += (size_t)snprintf(LOG + used, sizeof LOG - used, "%s %zx %zx %zu %d %d %d %zx %zx\n", what, (size_t)s,
                             (size_t)r, n, dt, op, peer, (size_t)comm, (size_t)st);
  return i == failAt ? failRc : 0;
}

EXPORT int ncclAllReduce(const void* s, void* r, size_t n, int dt, int op, void* c, void* st) { return rec("AllReduce", s, r, n, dt, op, -1, c, st); }
EXPORT int ncclAllGather(const void* s, void* r, size_t n, int dt, void* c, void* st) { return rec("AllGather", s, r, n, dt, -1, -1, c, st); }
EXPORT int ncclReduceScatter(const void* s, void* r, size_t n, int dt, int op, void* c, void* st) { return rec("ReduceScatter", s, r, n, dt, op, -1, c, st); }
EXPORT int ncclBroadcast(const void* s, void* r, size_t n, int dt, int root, void* c, void* st) { return rec("Broadcast", s, r, n, dt, -1, root, c, st); }
EXPORT int ncclReduce(const void* s, void* r, size_t n, int dt, int op, int root, void* c, void* st) { return rec("Reduce", s, r, n, dt, op, root, c, st); }
EXPORT int ncclAlltoAll(const void* s, void* r, size_t n, int dt, void* c, void* st) { return rec("AlltoAll", s, r, n, dt, -1, -1, c, st); }
EXPORT int ncclGather(const void* s, void* r, size_t n, int dt, int root, void* c, void* st) { return rec("Gather", s, r, n, dt, -1, root, c, st); }
EXPORT int ncclScatter(const void* s, void* r, size_t n, int dt, int root, void* c, void* st) { return rec("Scatter", s, r, n, dt, -1, root, c, st); }
EXPORT int ncclSend(const void* s, size_t n, int dt, int peer, void* c, void* st) { return rec("Send", s, NULL, n, dt, -1, peer, c, st); }
EXPORT int ncclRecv(void* r, size_t n, int dt, int peer, void* c, void* st) { return rec("Recv", NULL, r, n, dt, -1, peer, c, st); }
EXPORT int ncclGroupStart(void) { return rec("GroupStart", NULL, NULL, 0, -1, -1, -1, NULL, NULL); }
EXPORT int ncclGroupEnd(void) { return rec("GroupEnd", NULL, NULL, 0, -1, -1, -1, NULL, NULL); }
EXPORT int ncclGetVersion(int* v) { *v = 22809; return 0; }
EXPORT const char* ncclGetErrorString(int rc) { return rc == 5 ? "invalid usage (run with NCCL_DEBUG=WARN for details)" : "unhandled error"; }
EXPORT const char* ncclGetLastError(void* comm) { (void)comm; return "fake: refused on purpose"; }

EXPORT int ncclCommGetAsyncError(void* comm, int* err) { (void)comm; *err = 0; return 0; }
/* the GPU runtime's entry points the schedule takes (cuStreamQuery, cuEventRecord shapes) */
EXPORT int fake_stream_query(void* st) { return rec("Wait", NULL, NULL, 0, -1, -1, -1, NULL, st); }
EXPORT int fake_event_record(void* ev, void* st) { return rec("Event", ev, NULL, 0, -1, -1, -1, NULL, st); }

/* the GPU driver's graph calls (cuStreamBeginCapture_v2, cuStreamEndCapture, cuGraphInstantiateWithFlags,
 * cuGraphLaunch, cuGraphExecDestroy, cuGraphDestroy shapes): 0x6a is the captured graph, 0xe8 the
 * executable one; the mode and the flags are logged in the op column */
EXPORT int fake_begin_capture(void* st, int mode) { return rec("BeginCapture", NULL, NULL, 0, -1, mode, -1, NULL, st); }
EXPORT int fake_end_capture(void* st, void** graph) { *graph = (void*)0x6a; return rec("EndCapture", NULL, NULL, 0, -1, -1, -1, NULL, st); }
EXPORT int fake_instantiate(void** exec, void* graph, unsigned long long flags) {
  *exec = (void*)0xe8;
  return rec("Instantiate", graph, NULL, 0, -1, (int)flags, -1, NULL, NULL);
}
EXPORT int fake_graph_launch(void* exec, void* st) { return rec("Launch", exec, NULL, 0, -1, -1, -1, NULL, st); }
EXPORT int fake_exec_destroy(void* exec) { return rec("ExecDestroy", exec, NULL, 0, -1, -1, -1, NULL, NULL); }
EXPORT int fake_graph_destroy(void* graph) { return rec("GraphDestroy", graph, NULL, 0, -1, -1, -1, NULL, NULL); }

/* the test's controls */
EXPORT const char* fake_log(void) { return LOG; }
EXPORT void fake_reset(int fail_at, int rc) { used = 0; LOG[0] = '\0'; calls = 0; failAt = fail_at; failRc = rc; }
