/* Loader test: dlopen the built plugin and call it exactly as NCCL does.
 *   test_loader /abs/path/libnccl-tuner-ccltune.so [TEST...]   (no name: all; --list: the names)
 * Symbols are looked up in NCCL's order (v6, v5, v4, v3, v2); every one found is exercised
 * with a contiguous float[numAlgo][numProto] cost table cast to float**, IGNORE cells at -1.0
 * and nChannels preset to 0. Exits non-zero on any failed check. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ccltune_tuner_abi.h"

#include "check.h"

/* ---- logger capture ---- */
static char logbuf[16384];
static size_t loglen;
static int nWarn, nInfo;
static void logger(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                   const char* fmt, ...) {
  va_list ap;
  if (level == NCCL_LOG_WARN) nWarn++;
  if (level == NCCL_LOG_INFO) nInfo++;
  if (!(flags & NCCL_TUNING) || !file || line <= 0) nWarn += 1000; /* must name its source */
  va_start(ap, fmt);
  if (loglen < sizeof logbuf - 1) {
    int n = vsnprintf(logbuf + loglen, sizeof logbuf - loglen, fmt, ap);
    if (n > 0) loglen += (size_t)n < sizeof logbuf - loglen ? (size_t)n : sizeof logbuf - loglen - 1;
    logbuf[loglen++] = '\n';
    logbuf[loglen] = '\0';
  }
  va_end(ap);
}
static void log_reset(void) { loglen = 0; logbuf[0] = '\0'; nWarn = nInfo = 0; }

/* ---- the rule file every test loads ---- */
static const char* RULES =
    "# loader test rules\n"                                  /* 1 */
    "allreduce,0,1023,ring,ll,-1,-1,-1\n"                    /* 2 */
    "allreduce,1024,65535,nvls,simple,8,-1,-1\n"             /* 3: NVLS is IGNORE below */
    "allreduce,1024,65535,tree,ll128,4,-1,-1\n"              /* 4 */
    "allgather,0,1M,pat,simple,2,-1,-1\n"                    /* 5 */
    "bogus,1,2,ring,ll,0,1,1\n"                              /* 6: rejected */
    "broadcast,0,1T,default,default,12,-1,-1\n"              /* 7: channels only */
    "allreduce,1M,2M,ring,simple,0,-1,-1,-1,1\n"             /* 8: registered buffers only */
    "reduce,0,1K,ring,ll,3,2,16\n";                          /* 9: other communicator */

enum { NA = 7, NP = 3, NA_RCCL = 8 };

static void fill(float* t, int nA, int nP) {
  for (int a = 0; a < nA; a++)
    for (int p = 0; p < nP; p++)
      t[a * nP + p] = (a >= CCLT_ALGO_COLLNET_DIRECT && a <= CCLT_ALGO_NVLS_TREE)
                          ? CCLT_COST_IGNORE
                          : 10.0f + (float)(a * nP + p);
}

/* Result of one call: which cell became 0.0 (-1 none, -2 more than one or a bad write). */
typedef struct { int cell, nChannels; } result;

static result diff(const float* before, const float* after, int n, int nChannels) {
  result r = {-1, nChannels};
  for (int i = 0; i < n; i++) {
    if (before[i] == after[i]) continue;
    if (after[i] != 0.0f || r.cell != -1 || before[i] < 0.0f) r.cell = -2;
    else r.cell = i;
  }
  return r;
}

typedef ncclResult_t (*collinfo_fn)(void*, ncclFunc_t, size_t, int, float**, int, int, int, int*);
typedef ncclResult_t (*collinfo_v3_fn)(void*, ncclFunc_t, size_t, int, float**, int, int, int*);

typedef struct {
  void* ctx;
  collinfo_fn v4;       /* v4..v6 signature */
  collinfo_v3_fn v3;
} api;

static result call(const api* a, ncclFunc_t coll, size_t bytes, int regBuff, int nA) {
  float t[NA_RCCL * NP], before[NA_RCCL * NP];
  int nCh = 0;
  fill(t, nA, NP);
  memcpy(before, t, sizeof t);
  ncclResult_t rc = a->v4 ? a->v4(a->ctx, coll, bytes, 1, (float**)t, nA, NP, regBuff, &nCh)
                          : a->v3(a->ctx, coll, bytes, 1, (float**)t, nA, NP, &nCh);
  CHECK(rc == ncclSuccess, "getCollInfo returned %d", rc);
  return diff(before, t, nA * NP, nCh);
}

