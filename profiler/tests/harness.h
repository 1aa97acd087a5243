/* A stand-in for NCCL's side of the profiler ABI, shared by the test harness and the
 * microbenchmark: dlopen the plugin, look its structs up newest first (as NCCL 2.29+ does:
 * v6, v5, ... v1) or one given version, and make the calls NCCL makes with that version's
 * real descriptor layout (src/plugin/profiler.cc in NCCL: a task start, then, from the proxy
 * thread, one KernelCh start per channel with the GPU timer, recordEventState(KernelChStop)
 * with the stop timer and stopEvent; the task's stopEvent once it is enqueued). */
#ifndef CCLTUNE_PROFILER_HARNESS_H
#define CCLTUNE_PROFILER_HARNESS_H

#include "ccltune_profiler_abi.h"

typedef struct {
  int abi;
  void* lib;
  const void* plugin; /* the ncclProfiler_vN struct */
  int mask;           /* NCCL's process-wide activation mask, written by init */
} fake_nccl;

/* Loads path; abi 0 picks the newest struct present. Returns 0, or -1 with a message printed. */
int fn_load(fake_nccl* f, const char* path, int abi);
const char* fn_name(const fake_nccl* f);
void fn_unload(fake_nccl* f);

/* init as NCCL calls it for a communicator (v1..v3 get none of these facts). */
void* fn_init(fake_nccl* f, uint64_t comm_hash, int nnodes, int nranks, int rank, ncclDebugLogger_t logger);
void fn_finalize(fake_nccl* f, void* ctx);

/* Task events; func/dtype/algo/proto are NCCL's strings (turned into v1's enum numbers for v1). */
void* fn_coll(fake_nccl* f, void* ctx, int rank, uint64_t comm_hash, uint64_t seq, const char* func, size_t count,
              const char* dtype, const char* algo, const char* proto, int nchannels, int nwarps);
void* fn_p2p(fake_nccl* f, void* ctx, int rank, uint64_t comm_hash, const char* func, size_t count,
             const char* dtype, int peer, int nchannels);
void* fn_group(fake_nccl* f, void* ctx);
/* v6: a copy-engine collective's CeColl start as NCCL 2.30 sends it (src/plugin/profiler.cc,
 * ncclProfilerStartCeCollEvent); NCCL sends nothing when the mask leaves CE events out. */
void* fn_ce_coll(fake_nccl* f, void* ctx, int rank, uint64_t seq, const char* func, size_t count, const char* dtype);
void fn_stop(fake_nccl* f, void* handle);

/* Kernel channel events (v3+; pTimers from v4): start with the GPU timer, then the stop. */
void* fn_kch_start(fake_nccl* f, void* ctx, void* parent, int channel, uint64_t ptimer);
void fn_kch_stop(fake_nccl* f, void* handle, uint64_t ptimer);

/* One whole call: task start, its channels each [start + c*skew_ns, start + dur_ns] (channel
 * 0 spans exactly dur_ns), the task stop before or after the channels. Returns the task handle
 * (already stopped; for tests that only check it was NULL or not). */
void* fn_call(fake_nccl* f, void* ctx, int rank, uint64_t comm_hash, uint64_t seq, const char* func, size_t count,
              int nchannels, uint64_t start_ns, uint64_t dur_ns, int stop_task_first);

#endif
