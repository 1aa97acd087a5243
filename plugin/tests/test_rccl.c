/* RCCL-shaped harness: the ccltune tuner plugin called exactly as RCCL calls it.
 *   test_rccl LIB SPX_SYSFS_ROOT CPX_SYSFS_ROOT [TEST...]   (no name: all; --list: the names)
 * Exits non-zero on any failed check. Every rule below is a fact read from RCCL's source
 * (no RCCL code is copied); "(inferred)" marks what the source implies but does not state.
 *
 * Sources
 *  [L]  ROCm/rocm-systems projects/rccl/src/plugin/tuner.cc @03a89144 (current RCCL; RCCL
 *       moved into the rocm-systems monorepo): ncclTunerPluginLoad.
 *  [O]  same, src/plugin/plugin_open.cc @03a89144: tuner library prefix "libnccl-tuner".
 *  [E]  same, src/enqueue.cc @03a89144: initCollCostTable, updateCollCostTable,
 *       topoGetAlgoInfo, getAlgoInfo (the getCollInfo call site).
 *  [T]  same, src/graph/tuning.cc @03a89144: ncclTopoTuneModel, ncclTopoGetAlgoTime,
 *       ncclPatEnable, rcclTuningModel tables.
 *  [H5] ROCm/rocm-systems projects/rccl/src/include/plugin/tuner/tuner_v5.h @7eeebea1:
 *       NCCL_NUM_ALGORITHMS_V5 bumped 7 -> 8 for NCCL_ALGO_DIRECT_A2A; bwRatio appended to
 *       ncclTunerConstants_v5_t. ROCm/rccl src/include/plugin/tuner/tuner_v5.h @212d8267 and
 *       nccl_tuner.h @5db32621: the 7-algorithm tables (TREE 0 .. PAT 6), bwRatio appended.
 *  [I]  ROCm/rccl src/init.cc (2.21.5, commit 0cbce2a7, after tag rocm-6.2.2):
 *       topo->ll128Enabled |= rcclParamLL128ForceEnable() (RCCL_LL128_FORCE_ENABLE; the
 *       same line appears in later RCCL init.cc versions the search index holds, commits not
 *       named there); src/include/param.h: RCCL_PARAM caches its value on the first read,
 *       once per process.
 *  [V2] ROCm/rccl 0cbce2a7 (RCCL 2.21.5): src/misc/tuner.cc looks up only
 *       "ncclTunerPlugin_v2" (src/include/nccl_tuner.h); src/enqueue.cc getTunerInfo calls
 *       v2 getCollInfo with algorithm/protocol UNDEF and nChannels 0 and uses a returned
 *       pair without checking RCCL's model.
 *
 * Facts the harness acts out
 *  - Symbol lookup [L]: ncclTunerPlugin_v6, then _v5, _v4, _v3, _v2; the first found is
 *    used, the others are never looked at. Old RCCL [V2]: only _v2.
 *  - init (v5/v6 signature) with commId, nRanks, nNodes, logger, nvlDomainInfo and RCCL's
 *    constants struct: NVIDIA's v5 fields with numAlgo-sized algo dimensions, then
 *    double bwRatio[2][numAlgo][3] [H5]. The plugin must not write it.
 *  - The cost table [E]: a contiguous float[NCCL_NUM_ALGORITHMS][3], every cell set to
 *    NCCL_ALGO_PROTO_IGNORE (-1.0) first, then the modelled cells get a time; passed as
 *    float**, with numAlgo = NCCL_NUM_ALGORITHMS (7, or 8 where DIRECT_A2A exists [H5]),
 *    numProto = 3, regBuff, and nMaxChannels preset to 0.
 *  - Which cells stay IGNORE on an AMD GPU [T][E]:
 *      * nRanks == 1: only Ring/Simple, at 0.0;
 *      * Broadcast, Reduce: Ring only; AllGather, ReduceScatter: Ring, plus PAT only with
 *        NCCL_PAT_ENABLE (default 0) and one rank per node; AllReduce: everything but PAT;
 *      * Tree/Simple is skipped when the GPU arch is gfx942 or gfx950 and every rank is a
 *        local GPU (topo nodes[GPU].count == nRanks: a single node);
 *      * NVLS/NVLSTree: bwRatio 0 in every RCCL tuning model, so bandwidth 0 (IGNORE);
 *        CollNet: off without collnetEnable;
 *      * LL128: IGNORE unless the topology is all-xGMI [E], and, in the model [T], RCCL is
 *        built with ENABLE_LL128, the arch is gfx90a/gfx942/gfx950 and topo->ll128Enabled,
 *        which RCCL_LL128_FORCE_ENABLE=1 forces [I]. Unlike NVIDIA NCCL, an explicit
 *        NCCL_PROTO=LL128 does not bypass this check in [T] (pEnable != 0 test);
 *      * DIRECT_A2A (index 7 in the 8-column table): an allreduce over a multi-node net
 *        mesh; IGNORE on one node (inferred: its graph has no channels there).
 *  - Selection after the plugin [E]: the minimum over cells that are not -1.0 and >= 0,
 *    strict '<' (ties to the lowest index); no usable cell -> RING/SIMPLE with an INFO
 *    (not an error, unlike NVIDIA NCCL); "tuner match" means the minimum is exactly 0.0
 *    (then RCCL skips its own protocol update); nMaxChannels != 0 replaces RCCL's count.
 *  - Platform: the plugin reads the GPU model and the CPX/NPS4 partition mode from sysfs
 *    (CCLTUNE_SYSFS_ROOT, fixtures tests/fixtures/sysfs/amd-mi300x{,-cpx}); a rule file's
 *    platform sections select per-partition rules. */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ccltune_tuner_abi.h"