#define CELL(a, p) ((a) * NP + (p))

static void expect(const api* a, const char* what, ncclFunc_t coll, size_t bytes, int regBuff,
                   int nA, int cell, int nCh) {
  result r = call(a, coll, bytes, regBuff, nA);
  CHECK(r.cell == cell && r.nChannels == nCh, "%s: got cell %d nChannels %d, want %d %d", what,
        r.cell, r.nChannels, cell, nCh);
}

static void check_table_api(const char* ver, const api* a, int hasRegBuff) {
  printf("-- %s cost-table calls\n", ver);
  expect(a, "no match: size", ncclFuncAllReduce, 1ull << 40, 0, NA, -1, 0);
  expect(a, "no match: collective", ncclFuncReduceScatter, 100, 0, NA, -1, 0);
  expect(a, "no match: other communicator", ncclFuncReduce, 100, 0, NA, -1, 0);
  expect(a, "ring/ll", ncclFuncAllReduce, 100, 0, NA, CELL(1, 0), 0);
  expect(a, "IGNORE skipped, next rule wins", ncclFuncAllReduce, 4096, 0, NA, CELL(0, 1), 4);
  expect(a, "pat/simple", ncclFuncAllGather, 1 << 20, 0, NA, CELL(6, 2), 2);
  expect(a, "channel-only rule", ncclFuncBroadcast, 7, 0, NA, -1, 12);
  expect(a, "rccl [8][3] table", ncclFuncAllReduce, 4096, 0, NA_RCCL, CELL(0, 1), 4);
  expect(a, "rccl [8][3] pat", ncclFuncAllGather, 1, 0, NA_RCCL, CELL(6, 2), 2);
  expect(a, "regBuff 0 misses regBuff rule", ncclFuncAllReduce, 1 << 20, 0, NA, -1, 0);
  expect(a, "regBuff rule", ncclFuncAllReduce, 1 << 20, 1, NA, hasRegBuff ? CELL(1, 2) : -1, 0);
  /* a table too small for the rule's cell: rule skipped, nothing written out of bounds */
  expect(a, "pat beyond numAlgo=6", ncclFuncAllGather, 1, 0, 6, -1, 0);
}

/* ---- concurrency: same answers from 4 threads ---- */
typedef struct { const api* a; int bad; } thr_arg;
static const struct { ncclFunc_t coll; size_t bytes; int cell, nCh; } CASES[] = {
    {ncclFuncAllReduce, 100, CELL(1, 0), 0}, {ncclFuncAllReduce, 4096, CELL(0, 1), 4},
    {ncclFuncAllGather, 77, CELL(6, 2), 2},   {ncclFuncBroadcast, 5, -1, 12},
    {ncclFuncReduceScatter, 5, -1, 0}};
static void* worker(void* p) {
  thr_arg* t = p;
  for (int i = 0; i < 1000; i++) {
    int k = i % (int)(sizeof CASES / sizeof CASES[0]);
    float tab[NA * NP], before[NA * NP];
    int nCh = 0;
    fill(tab, NA, NP);
    memcpy(before, tab, sizeof tab);
    if (t->a->v4(t->a->ctx, CASES[k].coll, CASES[k].bytes, 1, (float**)tab, NA, NP, 0, &nCh) != ncclSuccess)
      t->bad++;
    result r = diff(before, tab, NA * NP, nCh);
    if (r.cell != CASES[k].cell || r.nChannels != CASES[k].nCh) t->bad++;
  }
  return NULL;
}
static void check_threads(const api* a) {
  pthread_t th[4];
  thr_arg args[4];
  for (int i = 0; i < 4; i++) {
    args[i].a = a;
    args[i].bad = 0;
    pthread_create(&th[i], NULL, worker, &args[i]);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(th[i], NULL);
    CHECK(args[i].bad == 0, "thread %d: %d wrong results", i, args[i].bad);
  }
}

static void check_init_log(const char* ver, const char* path) {
  char want[600];
  CHECK(strstr(logbuf, "ccltune tuner: loaded 7 rules from ") != NULL, "%s: INFO missing:\n%s", ver, logbuf);
  CHECK(strstr(logbuf, "(6 apply to this communicator: nRanks=8 nNodes=1") != NULL, "%s: count:\n%s", ver, logbuf);
  snprintf(want, sizeof want, "%s:6: unknown collective 'bogus'", path);
  CHECK(strstr(logbuf, want) != NULL, "%s: WARN missing '%s':\n%s", ver, want, logbuf);
  CHECK(nWarn >= 1 && nWarn < 1000 && nInfo >= 1, "%s: warn=%d info=%d", ver, nWarn, nInfo);
}

