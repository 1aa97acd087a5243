#include "harness.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

int fn_load(fake_nccl* f, const char* path, int abi) {
  memset(f, 0, sizeof *f);
  f->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!f->lib) {
    printf("dlopen %s: %s\n", path, dlerror());
    return -1;
  }
  for (int v = abi ? abi : 6; v >= (abi ? abi : 1); v--) {
    char sym[32];
    snprintf(sym, sizeof sym, "ncclProfiler_v%d", v);
    f->plugin = dlsym(f->lib, sym);
    if (f->plugin) {
      f->abi = v;
      return 0;
    }
  }
  printf("%s: no ncclProfiler_v%d\n", path, abi);
  return -1;
}

/* Every version starts with `const char* name`. */
const char* fn_name(const fake_nccl* f) { return *(const char* const*)f->plugin; }

void fn_unload(fake_nccl* f) {
  if (f->lib) dlclose(f->lib);
  f->lib = NULL;
}

#define P(V) ((const ncclProfiler_v##V##_t*)f->plugin)

void* fn_init(fake_nccl* f, uint64_t hash, int nnodes, int nranks, int rank, ncclDebugLogger_t logger) {
  void* ctx = NULL;
  switch (f->abi) {
  case 1: P(1)->init(&ctx, &f->mask); break;
  case 2: P(2)->init(&ctx, &f->mask); break;
  case 3: P(3)->init(&ctx, &f->mask); break;
  case 4: P(4)->init(&ctx, &f->mask, "comm", hash, nnodes, nranks, rank, logger); break;
  case 5: P(5)->init(&ctx, hash, &f->mask, "comm", nnodes, nranks, rank, logger); break;
  default: P(6)->init(&ctx, hash, &f->mask, "comm", nnodes, nranks, rank, logger); break;
  }
  return ctx;
}

void fn_finalize(fake_nccl* f, void* ctx) {
  switch (f->abi) { /* finalize sits at the same place in every version */
  default: P(6)->finalize(ctx); break;
  }
}

static int index_of(const char* s, const char* const* names, int n) {
  for (int i = 0; i < n; i++)
    if (strcmp(s, names[i]) == 0) return i;
  return 255;
}

static const char* const funcs[] = {CCLP_V1_FUNC_NAMES}, *const dtypes[] = {CCLP_V1_DTYPE_NAMES},
                         *const algos[] = {CCLP_V1_ALGO_NAMES}, *const protos[] = {CCLP_V1_PROTO_NAMES};

void* fn_coll(fake_nccl* f, void* ctx, int rank, uint64_t hash, uint64_t seq, const char* func, size_t count,
              const char* dtype, const char* algo, const char* proto, int nch, int nwarps) {
  void* h = NULL;
  if (!(f->mask & ncclProfileColl)) return NULL; /* NCCL starts no event the mask leaves out */
  switch (f->abi) {
  case 1: {
    ncclProfilerEventDescr_v1_t d = {0};
    d.type = ncclProfileColl, d.rank = rank, d.coll.commHash = hash, d.coll.seqNumber = seq;
    d.coll.func = (uint8_t)index_of(func, funcs, 8), d.coll.count = count;
    d.coll.datatype = (uint8_t)index_of(dtype, dtypes, 12), d.coll.nMaxChannels = (uint8_t)nch;
    d.coll.nWarps = (uint8_t)nwarps, d.coll.algo = (uint8_t)index_of(algo, algos, 7);
    d.coll.proto = (uint8_t)index_of(proto, protos, 3);
    P(1)->startEvent(ctx, &h, &d);
  } break;
#define V23(V)                                                                                     \
  case V: {                                                                                        \
    ncclProfilerEventDescr_v##V##_t d = {0};                                                       \
    d.type = ncclProfileColl, d.rank = rank, d.coll.commHash = hash, d.coll.seqNumber = seq;       \
    d.coll.func = func, d.coll.count = count, d.coll.datatype = dtype, d.coll.nMaxChannels = (uint8_t)nch; \
    d.coll.nWarps = (uint8_t)nwarps, d.coll.algo = algo, d.coll.proto = proto;                     \
    P(V)->startEvent(ctx, &h, &d);                                                                 \
  } break;
    V23(2)
    V23(3)
#define V4P(V)                                                                                     \
  case V: {                                                                                        \
    ncclProfilerEventDescr_v##V##_t d = {0};                                                       \
    d.type = ncclProfileColl, d.rank = rank, d.coll.seqNumber = seq;                               \
    d.coll.func = func, d.coll.count = count, d.coll.datatype = dtype, d.coll.nChannels = (uint8_t)nch; \
    d.coll.nWarps = (uint8_t)nwarps, d.coll.algo = algo, d.coll.proto = proto;                     \
    P(V)->startEvent(ctx, &h, &d);                                                                 \
  } break;
    V4P(4)
    V4P(5)
    V4P(6)
  }
  return h;
}