#include "check.h"

static char logbuf[8192];
static size_t loglen;
static void logger(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                   const char* fmt, ...) {
  (void)level; (void)flags; (void)file; (void)line;
  va_list ap;
  va_start(ap, fmt);
  if (loglen < sizeof logbuf - 2) {
    int n = vsnprintf(logbuf + loglen, sizeof logbuf - loglen - 1, fmt, ap);
    if (n > 0) loglen += (size_t)n < sizeof logbuf - loglen - 2 ? (size_t)n : sizeof logbuf - loglen - 2;
    logbuf[loglen++] = '\n';
    logbuf[loglen] = '\0';
  }
  va_end(ap);
}

#define NP 3
#define MAX_ALGO 8
#define DIRECT_A2A 7 /* (inferred) the column the 7 -> 8 bump adds */

/* What RCCL knows about a communicator when it fills the table. */
typedef struct {
  const char* arch;   /* gcnArchName, e.g. "gfx942:sramecc+:xnack-" */
  int nRanks, nNodes, localGpus;
  int xgmiAll;        /* topo->type & RCCL_TOPO_XGMI_ALL */
  int ll128Build;     /* built with ENABLE_LL128 */
  int ll128Force;     /* RCCL_LL128_FORCE_ENABLE=1 */
  int numAlgo;        /* NCCL_NUM_ALGORITHMS: 7, or 8 with DIRECT_A2A */
} rccl_comm;

static int arch_is(const rccl_comm* c, const char* prefix) {
  return strncmp(c->arch, prefix, strlen(prefix)) == 0;
}