/* ---- the shared state: the library, its structs in NCCL's lookup order, the rule file ---- */
static const char* const syms[] = {"ncclTunerPlugin_v6", "ncclTunerPlugin_v5", "ncclTunerPlugin_v4",
                                   "ncclTunerPlugin_v3", "ncclTunerPlugin_v2"};
static void* found[5];
static void* lib;
static char path[] = "/tmp/ccltune_loader_XXXXXX";

/* Each test starts from the rule file above (one test rewrites it, another points elsewhere). */
static void use_rules(void) {
  FILE* f = fopen(path, "w");
  int ok = f && fputs(RULES, f) >= 0;
  if (f) ok = fclose(f) == 0 && ok;
  CHECK(ok, "write %s", path);
  setenv("NCCL_TUNER_CONFIG_FILE", path, 1);
}

static void test_exports(void) {
  for (int i = 0; i < 5; i++) CHECK(found[i] != NULL, "%s not exported", syms[i]);
  CHECK(dlsym(lib, "ccl_parse_buffer") == NULL, "internal symbols must be hidden");
}

static void test_v6_v5(void) {
  use_rules();
  /* v6 and v5: init(ctx, commId, nRanks, nNodes, logger, nvlDomainInfo, constants) */
  for (int v = 0; v < 2; v++) {
    const ncclTuner_v5_t* t = found[v]; /* v6 starts with the v5 members */
    static ncclTunerConstants_v5_t consts, copy;
    memset(&consts, 0x5a, sizeof consts);
    memcpy(&copy, &consts, sizeof copy);
    ncclNvlDomainInfo_v5_t nvl = {1, 8, 8};
    void* ctx = NULL;
    log_reset();
    CHECK(strcmp(t->name, "ccltune") == 0, "name %s", t->name);
    CHECK(t->init(&ctx, 0x1234, 8, 1, logger, &nvl, &consts) == ncclSuccess, "%s init", syms[v]);
    CHECK(ctx != NULL, "%s context", syms[v]);
    CHECK(memcmp(&consts, &copy, sizeof consts) == 0, "%s modified the constants", syms[v]);
    check_init_log(syms[v], path);
    api a = {ctx, t->getCollInfo, NULL};
    check_table_api(syms[v], &a, 1);
    check_threads(&a);
    CHECK(t->finalize(ctx) == ncclSuccess, "finalize");
    /* logger may be NULL; NULL context still answers success and writes nothing */
    ctx = NULL;
    CHECK(t->init(&ctx, 1, 8, 1, NULL, NULL, NULL) == ncclSuccess, "init with NULL logger");
    t->finalize(ctx);
    api none = {NULL, t->getCollInfo, NULL};
    expect(&none, "NULL context", ncclFuncAllReduce, 100, 0, NA, -1, 0);
  }
  CHECK(((const ncclTuner_v6_t*)found[0])->getChunkSize == NULL, "v6 getChunkSize must be NULL");

}

static void test_v4_v3(void) {
  use_rules();
  /* v4 and v3: init(nRanks, nNodes, logger, ctx) */
  {
    const ncclTuner_v4_t* t4 = found[2];
    const ncclTuner_v3_t* t3 = found[3];
    void* ctx = NULL;
    log_reset();
    CHECK(t4->init(8, 1, logger, &ctx) == ncclSuccess && ctx, "v4 init");
    check_init_log("v4", path);
    api a4 = {ctx, t4->getCollInfo, NULL};
    check_table_api("v4", &a4, 1);
    t4->destroy(ctx);
    ctx = NULL;
    CHECK(t3->init(8, 1, logger, &ctx) == ncclSuccess && ctx, "v3 init");
    api a3 = {ctx, NULL, t3->getCollInfo};
    check_table_api("v3", &a3, 0); /* v3 has no regBuff: only regBuff -1 rules match */
    t3->destroy(ctx);
  }

}