void* fn_p2p(fake_nccl* f, void* ctx, int rank, uint64_t hash, const char* func, size_t count, const char* dtype,
             int peer, int nch) {
  void* h = NULL;
  if (!(f->mask & ncclProfileP2p)) return NULL;
  switch (f->abi) {
  case 1: {
    ncclProfilerEventDescr_v1_t d = {0};
    d.type = ncclProfileP2p, d.rank = rank, d.p2p.commHash = hash, d.p2p.func = (uint8_t)index_of(func, funcs, 8);
    d.p2p.count = count, d.p2p.datatype = (uint8_t)index_of(dtype, dtypes, 12), d.p2p.peer = peer;
    P(1)->startEvent(ctx, &h, &d);
  } break;
#define P23(V)                                                                                     \
  case V: {                                                                                        \
    ncclProfilerEventDescr_v##V##_t d = {0};                                                       \
    d.type = ncclProfileP2p, d.rank = rank, d.p2p.commHash = hash, d.p2p.func = func;              \
    d.p2p.count = count, d.p2p.datatype = dtype, d.p2p.peer = peer;                                \
    P(V)->startEvent(ctx, &h, &d);                                                                 \
  } break;
    P23(2)
    P23(3)
#define P4P(V)                                                                                     \
  case V: {                                                                                        \
    ncclProfilerEventDescr_v##V##_t d = {0};                                                       \
    d.type = ncclProfileP2p, d.rank = rank, d.p2p.func = func, d.p2p.count = count;                \
    d.p2p.datatype = dtype, d.p2p.peer = peer, d.p2p.nChannels = (uint8_t)nch;                     \
    P(V)->startEvent(ctx, &h, &d);                                                                 \
  } break;
    P4P(4)
    P4P(5)
    P4P(6)
  }
  return h;
}

void* fn_group(fake_nccl* f, void* ctx) {
  void* h = (void*)1;
  switch (f->abi) {
  case 1: { ncclProfilerEventDescr_v1_t d = {0}; d.type = ncclProfileGroup; P(1)->startEvent(ctx, &h, &d); } break;
  case 2: { ncclProfilerEventDescr_v2_t d = {0}; d.type = ncclProfileGroup; P(2)->startEvent(ctx, &h, &d); } break;
  case 3: { ncclProfilerEventDescr_v3_t d = {0}; d.type = ncclProfileGroup; P(3)->startEvent(ctx, &h, &d); } break;
  case 4: { ncclProfilerEventDescr_v4_t d = {0}; d.type = ncclProfileGroup; P(4)->startEvent(ctx, &h, &d); } break;
  case 5: { ncclProfilerEventDescr_v5_t d = {0}; d.type = ncclProfileGroup; P(5)->startEvent(ctx, &h, &d); } break;
  default: { ncclProfilerEventDescr_v6_t d = {0}; d.type = ncclProfileGroup; P(6)->startEvent(ctx, &h, &d); } break;
  }
  return h;
}

void* fn_ce_coll(fake_nccl* f, void* ctx, int rank, uint64_t seq, const char* func, size_t count, const char* dtype) {
  void* h = NULL;
  if (f->abi < 6 || !(f->mask & (ncclProfileCeColl | ncclProfileCeSync | ncclProfileCeBatch))) return NULL;
  ncclProfilerEventDescr_v6_t d = {0};
  d.type = ncclProfileCeColl, d.rank = rank, d.ceColl.seqNumber = seq, d.ceColl.func = func;
  d.ceColl.count = count, d.ceColl.datatype = dtype, d.ceColl.syncStrategy = "UC", d.ceColl.ceSeqNum = (uint32_t)seq;
  P(6)->startEvent(ctx, &h, &d);
  return h;
}

void fn_stop(fake_nccl* f, void* handle) {
  if (handle) P(6)->stopEvent(handle); /* NCCL stops only events it got a handle for */
}

void* fn_kch_start(fake_nccl* f, void* ctx, void* parent, int channel, uint64_t ptimer) {
  void* h = NULL;
  if (!(f->mask & ncclProfileKernelCh)) return NULL;
  switch (f->abi) {
  case 3: {
    ncclProfilerEventDescr_v3_t d = {0};
    d.type = ncclProfileKernelCh, d.parentObj = parent, d.kernelCh.channelId = (uint8_t)channel;
    P(3)->startEvent(ctx, &h, &d);
  } break;
#define K4P(V)                                                                                     \
  case V: {                                                                                        \
    ncclProfilerEventDescr_v##V##_t d = {0};                                                       \
    d.type = ncclProfileKernelCh, d.parentObj = parent, d.kernelCh.channelId = (uint8_t)channel;  \
    d.kernelCh.pTimer = ptimer;                                                                    \
    P(V)->startEvent(ctx, &h, &d);                                                                 \
  } break;
    K4P(4)
    K4P(5)
    K4P(6)
  default: break; /* no KernelCh before v3 */
  }
  return h;
}

void fn_kch_stop(fake_nccl* f, void* handle, uint64_t ptimer) {
  if (!handle) return;
  if (f->abi >= 4) {
    ncclProfilerEventStateArgs_v4_t a = {0};
    a.kernelCh.pTimer = ptimer;
    P(4)->recordEventState(handle, ncclProfilerKernelChStop, &a);
  } else {
    ncclProfilerEventStateArgs_v3_t a = {0};
    P(3)->recordEventState(handle, ncclProfilerKernelChStop, &a);
  }
  P(6)->stopEvent(handle);
}

void* fn_call(fake_nccl* f, void* ctx, int rank, uint64_t hash, uint64_t seq, const char* func, size_t count,
              int nch, uint64_t start_ns, uint64_t dur_ns, int stop_task_first) {
  void* task = fn_coll(f, ctx, rank, hash, seq, func, count, "ncclBfloat16", "RING", "LL", nch, 16);
  if (stop_task_first) fn_stop(f, task);
  void* ch[64] = {0};
  for (int c = 0; c < nch && c < 64; c++) ch[c] = fn_kch_start(f, ctx, task, c, start_ns + (uint64_t)c * 100);
  for (int c = 0; c < nch && c < 64; c++) fn_kch_stop(f, ch[c], start_ns + dur_ns - (c ? 50 : 0));
  if (!stop_task_first) fn_stop(f, task);
  return task;
}