static int modelled(const rccl_comm* c, int coll, int a, int p) {
  if (a == DIRECT_A2A) return coll == ncclFuncAllReduce && c->nNodes > 1;
  if (a == CCLT_ALGO_NVLS || a == CCLT_ALGO_NVLS_TREE) return 0;
  if (a == CCLT_ALGO_COLLNET_DIRECT || a == CCLT_ALGO_COLLNET_CHAIN) return 0;
  if (a == CCLT_ALGO_PAT) return 0; /* NCCL_PAT_ENABLE defaults to 0 */
  if ((coll == ncclFuncBroadcast || coll == ncclFuncReduce || coll == ncclFuncAllGather ||
       coll == ncclFuncReduceScatter) && a != CCLT_ALGO_RING)
    return 0;
  if (a == CCLT_ALGO_TREE && p == CCLT_PROTO_SIMPLE &&
      (arch_is(c, "gfx942") || arch_is(c, "gfx950")) && c->localGpus == c->nRanks)
    return 0;
  if (p == CCLT_PROTO_LL128) {
    if (!c->xgmiAll || !c->ll128Build) return 0;
    if (!(arch_is(c, "gfx90a") || arch_is(c, "gfx942") || arch_is(c, "gfx950"))) return 0;
    if (!c->ll128Force) return 0;
  }
  return 1;
}

/* initCollCostTable + updateCollCostTable: distinct positive times for modelled cells. */
static void fill(const rccl_comm* c, int coll, float* t) {
  for (int i = 0; i < c->numAlgo * NP; i++) t[i] = CCLT_COST_IGNORE;
  if (c->nRanks == 1) {
    t[CCLT_ALGO_RING * NP + CCLT_PROTO_SIMPLE] = 0.0f;
    return;
  }
  for (int a = 0; a < c->numAlgo; a++)
    for (int p = 0; p < NP; p++)
      if (modelled(c, coll, a, p)) t[a * NP + p] = 50.0f - (float)(a * NP + p);
}

/* topoGetAlgoInfo's choice; *tunerMatch = minimum exactly 0.0. */
static int select_cell(const rccl_comm* c, const float* t, int* tunerMatch) {
  float minTime = 3.4e38f;
  int best = -1;
  for (int a = 0; a < c->numAlgo; a++)
    for (int p = 0; p < NP; p++) {
      float v = t[a * NP + p];
      if (v == CCLT_COST_IGNORE) continue;
      if (v >= 0.0f && v < minTime) { minTime = v; best = a * NP + p; }
    }
  *tunerMatch = best >= 0 && minTime == 0.0f;
  return best >= 0 ? best : CCLT_ALGO_RING * NP + CCLT_PROTO_SIMPLE; /* RCCL's fallback */
}

typedef ncclResult_t (*collinfo_fn)(void*, ncclFunc_t, size_t, int, float**, int, int, int, int*);

typedef struct { int cell, channels, tunerMatch; } outcome;

/* One getAlgoInfo: fill, call the plugin, check what it wrote, select. */
static outcome call(const rccl_comm* c, collinfo_fn fn, void* ctx, int coll, size_t nBytes,
                    const char* what) {
  float t[MAX_ALGO * NP], before[MAX_ALGO * NP];
  int nMaxChannels = 0, writes = 0;
  fill(c, coll, t);
  memcpy(before, t, sizeof t);
  ncclResult_t rc = fn(ctx, (ncclFunc_t)coll, nBytes, 1, (float**)t, c->numAlgo, NP, 0, &nMaxChannels);
  CHECK(rc == ncclSuccess, "%s: getCollInfo returned %d (RCCL fails the collective)", what, rc);
  for (int i = 0; i < c->numAlgo * NP; i++) {
    if (t[i] == before[i]) continue;
    writes++;
    CHECK(before[i] != CCLT_COST_IGNORE, "%s: wrote IGNORE cell %d (un-ignores what RCCL cannot run)", what, i);
    CHECK(t[i] == 0.0f, "%s: wrote %g to cell %d; RCCL recognises only 0.0 as the tuner's choice", what, t[i], i);
  }
  CHECK(writes <= 1, "%s: %d cells written", what, writes);
  outcome o;
  o.cell = select_cell(c, t, &o.tunerMatch);
  o.channels = nMaxChannels;
  return o;
}

#define CELL(a, p) ((a) * NP + (p))