static void test_v2(void) {
  use_rules();
  /* v2: algorithm/protocol returned directly, set only on a match */
  {
    const ncclTuner_v2_t* t = found[4];
    void* ctx = NULL;
    CHECK(t->init(8, 1, logger, &ctx) == ncclSuccess && ctx, "v2 init");
    int algo = -1, proto = -1, nCh = 0;
    t->getCollInfo(ctx, ncclFuncAllReduce, 100, 0, 0, 1, &algo, &proto, &nCh);
    CHECK(algo == CCLT_ALGO_RING && proto == CCLT_PROTO_LL && nCh == 0, "v2 ring/ll: %d %d %d", algo, proto, nCh);
    algo = proto = -1;
    t->getCollInfo(ctx, ncclFuncAllReduce, 4096, 0, 0, 1, &algo, &proto, &nCh);
    CHECK(algo == CCLT_ALGO_TREE && proto == CCLT_PROTO_LL128 && nCh == 4, "v2 nvls unsupported -> tree: %d %d %d", algo, proto, nCh);
    algo = proto = -1;
    nCh = 0;
    t->getCollInfo(ctx, ncclFuncAllReduce, 4096, 0, 1, 1, &algo, &proto, &nCh);
    CHECK(algo == CCLT_ALGO_NVLS && proto == CCLT_PROTO_SIMPLE && nCh == 8, "v2 nvls: %d %d %d", algo, proto, nCh);
    algo = proto = -1;
    nCh = 0;
    t->getCollInfo(ctx, ncclFuncReduceScatter, 4096, 0, 1, 1, &algo, &proto, &nCh);
    CHECK(algo == -1 && proto == -1 && nCh == 0, "v2 no match: %d %d %d", algo, proto, nCh);
    t->destroy(ctx);
    CHECK(t->getCollInfo(NULL, ncclFuncAllReduce, 1, 0, 0, 1, &algo, &proto, &nCh) == ncclSuccess, "v2 NULL ctx");
  }

}

static void test_unusable_file(void) {
  /* a rule file named but unusable (missing, a FIFO nobody writes, a device read without end, over
   * 16 MiB): one WARN at once, success, nothing changes */
  {
    const ncclTuner_v6_t* t = found[0];
    char fifo[] = "/tmp/ccltune_loader_fifo_XXXXXX", big[] = "/tmp/ccltune_loader_big_XXXXXX";
    int bfd = mkstemp(big);
    CHECK(bfd >= 0 && ftruncate(bfd, (16 << 20) + 1) == 0, "sparse 16 MiB + 1 file");
    if (bfd >= 0) close(bfd);
    int haveFifo = mkdtemp(fifo) != NULL;
    char fifoPath[64];
    snprintf(fifoPath, sizeof fifoPath, "%s/f", fifo);
    haveFifo = haveFifo && mkfifo(fifoPath, 0600) == 0;
    const struct { const char* path; const char* why; } BAD[] = {
        {"/nonexistent/ccltune.conf", "No such file or directory"},
        {haveFifo ? fifoPath : "/dev/zero", "not a regular file"},
        {"/dev/zero", "not a regular file"},
        {big, "larger than 16 MiB"},
    };
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
      void* ctx = (void*)1;
      char want[300];
      setenv("NCCL_TUNER_CONFIG_FILE", BAD[i].path, 1);
      log_reset();
      CHECK(t->init(&ctx, 1, 8, 1, logger, NULL, NULL) == ncclSuccess, "init, %s", BAD[i].path);
      CHECK(ctx == NULL, "%s leaves context NULL", BAD[i].path);
      snprintf(want, sizeof want, "cannot read rule file %s (%s", BAD[i].path, BAD[i].why);
      CHECK(strstr(logbuf, want) && nWarn == 1, "%s: one WARN '%s':\n%s", BAD[i].path, want, logbuf);
      api a = {ctx, t->getCollInfo, NULL};
      expect(&a, "unusable file: untouched", ncclFuncAllReduce, 100, 0, NA, -1, 0);
    }
    unlink(big);
    if (haveFifo) unlink(fifoPath);
    rmdir(fifo);
  }
}

static void test_many_bad_lines(void) {
  /* many rejected lines: one WARN quoting the first three, every line at INFO */
  {
    const ncclTuner_v6_t* t = found[0];
    FILE* f = fopen(path, "w");
    for (int i = 0; f && i < 50; i++) fprintf(f, "bogus%d,0,1,ring,ll,1,-1,-1\n", i);
    fputs("allreduce,0,1K,ring,ll,1,-1,-1\n", f);
    fclose(f);
    setenv("NCCL_TUNER_CONFIG_FILE", path, 1);
    void* ctx = NULL;
    log_reset();
    CHECK(t->init(&ctx, 1, 8, 1, logger, NULL, NULL) == ncclSuccess && ctx, "init, 50 bad lines");
    CHECK(nWarn == 1 && strstr(logbuf, "50 lines of") && strstr(logbuf, "line 1: unknown collective 'bogus0'")
          && strstr(logbuf, "line 3: unknown collective 'bogus2'") && strstr(logbuf, "allreduce); ...)")
          && !strstr(logbuf, "line 4: unknown"),
          "one summary WARN (warn=%d):\n%.2000s", nWarn, logbuf);
    CHECK(strstr(logbuf, ":50: unknown collective 'bogus49'") && nInfo >= 51, "each line at INFO (info=%d)", nInfo);
    t->finalize(ctx);
  }
}

/* CollNet: the rule's channel count is written as given. NCCL 2.28.9 replaces its own count with the tuner's
 * (getAlgoInfo, src/enqueue.cc) and clamps it to the communicator's channels for ring, tree, PAT and NVLS when it
 * lays the calls out, but uses it unclamped for CollNet (scheduleCollTasksToPlan): docs/rules.md "Channels" says
 * so, and the plugin neither caps nor raises it, for any algorithm. */
static void test_collnet_channels(void) {
  const ncclTuner_v6_t* t = found[0];
  FILE* f = fopen(path, "w");
  CHECK(f && fputs("allreduce,0,1T,collnet_direct,simple,48,-1,-1\nallgather,0,1T,ring,simple,48,-1,-1\n", f) >= 0,
        "write %s", path);
  if (f) fclose(f);
  setenv("NCCL_TUNER_CONFIG_FILE", path, 1);
  void* ctx = NULL;
  log_reset();
  CHECK(t->init(&ctx, 7, 8, 2, logger, NULL, NULL) == ncclSuccess && ctx, "init, collnet rule");
  float tab[NA * NP], before[NA * NP];
  for (int i = 0; i < NA * NP; i++) tab[i] = 10.0f + (float)i; /* CollNet supported: no IGNORE cell */
  memcpy(before, tab, sizeof tab);
  int nCh = 0;
  CHECK(t->getCollInfo(ctx, ncclFuncAllReduce, 1 << 20, 1, (float**)tab, NA, NP, 0, &nCh) == ncclSuccess, "call");
  result r = diff(before, tab, NA * NP, nCh);
  CHECK(r.cell == CELL(CCLT_ALGO_COLLNET_DIRECT, 2) && r.nChannels == 48, "collnet: got cell %d nChannels %d",
        r.cell, r.nChannels);
  fill(tab, NA, NP);
  memcpy(before, tab, sizeof tab);
  nCh = 0;
  CHECK(t->getCollInfo(ctx, ncclFuncAllGather, 1 << 20, 1, (float**)tab, NA, NP, 0, &nCh) == ncclSuccess, "call");
  r = diff(before, tab, NA * NP, nCh);
  CHECK(r.cell == CELL(1, 2) && r.nChannels == 48, "ring: got cell %d nChannels %d (NCCL clamps it, not us)",
        r.cell, r.nChannels);
  t->finalize(ctx);
}

int main(int argc, char** argv) {
  if (argc < 2) { fprintf(stderr, "usage: test_loader LIB [TEST...]\n"); return 2; }
  int fd = mkstemp(path);
  if (fd < 0) return 2;
  close(fd);
  unsetenv("CCLTUNE_GPU_MODEL");
  lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 2; }
  for (int i = 0; i < 5; i++) found[i] = dlsym(lib, syms[i]);
  for (int i = 0; i < 5; i++)
    if (!found[i]) { fprintf(stderr, "%s not exported\n", syms[i]); return 1; }
  static const check_test TESTS[] = {
      {"exports", test_exports},           {"v6_v5", test_v6_v5}, {"v4_v3", test_v4_v3}, {"v2", test_v2},
      {"unusable_file", test_unusable_file}, {"many_bad_lines", test_many_bad_lines},
      {"collnet_channels", test_collnet_channels},
  };
  int rc = check_main(TESTS, CHECK_COUNT(TESTS), argc - 2, argv + 2);
  unlink(path);
  dlclose(lib);
  return rc;
}