static void expect(const rccl_comm* c, collinfo_fn fn, void* ctx, int coll, size_t nBytes,
                   const char* what, int cell, int match, int channels) {
  outcome o = call(c, fn, ctx, coll, nBytes, what);
  CHECK(o.cell == cell && o.tunerMatch == match && o.channels == channels,
        "%s: RCCL runs cell %d (tuner match %d, nMaxChannels %d), want %d (%d, %d)", what, o.cell,
        o.tunerMatch, o.channels, cell, match, channels);
}

/* Rules: lines 2-7 for 8 ranks on one node, then per-partition sections. */
static const char* RULES =
    "# RCCL harness rules\n"                           /* 1 */
    "allreduce,0,4096,tree,simple,0,1,8\n"             /* 2: Tree/Simple not modelled on gfx942 */
    "allreduce,0,4096,tree,ll,0,1,8\n"                 /* 3 */
    "allreduce,4097,1M,ring,ll128,16,1,8\n"            /* 4: LL128 only when forced */
    "allreduce,4097,1M,ring,simple,8,1,8\n"            /* 5 */
    "allgather,0,1G,tree,ll,0,1,8\n"                   /* 6: Tree is not modelled for allgather */
    "broadcast,0,1G,default,default,12,1,8\n"          /* 7: channels only */
    "platform,gpu=MI300X,partition=CPX,nps=NPS4\n"     /* 8 */
    "allreduce,0,1G,ring,ll,2,-1,-1\n"                 /* 9 */
    "platform,gpu=MI300X,partition=SPX,nps=NPS1\n"     /* 10 */
    "allreduce,0,1G,ring,simple,32,-1,-1\n";           /* 11 */

/* RCCL's constants struct for numAlgo algorithms, in doubles [H5]. */
static size_t constants_doubles(int numAlgo) {
  return (size_t)numAlgo * NP + 3u * numAlgo * NP + 5u * 4 * 3 + 2u * numAlgo * NP;
}

typedef struct {
  const char* sym;
  int version;
  void* p;
} found_sym;

/* [L]: v6, v5, v4, v3, v2; the first found wins. */
static found_sym lookup(void* lib, int oldRccl) {
  static const char* const order[] = {"ncclTunerPlugin_v6", "ncclTunerPlugin_v5", "ncclTunerPlugin_v4",
                                      "ncclTunerPlugin_v3", "ncclTunerPlugin_v2"};
  found_sym f = {NULL, 0, NULL};
  for (int i = oldRccl ? 4 : 0; i < 5; i++) {
    void* p = dlsym(lib, order[i]);
    if (p) { f.sym = order[i]; f.version = 6 - i; f.p = p; return f; }
  }
  return f;
}

static void* init_v5(const ncclTuner_v5_t* t, const rccl_comm* c, const char* root) {
  void* ctx = NULL;
  size_t n = constants_doubles(c->numAlgo);
  double* consts = malloc(n * sizeof(double));
  double* copy = malloc(n * sizeof(double));
  ncclNvlDomainInfo_v5_t nvl = {c->nNodes, c->nRanks / c->nNodes, c->nRanks / c->nNodes};
  if (!consts || !copy) { free(consts); free(copy); return NULL; }
  for (size_t i = 0; i < n; i++) consts[i] = copy[i] = 0.5 + (double)i;
  setenv("CCLTUNE_SYSFS_ROOT", root, 1);
  loglen = 0;
  logbuf[0] = '\0';
  CHECK(t->init(&ctx, 0x5eed, (size_t)c->nRanks, (size_t)c->nNodes, logger, &nvl,
                (ncclTunerConstants_v5_t*)consts) == ncclSuccess, "init");
  CHECK(memcmp(consts, copy, n * sizeof(double)) == 0, "the plugin wrote RCCL's constants");
  free(consts);
  free(copy);
  return ctx;
}

static void spx_8_ranks(const ncclTuner_v5_t* t, const char* spx, int numAlgo) {
  rccl_comm c = {"gfx942:sramecc+:xnack-", 8, 1, 8, 1, 1, 0, numAlgo};
  printf("-- MI300X SPX/NPS1, 8 ranks, %d algorithms\n", numAlgo);
  void* ctx = init_v5(t, &c, spx);
  CHECK(ctx != NULL, "context");
  CHECK(strstr(logbuf, "partition=SPX nps=NPS1") && strstr(logbuf, "gpu=AMD Instinct MI300X"),
        "platform in the INFO line:\n%s", logbuf);
  collinfo_fn fn = (collinfo_fn)t->getCollInfo;
  expect(&c, fn, ctx, ncclFuncAllReduce, 1024, "tree/simple IGNORE on gfx942 single node -> tree/ll",
         CELL(CCLT_ALGO_TREE, CCLT_PROTO_LL), 1, 0);
  expect(&c, fn, ctx, ncclFuncAllReduce, 65536, "ll128 IGNORE without RCCL_LL128_FORCE_ENABLE -> ring/simple",
         CELL(CCLT_ALGO_RING, CCLT_PROTO_SIMPLE), 1, 8);
  c.ll128Force = 1;
  expect(&c, fn, ctx, ncclFuncAllReduce, 65536, "ll128 with RCCL_LL128_FORCE_ENABLE=1",
         CELL(CCLT_ALGO_RING, CCLT_PROTO_LL128), 1, 16);
  c.xgmiAll = 0;
  expect(&c, fn, ctx, ncclFuncAllReduce, 65536, "ll128 forced but not all-xGMI -> ring/simple",
         CELL(CCLT_ALGO_RING, CCLT_PROTO_SIMPLE), 1, 8);
  c.xgmiAll = 1;
  c.ll128Force = 0;
  /* Tree is not modelled for allgather: the rule is skipped and RCCL's model chooses */
  outcome o = call(&c, fn, ctx, ncclFuncAllGather, 4096, "allgather tree rule skipped");
  CHECK(!o.tunerMatch && o.channels == 0 && o.cell / NP == CCLT_ALGO_RING, "allgather: cell %d match %d ch %d",
        o.cell, o.tunerMatch, o.channels);
  o = call(&c, fn, ctx, ncclFuncBroadcast, 1 << 20, "broadcast channels only");
  CHECK(!o.tunerMatch && o.channels == 12, "broadcast: match %d ch %d", o.tunerMatch, o.channels);
  expect(&c, fn, ctx, ncclFuncAllReduce, 4u << 20, "SPX section rule", CELL(CCLT_ALGO_RING, CCLT_PROTO_SIMPLE), 1, 32);
  o = call(&c, fn, ctx, ncclFuncReduceScatter, 4096, "no rule");
  CHECK(!o.tunerMatch && o.channels == 0, "reducescatter untouched: match %d ch %d", o.tunerMatch, o.channels);
  t->finalize(ctx);
}

static void cpx_64_ranks(const ncclTuner_v5_t* t, const char* cpx, int numAlgo) {
  /* CPX: each of the 8 XCDs of the 8 GPUs is a device, so one node holds 64 ranks */
  rccl_comm c = {"gfx942:sramecc+:xnack-", 64, 1, 64, 1, 1, 0, numAlgo};
  printf("-- MI300X CPX/NPS4, 64 ranks, %d algorithms\n", numAlgo);
  void* ctx = init_v5(t, &c, cpx);
  CHECK(ctx != NULL, "context");
  CHECK(strstr(logbuf, "partition=CPX nps=NPS4") && strstr(logbuf, "(1 apply to this communicator"),
        "CPX section only:\n%s", logbuf);
  collinfo_fn fn = (collinfo_fn)t->getCollInfo;
  expect(&c, fn, ctx, ncclFuncAllReduce, 4u << 20, "CPX section rule", CELL(CCLT_ALGO_RING, CCLT_PROTO_LL), 1, 2);
  expect(&c, fn, ctx, ncclFuncAllReduce, 1024, "CPX: 8-rank rules do not apply", CELL(CCLT_ALGO_RING, CCLT_PROTO_LL), 1, 2);
  t->finalize(ctx);
  /* the same 64-rank communicator on an SPX/NPS1 tree would take the SPX section */
}

/* [V2]: RCCL 2.21.5 calls only v2, with UNDEF preset; the pair is used as returned. */
static void old_rccl_v2(void* lib, const char* spx) {
  found_sym f = lookup(lib, 1);
  printf("-- RCCL 2.21.5: %s\n", f.sym ? f.sym : "(none)");
  CHECK(f.version == 2, "old RCCL finds only v2, got v%d", f.version);
  if (f.version != 2) return;
  const ncclTuner_v2_t* t = f.p;
  void* ctx = NULL;
  setenv("CCLTUNE_SYSFS_ROOT", spx, 1);
  CHECK(t->init(8, 1, logger, &ctx) == ncclSuccess && ctx, "v2 init");
  int algo = CCLT_ALGO_UNDEF, proto = CCLT_PROTO_UNDEF, nCh = 0;
  t->getCollInfo(ctx, ncclFuncAllReduce, 65536, 0, 0, 1, &algo, &proto, &nCh);
  /* v2 sees no cost table: ll128 cannot be known to be off, so rule 4 is returned as written */
  CHECK(algo == CCLT_ALGO_RING && proto == CCLT_PROTO_LL128 && nCh == 16, "v2: %d %d %d", algo, proto, nCh);
  algo = CCLT_ALGO_UNDEF; proto = CCLT_PROTO_UNDEF; nCh = 0;
  t->getCollInfo(ctx, ncclFuncReduceScatter, 4096, 0, 0, 1, &algo, &proto, &nCh);
  CHECK(algo == CCLT_ALGO_UNDEF && proto == CCLT_PROTO_UNDEF && nCh == 0, "v2 no rule: %d %d %d", algo, proto, nCh);
  t->destroy(ctx);
}

static void* lib;
static const char *spxRoot, *cpxRoot;

static void test_v6_tables(void) {
  found_sym f = lookup(lib, 0);
  printf("-- RCCL loader picks %s\n", f.sym ? f.sym : "(none)");
  CHECK(f.version == 6, "current RCCL takes the first of v6..v2 found: got v%d", f.version);
  if (f.version >= 5) {
    const ncclTuner_v5_t* t = f.p; /* v6 begins with the v5 members */
    for (int numAlgo = 7; numAlgo <= 8; numAlgo++) {
      spx_8_ranks(t, spxRoot, numAlgo);
      cpx_64_ranks(t, cpxRoot, numAlgo);
    }
  }
}

static void test_old_rccl_v2(void) { old_rccl_v2(lib, spxRoot); }

int main(int argc, char** argv) {
  if (argc < 4) { fprintf(stderr, "usage: test_rccl LIB SPX_ROOT CPX_ROOT [TEST...]\n"); return 2; }
  char path[] = "/tmp/ccltune_rccl_XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0 || write(fd, RULES, strlen(RULES)) != (ssize_t)strlen(RULES)) return 2;
  close(fd);
  setenv("NCCL_TUNER_CONFIG_FILE", path, 1);
  unsetenv("CCLTUNE_GPU_MODEL");
  unsetenv("CCLTUNE_CAPTURE");
  spxRoot = argv[2];
  cpxRoot = argv[3];
  lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 2; }
  static const check_test TESTS[] = {{"v6_tables", test_v6_tables}, {"old_rccl_v2", test_old_rccl_v2}};
  int rc = check_main(TESTS, CHECK_COUNT(TESTS), argc - 4, argv + 4);
  unsetenv("CCLTUNE_SYSFS_ROOT");
  unlink(path);
  dlclose(lib);
  return rc;
}
