/* The profiler plugin driven as NCCL drives it (harness.c), for every ABI version, then its
 * files read back and checked exactly: counts, sums, max, percentiles against the known
 * timer values (within the histogram's documented 1/64), call lines, sampling, overflow,
 * many communicators and threads, the exit writer, bad environment values, profiling off.
 * Usage: test_profiler LIB OUTDIR [TEST...] (OUTDIR is emptied of profile files per case; no test
 * name: all of them; --list: the names). */
#include "../../plugin/tests/check.h"
#include "harness.h"

#include <dirent.h>
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static const char* lib_path;
static char out_root[1900];
#define T0 1732661234000000000ull /* a GPU globaltimer reading (ns since the epoch) */

/* ---- the logger NCCL passes (v4+): keeps the last warning ---------------------------------- */
static char last_warn[1024];
static int n_warn;
static void logger(ncclDebugLogLevel level, unsigned long flags, const char* file, int line, const char* fmt, ...) {
  (void)flags, (void)file, (void)line;
  if (level != NCCL_LOG_WARN) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_warn, sizeof last_warn, fmt, ap);
  va_end(ap);
  n_warn++;
}

/* ---- files -------------------------------------------------------------------------------- */
static void case_dir(char* dir, size_t n, const char* name) {
  snprintf(dir, n, "%s/%s", out_root, name);
  mkdir(out_root, 0777);
  mkdir(dir, 0777);
  DIR* d = opendir(dir);
  for (struct dirent* e; d && (e = readdir(d));) {
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    if (e->d_name[0] != '.' || strstr(e->d_name, "ccltune")) unlink(p);
  }
  if (d) closedir(d);
  setenv("CCLTUNE_PROFILE", dir, 1);
}

/* The number of profile files in dir; the text of the first (malloc'd) in *text. */
static int read_profiles_like(const char* dir, const char* suffix, char** text, char* name, size_t name_len) {
  int n = 0;
  *text = NULL;
  DIR* d = opendir(dir);
  for (struct dirent* e; d && (e = readdir(d));) {
    if (strncmp(e->d_name, "ccltune-profile.", 16) != 0 || (suffix && !strstr(e->d_name, suffix))) continue;
    if (n++ == 0) {
      char p[4096];
      snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
      if (name) snprintf(name, name_len, "%s", e->d_name);
      FILE* f = fopen(p, "r");
      if (!f) continue;
      *text = calloc(1, 1 << 22);
      size_t got = fread(*text, 1, (1 << 22) - 1, f);
      (*text)[got] = 0;
      fclose(f);
    }
  }
  if (d) closedir(d);
  return n;
}

static int read_profiles(const char* dir, char** text, char* name, size_t name_len) {
  return read_profiles_like(dir, NULL, text, name, name_len);
}

static int has_line(const char* text, const char* line) {
  size_t n = strlen(line);
  for (const char* p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : p)
    if (strncmp(p, line, n) == 0 && (p[n] == '\n' || p[n] == 0)) return 1;
  return 0;
}

/* The entry line that starts with prefix; its last 8 fields parsed. Returns 0 if absent. */
typedef struct {
  unsigned long long calls, timed;
  double sum, p10, p50, p90, max;
  int dashes;
} stats;
static int entry(const char* text, const char* prefix, stats* s) {
  size_t n = strlen(prefix);
  for (const char* p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : p) {
    if (strncmp(p, prefix, n) != 0 || p[n] != ' ') continue;
    memset(s, 0, sizeof *s);
    if (sscanf(p + n, " %llu %llu %lf %lf %lf %lf %lf", &s->calls, &s->timed, &s->sum, &s->p10, &s->p50, &s->p90,
               &s->max) == 7)
      return 1;
    s->dashes = sscanf(p + n, " %llu %llu - - - - -", &s->calls, &s->timed) == 2;
    return 1;
  }
  return 0;
}

static int count_prefix(const char* text, const char* prefix) {
  int n = 0;
  size_t len = strlen(prefix);
  for (const char* p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : p) n += strncmp(p, prefix, len) == 0;
  return n;
}

/* nearest-rank percentile of sorted values */
static double pct(const double* v, int n, double p) {
  int r = (int)ceil(p / 100.0 * n);
  return v[(r < 1 ? 1 : r) - 1];
}

static void check_close(double got, double want, const char* what, const char* where) {
  CHECK(fabs(got - want) <= want / 64.0 + 0.0015, "%s %s: %.3f, want %.3f within 1/64", where, what, got, want);
}

/* ---- cases -------------------------------------------------------------------------------- */

/* Ten AllReduce calls of known GPU durations and three Sends, for one ABI version. */
static void case_version(int abi) {
  char dir[2048], name[512], where[32];
  snprintf(where, sizeof where, "v%d", abi);
  snprintf(dir, sizeof dir, "%s", where);
  case_dir(dir, sizeof dir, where);
  fake_nccl f;
  if (fn_load(&f, lib_path, abi) != 0) { CHECK(0, "load v%d", abi); return; }
  CHECK(strcmp(fn_name(&f), "ccltune-profiler") == 0, "%s name %s", where, fn_name(&f));
  const uint64_t hash = 0x0123456789abcdefull;
  void* ctx = fn_init(&f, hash, 1, 4, 2, logger);
  int want_mask = ncclProfileColl | ncclProfileP2p | (abi >= 4 ? ncclProfileKernelCh : 0) |
                  (abi >= 6 ? ncclProfileCeColl : 0);
  CHECK(ctx != NULL && f.mask == want_mask, "%s init: ctx %p mask %d", where, ctx, f.mask);
  CHECK(fn_group(&f, ctx) == NULL, "%s: a group event gets no handle", where);
  double us[10];
  for (int i = 0; i < 10; i++) {
    us[i] = 10.0 * (i + 1) + (i == 9 ? 900 : 0); /* 10..90 us, one 1000 us outlier */
    void* task = fn_call(&f, ctx, 2, hash, 100 + (uint64_t)i, "AllReduce", 65536, 2, T0 + (uint64_t)i * 10000000,
                         (uint64_t)(us[i] * 1000), i % 2);
    CHECK(task != NULL, "%s call %d: no handle", where, i);
  }
  for (int i = 0; i < 3; i++) {
    void* t = fn_p2p(&f, ctx, 2, hash, "Send", 1048576, "ncclInt8", 3, 1);
    fn_stop(&f, t);
    void* k = fn_kch_start(&f, ctx, t, 5, T0 + 500000000);
    fn_kch_stop(&f, k, T0 + 500000000 + 7000);
  }
  fn_finalize(&f, ctx);
  char* text;
  int n = read_profiles(dir, &text, name, sizeof name);
  CHECK(n == 1 && text, "%s: %d profile files", where, n);
  if (!text) { fn_unload(&f); return; }
  char want[512];
  snprintf(want, sizeof want, ".0123456789abcdef.2.txt");
  CHECK(strstr(name, want) && strncmp(name, "ccltune-profile.", 16) == 0, "%s file name %s", where, name);
  CHECK(has_line(text, "# ccltune-profile 2"), "%s: version line", where);
  snprintf(want, sizeof want, " nranks %s nnodes %s abi %d every 1", abi >= 4 ? "4" : "-", abi >= 4 ? "1" : "-", abi);
  CHECK(strstr(text, want) && strstr(text, "comm 0123456789abcdef rank 2"), "%s header: want '%s' in\n%s", where, want, text);
  CHECK(has_line(text, "# columns kind op count datatype algo proto nchannels nwarps peer calls timed sum_us p10_us "
                       "p50_us p90_us max_us"), "%s: columns", where);
  CHECK(has_line(text, "# end") && text[strlen(text) - 1] == '\n', "%s: # end", where);
  stats s;
  int ok = entry(text, "coll AllReduce 65536 ncclBfloat16 RING LL 2 16 -", &s);
  CHECK(ok && s.calls == 10 && s.timed == 10, "%s coll entry: %d calls %llu timed %llu\n%s", where, ok, s.calls,
        s.timed, text);
  int p2p = entry(text, abi >= 4 ? "p2p Send 1048576 ncclInt8 - - 1 - 3" : "p2p Send 1048576 ncclInt8 - - - - 3", &s);
  CHECK(p2p && s.calls == 3 && s.timed == 3, "%s p2p entry %d: calls %llu timed %llu\n%s", where, p2p, s.calls, s.timed, text);
  if (abi >= 4) {
    CHECK(has_line(text, "# timing gpu-kernel-channels"), "%s timing line", where);
    CHECK(fabs(s.max - 7.0) < 1e-9 && fabs(s.sum - 21.0) < 1e-9, "%s p2p: sum %.3f max %.3f", where, s.sum, s.max);
    entry(text, "coll AllReduce 65536 ncclBfloat16 RING LL 2 16 -", &s);
    double sum = 0;
    for (int i = 0; i < 10; i++) sum += us[i];
    CHECK(fabs(s.sum - sum) < 1e-6 && fabs(s.max - 1000.0) < 1e-9, "%s: sum %.3f max %.3f", where, s.sum, s.max);
    check_close(s.p10, pct(us, 10, 10), "p10", where);
    check_close(s.p50, pct(us, 10, 50), "p50", where);
    check_close(s.p90, pct(us, 10, 90), "p90", where);
    CHECK(has_line(text, "call 100 0 -1 1732661234000000000 1732661234000010000"), "%s first call line:\n%s", where, text);
    CHECK(has_line(text, "call 109 0 -1 1732661234090000000 1732661234091000000"), "%s last call line", where);
    CHECK(has_line(text, "call 0 1 -1 1732661234500000000 1732661234500007000"), "%s p2p call line (own seq)", where);
    CHECK(count_prefix(text, "call ") == 13, "%s: %d call lines", where, count_prefix(text, "call "));
  } else {
    snprintf(want, sizeof want, "# timing host ABI v%d has no GPU timer", abi);
    CHECK(strstr(text, want) != NULL, "%s timing line:\n%s", where, text);
    CHECK(s.max >= 0 && s.sum >= s.max, "%s host times: sum %.3f max %.3f", where, s.sum, s.max);
    CHECK(count_prefix(text, "call 10") == 10, "%s: coll call lines by seqNumber", where);
  }
  CHECK(has_line(text, "# dropped entries 0 calls 0 arms 0"), "%s dropped line", where);
  free(text);
  fn_unload(&f);
}

/* CCLTUNE_PROFILE unset: mask 0, no context, no event gets a handle, no file. */
static void case_off(void) {
  char dir[2048];
  case_dir(dir, sizeof dir, "off");
  unsetenv("CCLTUNE_PROFILE");
  fake_nccl f;
  if (fn_load(&f, lib_path, 0) != 0) { CHECK(0, "load"); return; }
  CHECK(f.abi == 6, "newest struct first: got v%d", f.abi);
  f.mask = 12345;
  void* ctx = fn_init(&f, 1, 1, 2, 0, logger);
  CHECK(ctx == NULL && f.mask == 0, "off: ctx %p mask %d", ctx, f.mask);
  f.mask = ~0; /* even if NCCL sent events anyway */
  CHECK(fn_call(&f, ctx, 0, 1, 0, "AllReduce", 8, 2, T0, 1000, 1) == NULL, "off: a task got a handle");
  fn_finalize(&f, ctx);
  char* text;
  CHECK(read_profiles(dir, &text, NULL, 0) == 0, "off: a file was written");
  free(text);
  fn_unload(&f);
}

/* Bad values: one warning naming the variable and the default used; the job goes on. */
static void case_bad_env(void) {
  char dir[2048];
  case_dir(dir, sizeof dir, "badenv");
  setenv("CCLTUNE_PROFILE_EVERY", "abc", 1);
  setenv("CCLTUNE_PROFILE_CALLS", "-5", 1);
  fake_nccl f;
  if (fn_load(&f, lib_path, 5) != 0) { CHECK(0, "load"); return; }
  n_warn = 0;
  void* ctx = fn_init(&f, 7, 1, 2, 1, logger);
  CHECK(ctx && n_warn == 2, "bad env: ctx %p, %d warnings", ctx, n_warn);
  CHECK(strstr(last_warn, "CCLTUNE_PROFILE_CALLS='-5' is not an integer in 0..1048576; using 4096") != NULL,
        "warning text: %s", last_warn);
  fn_call(&f, ctx, 1, 7, 0, "AllGather", 4096, 1, T0, 5000, 0);
  fn_finalize(&f, ctx);
  char* text;
  read_profiles(dir, &text, NULL, 0);
  CHECK(text && strstr(text, " every 1\n") && count_prefix(text, "call ") == 1, "bad env defaults:\n%s", text ? text : "");
  free(text);
  unsetenv("CCLTUNE_PROFILE_EVERY");
  unsetenv("CCLTUNE_PROFILE_CALLS");
  setenv("CCLTUNE_PROFILE", "/proc/ccltune-no-such-dir", 1);
  n_warn = 0;
  f.mask = 99;
  ctx = fn_init(&f, 7, 1, 2, 1, logger);
  CHECK(!ctx && f.mask == 0 && n_warn == 1 && strstr(last_warn, "not a writable directory"),
        "unwritable folder: ctx %p mask %d warn %s", ctx, f.mask, last_warn);
  fn_unload(&f);
}

/* EVERY=3: calls 0, 3, 6, 9 of the communicator are timed; the others get no handle. */
static void case_sampling(void) {
  char dir[2048];
  case_dir(dir, sizeof dir, "every");
  setenv("CCLTUNE_PROFILE_EVERY", "3", 1);
  fake_nccl f;
  if (fn_load(&f, lib_path, 0) != 0) { CHECK(0, "load"); return; }
  void* ctx = fn_init(&f, 9, 1, 2, 0, logger);
  int handles = 0;
  for (int i = 0; i < 10; i++) handles += fn_call(&f, ctx, 0, 9, (uint64_t)i, "ReduceScatter", 1024, 1, T0 + (uint64_t)i * 1000000, 20000, 1) != NULL;
  fn_finalize(&f, ctx);
  unsetenv("CCLTUNE_PROFILE_EVERY");
  char* text;
  read_profiles(dir, &text, NULL, 0);
  stats s;
  CHECK(handles == 4, "sampling: %d handles", handles);
  CHECK(text && entry(text, "coll ReduceScatter 1024 ncclBfloat16 RING LL 1 16 -", &s) && s.calls == 10 &&
        s.timed == 4 && fabs(s.sum - 80.0) < 1e-9, "sampling entry:\n%s", text ? text : "");
  CHECK(text && strstr(text, " every 3\n") && has_line(text, "call 9 0 -1 1732661234009000000 1732661234009020000"),
        "sampling lines:\n%s", text ? text : "");
  free(text);
  fn_unload(&f);
}

/* 300 distinct keys into 256 entries; 10 timed calls into 4 call lines. */
static void case_overflow(void) {
  char dir[2048];
  case_dir(dir, sizeof dir, "overflow");
  setenv("CCLTUNE_PROFILE_CALLS", "4", 1);
  fake_nccl f;
  if (fn_load(&f, lib_path, 5) != 0) { CHECK(0, "load"); return; }
  void* ctx = fn_init(&f, 11, 1, 2, 0, logger);
  for (int i = 0; i < 300; i++) fn_call(&f, ctx, 0, 11, (uint64_t)i, "AllReduce", 1000 + (size_t)i, 1, T0, 1000, 1);
  for (int i = 0; i < 300; i++) fn_call(&f, ctx, 0, 11, (uint64_t)i, "AllReduce", 1000 + (size_t)i, 1, T0, 1000, 1);
  fn_finalize(&f, ctx);
  unsetenv("CCLTUNE_PROFILE_CALLS");
  char* text;
  read_profiles(dir, &text, NULL, 0);
  CHECK(text && count_prefix(text, "coll ") == 256, "overflow: %d entries", text ? count_prefix(text, "coll ") : -1);
  CHECK(text && count_prefix(text, "call ") == 4, "overflow: call lines");
  CHECK(text && has_line(text, "# dropped entries 44 calls 508 arms 0"), "overflow dropped line:\n%s",
        text ? strstr(text, "# dropped") : "");
  CHECK(text && has_line(text, "call 0 0 -1 1732661234000000000 1732661234000001000"), "first call line");
  /* the arm's sums count every call, the 88 whose key found no room among them (not timed) */
  CHECK(text && has_line(text, "arm -1 600 512 512.000 88"), "overflow arm sums:\n%s", text ? strstr(text, "# sums") : "");
  free(text);
  fn_unload(&f);
}

/* A task with 2 channels whose second channel never reports: recorded at finalize from the
 * channel that did. A stale stop after the call ended changes nothing. */
static void case_partial_and_stale(void) {
  char dir[2048];
  case_dir(dir, sizeof dir, "partial");
  fake_nccl f;
  if (fn_load(&f, lib_path, 5) != 0) { CHECK(0, "load"); return; }
  void* ctx = fn_init(&f, 13, 1, 2, 0, logger);
  void* t = fn_coll(&f, ctx, 0, 13, 1, "Broadcast", 64, "ncclFloat32", "RING", "SIMPLE", 2, 8);
  fn_stop(&f, t);
  void* k = fn_kch_start(&f, ctx, t, 0, T0);
  fn_kch_stop(&f, k, T0 + 3000);
  void* t2 = fn_call(&f, ctx, 0, 13, 2, "AllReduce", 8, 1, T0, 2000, 1);
  void* late = fn_kch_start(&f, ctx, t2, 3, T0 - 1000000); /* after the call ended: ignored */
  CHECK(late == NULL, "a channel of a finished call got a handle");
  fn_finalize(&f, ctx);
  char* text;
  read_profiles(dir, &text, NULL, 0);
  stats s;
  CHECK(text && entry(text, "coll Broadcast 64 ncclFloat32 RING SIMPLE 2 8 -", &s) && s.timed == 1 &&
        fabs(s.max - 3.0) < 1e-9, "partial call:\n%s", text ? text : "");
  CHECK(text && entry(text, "coll AllReduce 8 ncclBfloat16 RING LL 1 16 -", &s) && fabs(s.max - 2.0) < 1e-9,
        "stale channel changed the call:\n%s", text ? text : "");
  free(text);
  fn_unload(&f);
}

/* A TREE/SIMPLE AllReduce on 4 channels in the order NCCL 2.28.9 sends its events (src/enqueue.cc
 * adds one profiler proxy op per channel of the task; src/transport/profiler.cc's progress starts
 * every channel whose kernel start it sees in one pass, then stops them in later passes, each stop
 * as recordEventState(KernelChStop, pTimer) + stopEvent; src/plugin/profiler.cc:590-615), two calls
 * back to back as DDP issues them: both tasks start and stop (at enqueue) before any channel event,
 * channels report out of order, the earliest start is on channel 3 and the latest stop on channel 1,
 * and call B's channel starts arrive between call A's stops. Each call is first channel start to
 * last channel stop, closed only by its 4th stop. */
static void case_tree(void) {
  char dir[2048];
  case_dir(dir, sizeof dir, "tree");
  fake_nccl f;
  if (fn_load(&f, lib_path, 5) != 0) { CHECK(0, "load"); return; }
  void* ctx = fn_init(&f, 17, 1, 4, 3, logger);
  void* a = fn_coll(&f, ctx, 3, 17, 40, "AllReduce", 8391680, "ncclFloat32", "TREE", "SIMPLE", 4, 20);
  fn_stop(&f, a);
  void* b = fn_coll(&f, ctx, 3, 17, 41, "AllReduce", 8391680, "ncclFloat32", "TREE", "SIMPLE", 4, 20);
  fn_stop(&f, b);
  const uint64_t a_start[4] = {T0 + 1500, T0 + 1200, T0 + 1800, T0 + 1000};
  const uint64_t a_stop[4] = {T0 + 640000, T0 + 655000, T0 + 610000, T0 + 650000};
  void* ka[4], *kb[4];
  for (int c = 0; c < 4; c++) ka[c] = fn_kch_start(&f, ctx, a, c, a_start[c]);
  const int order[4] = {2, 0, 3, 1};
  for (int i = 0; i < 4; i++) {
    if (i == 2)
      for (int c = 0; c < 4; c++) kb[c] = fn_kch_start(&f, ctx, b, c, T0 + 700000 + (uint64_t)c * 100);
    fn_kch_stop(&f, ka[order[i]], a_stop[order[i]]);
  }
  for (int c = 0; c < 4; c++) fn_kch_stop(&f, kb[c], T0 + 1400000 + (uint64_t)c * 1000);
  void* stale = fn_kch_start(&f, ctx, a, 0, T0 + 5000000); /* after A ended: ignored, not A's */
  CHECK(stale == NULL, "tree: a channel start after the call ended got a handle");
  /* NCCL 2.28's COLLNET descriptors say nChannels 0 (enqueue.cc's collnet branch never sets it) while
   * its channels still report: counted, not timed, its channels' events ignored */
  void* cn = fn_coll(&f, ctx, 3, 17, 42, "AllReduce", 4096, "ncclFloat32", "COLLNET_DIRECT", "SIMPLE", 0, 16);
  fn_stop(&f, cn);
  for (int c = 0; c < 2; c++) fn_kch_stop(&f, fn_kch_start(&f, ctx, cn, c, T0 + 9000000), T0 + 9005000);
  fn_finalize(&f, ctx);
  char* text;
  read_profiles(dir, &text, NULL, 0);
  stats s;
  CHECK(text && entry(text, "coll AllReduce 8391680 ncclFloat32 TREE SIMPLE 4 20 -", &s) && s.calls == 2 &&
        s.timed == 2 && fabs(s.max - 703.0) < 1e-9 && fabs(s.sum - 654.0 - 703.0) < 1e-9,
        "tree entry (want 654 and 703 us):\n%s", text ? text : "");
  CHECK(text && has_line(text, "call 40 0 -1 1732661234000001000 1732661234000655000") &&
        has_line(text, "call 41 0 -1 1732661234000700000 1732661234001403000"), "tree call lines:\n%s", text ? text : "");
  CHECK(text && entry(text, "coll AllReduce 4096 ncclFloat32 COLLNET_DIRECT SIMPLE 0 16 -", &s) && s.calls == 1 &&
        s.timed == 0 && s.dashes, "collnet with nChannels 0:\n%s", text ? text : "");
  CHECK(text && count_prefix(text, "call ") == 2, "tree: call lines");
  CHECK(text && has_line(text, "# dropped entries 0 calls 0 arms 0"), "tree dropped line");
  free(text);
  fn_unload(&f);
}

/* ABI v6 copy-engine collectives: v6's init asks for CeColl events (v5's does not, and NCCL 2.28
 * sends none), each counted in an entry of algo CE with no time and no call line, its handle NULL
 * (so NCCL starts no CeSync or CeBatch under it); kernel collectives beside them are timed as before. */
static void case_ce(void) {
  char dir[2048];
  case_dir(dir, sizeof dir, "ce");
  fake_nccl f;
  if (fn_load(&f, lib_path, 5) != 0) { CHECK(0, "load v5"); return; }
  void* c5 = fn_init(&f, 19, 1, 4, 0, logger);
  CHECK(c5 && !(f.mask & (ncclProfileCeColl | ncclProfileCeSync | ncclProfileCeBatch)), "v5 mask %d", f.mask);
  fn_finalize(&f, c5);
  fn_unload(&f);
  case_dir(dir, sizeof dir, "ce");
  if (fn_load(&f, lib_path, 6) != 0) { CHECK(0, "load v6"); return; }
  void* ctx = fn_init(&f, 19, 1, 4, 0, logger);
  CHECK(ctx && (f.mask & ncclProfileCeColl) && !(f.mask & (ncclProfileCeSync | ncclProfileCeBatch)),
        "v6 mask %d", f.mask);
  int handles = 0;
  for (int i = 0; i < 3; i++) handles += fn_ce_coll(&f, ctx, 0, (uint64_t)i, "AllGather", 1048576, "ncclInt8") != NULL;
  handles += fn_ce_coll(&f, ctx, 0, 3, "AlltoAll", 4096, "ncclFloat32") != NULL;
  fn_call(&f, ctx, 0, 19, 7, "AllReduce", 1024, 2, T0, 9000, 1);
  fn_finalize(&f, ctx);
  char* text;
  read_profiles(dir, &text, NULL, 0);
  CHECK(handles == 0, "ce: %d CeColl events got a handle", handles);
  CHECK(text && has_line(text, "coll AllGather 1048576 ncclInt8 CE - - - - 3 0 - - - - -") &&
        has_line(text, "coll AlltoAll 4096 ncclFloat32 CE - - - - 1 0 - - - - -"), "ce entries:\n%s", text ? text : "");
  stats s;
  CHECK(text && entry(text, "coll AllReduce 1024 ncclBfloat16 RING LL 2 16 -", &s) && s.timed == 1 &&
        fabs(s.max - 9.0) < 1e-9 && count_prefix(text, "call ") == 1, "ce: the kernel collective:\n%s", text ? text : "");
  free(text);
  fn_unload(&f);
}

/* A relative CCLTUNE_PROFILE is the folder relative to where init ran, even if the job changes
 * directory before finalize. */
static void case_relative_dir(void) {
  char dir[2048], cwd[2048];
  case_dir(dir, sizeof dir, "relative");
  if (!getcwd(cwd, sizeof cwd) || chdir(out_root) != 0) { CHECK(0, "chdir"); return; }
  setenv("CCLTUNE_PROFILE", "relative", 1);
  fake_nccl f;
  if (fn_load(&f, lib_path, 5) != 0) { CHECK(0, "load"); return; }
  void* ctx = fn_init(&f, 21, 1, 2, 0, logger);
  fn_call(&f, ctx, 0, 21, 0, "AllReduce", 8, 1, T0, 1000, 1);
  CHECK(chdir("/") == 0, "chdir /");
  fn_finalize(&f, ctx);
  CHECK(chdir(cwd) == 0, "chdir back");
  char* text;
  CHECK(read_profiles(dir, &text, NULL, 0) == 1, "relative folder: no file in %s", dir);
  free(text);
  fn_unload(&f);
}

/* ---- threads: per communicator a user thread (tasks) and a proxy thread (channels) ---------- */
#define NCOMMS 6
#define NCALLS 400
typedef struct {
  fake_nccl* f;
  void* ctx;
  uint64_t hash;
  void* _Atomic queue[NCALLS];
} comm_run;

static void* user_thread(void* arg) {
  comm_run* r = arg;
  for (int i = 0; i < NCALLS; i++) {
    void* t = fn_coll(r->f, r->ctx, 0, r->hash, (uint64_t)i, "AllGather", 4096 << (i % 3), "ncclFloat32", "RING",
                      "LL128", 4, 16);
    atomic_store_explicit(&r->queue[i], t, memory_order_release); /* as NCCL posts the proxy op */
    fn_stop(r->f, t);
  }
  return NULL;
}

static void* proxy_thread(void* arg) {
  comm_run* r = arg;
  for (int i = 0; i < NCALLS; i++) {
    void* t;
    while (!(t = atomic_load_explicit(&r->queue[i], memory_order_acquire))) sched_yield();
    void* ch[4];
    for (int c = 0; c < 4; c++) ch[c] = fn_kch_start(r->f, r->ctx, t, c, T0 + (uint64_t)c);
    for (int c = 0; c < 4; c++) fn_kch_stop(r->f, ch[c], T0 + 1000 * (uint64_t)(i % 3 + 1));
  }
  return NULL;
}

static void case_threads(void) {
  char dir[2048];
  case_dir(dir, sizeof dir, "threads");
  static fake_nccl f;
  if (fn_load(&f, lib_path, 0) != 0) { CHECK(0, "load"); return; }
  static comm_run runs[NCOMMS];
  pthread_t th[2 * NCOMMS];
  for (int c = 0; c < NCOMMS; c++) {
    memset(&runs[c], 0, sizeof runs[c]);
    runs[c].f = &f;
    runs[c].hash = 0x1000 + (uint64_t)c;
    runs[c].ctx = fn_init(&f, runs[c].hash, 1, NCOMMS, c, logger);
  }
  for (int c = 0; c < NCOMMS; c++) {
    pthread_create(&th[2 * c], NULL, user_thread, &runs[c]);
    pthread_create(&th[2 * c + 1], NULL, proxy_thread, &runs[c]);
  }
  for (int i = 0; i < 2 * NCOMMS; i++) pthread_join(th[i], NULL);
  for (int c = 0; c < NCOMMS; c++) fn_finalize(&f, runs[c].ctx);
  DIR* d = opendir(dir);
  int files = 0;
  for (struct dirent* e; d && (e = readdir(d));) files += strncmp(e->d_name, "ccltune-profile.", 16) == 0;
  if (d) closedir(d);
  CHECK(files == NCOMMS, "threads: %d files", files);
  /* every file: three entries, each NCALLS/3-ish calls, all timed, exact sums */
  for (int c = 0; c < NCOMMS; c++) {
    char want[64], *text = NULL;
    snprintf(want, sizeof want, ".%016llx.%d.txt", (unsigned long long)runs[c].hash, c);
    CHECK(read_profiles_like(dir, want, &text, NULL, 0) == 1 && text, "comm %d file", c);
    if (!text) continue;
    for (int k = 0; k < 3; k++) {
      char prefix[128];
      stats s;
      snprintf(prefix, sizeof prefix, "coll AllGather %d ncclFloat32 RING LL128 4 16 -", 4096 << k);
      unsigned long long n = (unsigned long long)(NCALLS / 3 + (k < NCALLS % 3));
      CHECK(entry(text, prefix, &s) && s.calls == n && s.timed == n && fabs(s.sum - (double)n * (k + 1)) < 1e-6,
            "comm %d entry %d: calls %llu timed %llu sum %.3f\n%s", c, k, s.calls, s.timed, s.sum, text);
      check_close(s.p50, k + 1, "p50", "threads");
    }
    CHECK(count_prefix(text, "call ") == NCALLS, "comm %d call lines", c);
    free(text);
  }
  fn_unload(&f);
}

/* A communicator never finalized: its file is written at process exit. */
static void case_exit_writer(void) {
  char dir[2048];
  case_dir(dir, sizeof dir, "atexit");
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    fake_nccl f;
    if (fn_load(&f, lib_path, 4) != 0) _exit(3);
    void* ctx = fn_init(&f, 0xfeed, 1, 2, 1, logger);
    fn_call(&f, ctx, 1, 0xfeed, 5, "AllReduce", 16, 1, T0, 4000, 1);
    exit(0); /* no finalize */
  }
  int st = 0;
  waitpid(pid, &st, 0);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "exit writer child status %d", st);
  char* text;
  int n = read_profiles(dir, &text, NULL, 0);
  CHECK(n == 1 && text && has_line(text, "call 5 0 -1 1732661234000000000 1732661234000004000") && has_line(text, "# end"),
        "exit writer: %d files\n%s", n, text ? text : "");
  free(text);
}

/* ---- arms: the tuner's ccltuneArmShare_v1 (the stub tuner built beside the library) -------- */

/* The stub tuner beside the library under test; NULL with a failed check when absent. */
typedef void (*set_arm_fn)(uint64_t comm, int arm);
static void* stub_tuner(char* path, size_t n, set_arm_fn* set_arm) {
  const char* slash = strrchr(lib_path, '/');
  snprintf(path, n, "%.*s/libnccl-tuner-stub.so", slash ? (int)(slash - lib_path) : 1, slash ? lib_path : ".");
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL); /* as NCCL loads the tuner: after the profiler's init */
  *set_arm = lib ? (set_arm_fn)(uintptr_t)dlsym(lib, "stub_set_arm") : NULL;
  CHECK(lib && *set_arm, "stub tuner %s: %s", path, lib ? "no stub_set_arm" : dlerror());
  return *set_arm ? lib : NULL;
}

/* One call on one channel: its key (func, count, algo, nChannels) and its GPU start and duration. */
static void one_call(fake_nccl* f, void* ctx, uint64_t hash, uint64_t seq, const char* func, size_t count,
                     const char* algo, int nch, uint64_t start, uint64_t dur) {
  void* t = fn_coll(f, ctx, 0, hash, seq, func, count, "ncclBfloat16", algo, "SIMPLE", nch, 16);
  fn_stop(f, t);
  for (int c = 0; c < nch; c++) fn_kch_stop(f, fn_kch_start(f, ctx, t, c, start), start + dur);
}

static char* one_file(const char* dir, const char* comm_suffix) {
  char* text = NULL;
  int n = read_profiles_like(dir, comm_suffix, &text, NULL, 0);
  CHECK(n == 1 && text, "%s: %d files named *%s", dir, n, comm_suffix);
  return text;
}

/* Where the arm comes from: no tuner (-1, said why); the tuner by path, loaded after the first
 * communicator's init as NCCL loads it (that communicator finds it at its first collective; one
 * initialised later finds it at init and, never given arms, is on arm -1); each call tagged with the
 * arm in force at its start, on its call line and in its arm's sums (calls, timed, GPU sum, calls
 * whose key found no room); an arm outside the sums' range counted apart; the tuner by name
 * (libnccl-tuner-<name>.so, found by its soname); a tuner without the share. */
static void case_arms(void) {
  char dir[2048], stub[2200];
  case_dir(dir, sizeof dir, "arms");
  fake_nccl f;
  if (fn_load(&f, lib_path, 5) != 0) { CHECK(0, "load"); return; }
  unsetenv("NCCL_TUNER_PLUGIN");
  void* c0 = fn_init(&f, 0xa0, 1, 2, 0, logger);
  one_call(&f, c0, 0xa0, 0, "AllReduce", 64, "RING", 1, T0, 1000);
  fn_finalize(&f, c0);
  char* text = one_file(dir, ".00000000000000a0.0.txt");
  CHECK(text && has_line(text, "# arms none NCCL_TUNER_PLUGIN is unset") && has_line(text, "arm -1 1 1 1.000 0") &&
        has_line(text, "# sums arm calls timed sum_us no_entry") && has_line(text, "# calls seq entry arm start_ns end_ns") &&
        has_line(text, "call 0 0 -1 1732661234000000000 1732661234000001000"), "no tuner:\n%s", text ? text : "");
  free(text);

  case_dir(dir, sizeof dir, "arms");
  const char* slash = strrchr(lib_path, '/');
  snprintf(stub, sizeof stub, "%.*s/libnccl-tuner-stub.so", slash ? (int)(slash - lib_path) : 1, slash ? lib_path : ".");
  setenv("NCCL_TUNER_PLUGIN", stub, 1);
  void* c1 = fn_init(&f, 0xa1, 1, 2, 0, logger); /* before the tuner is loaded */
  set_arm_fn set_arm;
  void* tuner = stub_tuner(stub, sizeof stub, &set_arm);
  if (!tuner) { fn_finalize(&f, c1); fn_unload(&f); return; }
  void* c2 = fn_init(&f, 0xa2, 1, 2, 0, logger); /* after: found at init; never given arms */
  set_arm(0xa1, 0);
  one_call(&f, c1, 0xa1, 0, "AllReduce", 64, "RING", 1, T0, 1000);
  one_call(&f, c1, 0xa1, 1, "AllReduce", 64, "RING", 1, T0 + 10000, 1000);
  set_arm(0xa1, 2);
  for (int i = 0; i < 3; i++) one_call(&f, c1, 0xa1, 2 + (uint64_t)i, "AllReduce", 64, "TREE", 2, T0 + 20000 + 10000 * (uint64_t)i, 2000);
  set_arm(0xa1, 100); /* outside the sums' range: on its call line, counted apart */
  one_call(&f, c1, 0xa1, 5, "AllReduce", 64, "RING", 1, T0 + 50000, 500);
  set_arm(0xa1, 1); /* 300 new keys: 254 find room beside the 2 above, 46 do not */
  for (int i = 0; i < 300; i++) one_call(&f, c1, 0xa1, 6 + (uint64_t)i, "AllGather", 1000 + (size_t)i, "RING", 1, T0 + 100000, 3000);
  one_call(&f, c2, 0xa2, 0, "Broadcast", 8, "RING", 1, T0, 700);
  fn_finalize(&f, c1);
  fn_finalize(&f, c2);
  text = one_file(dir, ".00000000000000a1.0.txt");
  CHECK(text && has_line(text, "# arms tuner") && has_line(text, "arm 0 2 2 2.000 0") &&
        has_line(text, "arm 1 300 254 762.000 46") && has_line(text, "arm 2 3 3 6.000 0") &&
        count_prefix(text, "arm ") == 3 && has_line(text, "# dropped entries 46 calls 0 arms 1"),
        "arm sums:\n%s", text ? text : "");
  CHECK(text && has_line(text, "call 1 0 0 1732661234000010000 1732661234000011000") &&
        has_line(text, "call 4 1 2 1732661234000040000 1732661234000042000") &&
        has_line(text, "call 5 0 100 1732661234000050000 1732661234000050500") &&
        has_line(text, "call 6 2 1 1732661234000100000 1732661234000103000"), "arm call lines:\n%s", text ? text : "");
  free(text);
  text = one_file(dir, ".00000000000000a2.0.txt");
  CHECK(text && has_line(text, "# arms tuner") && has_line(text, "arm -1 1 1 0.700 0") &&
        has_line(text, "call 0 0 -1 1732661234000000000 1732661234000000700"), "comm without arms:\n%s", text ? text : "");
  free(text);

  case_dir(dir, sizeof dir, "arms");
  setenv("NCCL_TUNER_PLUGIN", "stub", 1); /* a name: NCCL's libnccl-tuner-stub.so */
  set_arm(0xa3, 3);
  void* c3 = fn_init(&f, 0xa3, 1, 2, 0, logger);
  one_call(&f, c3, 0xa3, 0, "AllReduce", 64, "RING", 1, T0, 1000);
  fn_finalize(&f, c3);
  text = one_file(dir, ".00000000000000a3.0.txt");
  CHECK(text && has_line(text, "# arms tuner") && has_line(text, "arm 3 1 1 1.000 0"), "tuner by name:\n%s", text ? text : "");
  free(text);

  case_dir(dir, sizeof dir, "arms");
  setenv("NCCL_TUNER_PLUGIN", lib_path, 1); /* loaded, but no share: not ccltune's tuner */
  void* c4 = fn_init(&f, 0xa4, 1, 2, 0, logger);
  one_call(&f, c4, 0xa4, 0, "AllReduce", 64, "RING", 1, T0, 1000);
  fn_finalize(&f, c4);
  text = one_file(dir, ".00000000000000a4.0.txt");
  CHECK(text && strstr(text, "exports no ccltuneArmShare_v1\n") && has_line(text, "arm -1 1 1 1.000 0"),
        "tuner without the share:\n%s", text ? text : "");
  free(text);
  unsetenv("NCCL_TUNER_PLUGIN");
  dlclose(tuner);
  fn_unload(&f);
}

/* A job of known GPU step periods under in-run arms, for ccltune.ab.gpu_period's tests (the file
 * is tests/fixtures/workload/profile-arms/; tests/plugin/test_profiler_harness.py checks it is
 * this case's output). A step is 4 calls: AllReduce 1 MiB, ReduceScatter, AllReduce, AllGather, at
 * 0, 1, 2, 3 ms into the step; arm 2 runs the AllReduces as TREE on 2 channels (another key, the
 * same call). Blocks of 3 steps switch arms at a step's first call, in this order (2 blocks of warm-up
 * on arm 0, the warm-up round, 3 rounds); a step of arm 0 lasts 10 ms, of arm 1 9.8 ms, of arm 2
 * 10.3 ms; a call's own GPU time is 100, 120 and 90 us by arm. */
static void case_arms_steps(void) {
  static const int order[] = {0, 0, 0, 1, 2, 2, 0, 1, 1, 2, 0, 0, 2, 1};
  static const uint64_t step_ns[] = {10000000, 9800000, 10300000}, own_ns[] = {100000, 120000, 90000};
  char dir[2048], stub[2200];
  case_dir(dir, sizeof dir, "arms_steps");
  fake_nccl f;
  if (fn_load(&f, lib_path, 5) != 0) { CHECK(0, "load"); return; }
  set_arm_fn set_arm;
  void* tuner = stub_tuner(stub, sizeof stub, &set_arm);
  if (!tuner) { fn_unload(&f); return; }
  setenv("NCCL_TUNER_PLUGIN", stub, 1);
  const uint64_t hash = 0xab;
  void* ctx = fn_init(&f, hash, 1, 4, 0, logger);
  uint64_t t = T0, seq = 0;
  for (int b = 0; b < (int)(sizeof order / sizeof order[0]); b++) {
    int arm = order[b];
    set_arm(hash, arm);
    for (int s = 0; s < 3; s++, t += step_ns[arm]) {
      one_call(&f, ctx, hash, seq++, "AllReduce", 262144, arm == 2 ? "TREE" : "RING", arm == 2 ? 2 : 1, t, own_ns[arm]);
      one_call(&f, ctx, hash, seq++, "ReduceScatter", 65536, "RING", 1, t + 1000000, own_ns[arm]);
      one_call(&f, ctx, hash, seq++, "AllReduce", 262144, arm == 2 ? "TREE" : "RING", arm == 2 ? 2 : 1, t + 2000000,
               own_ns[arm]);
      one_call(&f, ctx, hash, seq++, "AllGather", 4096, "RING", 1, t + 3000000, own_ns[arm]);
    }
  }
  fn_finalize(&f, ctx);
  unsetenv("NCCL_TUNER_PLUGIN");
  char* text = one_file(dir, ".00000000000000ab.0.txt");
  CHECK(text && has_line(text, "arm 0 72 72 7200.000 0") && has_line(text, "arm 1 48 48 5760.000 0") &&
        has_line(text, "arm 2 48 48 4320.000 0") && count_prefix(text, "call ") == 168, "arms_steps:\n%s", text ? text : "");
  free(text);
  dlclose(tuner);
  fn_unload(&f);
}

/* Each case prints its "-- name" line after it ran (tests/plugin/test_profiler_harness.py looks for them). */
#define VERSION_TEST(v) \
  static void test_v##v(void) { case_version(v); printf("-- ncclProfiler_v%d\n", v); }
VERSION_TEST(1)
VERSION_TEST(2)
VERSION_TEST(3)
VERSION_TEST(4)
VERSION_TEST(5)
VERSION_TEST(6)
static void test_off(void) { case_off(); printf("-- profiling off\n"); }
static void test_bad_env(void) { case_bad_env(); printf("-- bad environment values\n"); }
static void test_sampling(void) { case_sampling(); printf("-- sampling\n"); }
static void test_overflow(void) { case_overflow(); printf("-- table overflow\n"); }
static void test_partial_and_stale(void) { case_partial_and_stale(); printf("-- partial and stale events\n"); }
static void test_tree(void) { case_tree(); printf("-- TREE call, channels out of order\n"); }
static void test_ce(void) { case_ce(); printf("-- v6 copy-engine collectives\n"); }
static void test_relative_dir(void) { case_relative_dir(); printf("-- relative folder\n"); }
static void test_threads(void) { case_threads(); printf("-- %d communicators, user and proxy threads\n", NCOMMS); }
static void test_exit_writer(void) { case_exit_writer(); printf("-- exit writer\n"); }
static void test_arms(void) { case_arms(); printf("-- arms from the tuner's share\n"); }
static void test_arms_steps(void) { case_arms_steps(); printf("-- arms, steps of known GPU period\n"); }

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s LIB OUTDIR [TEST...]\n", argv[0]);
    return 2;
  }
  lib_path = argv[1];
  snprintf(out_root, sizeof out_root, "%s", argv[2]);
  unsetenv("CCLTUNE_PROFILE_EVERY");
  unsetenv("CCLTUNE_PROFILE_CALLS");
  unsetenv("NCCL_TUNER_PLUGIN"); /* the job's tuner is not the harness's: each case sets its own */
  static const check_test TESTS[] = {
      {"v1", test_v1},           {"v2", test_v2},
      {"v3", test_v3},           {"v4", test_v4},
      {"v5", test_v5},           {"v6", test_v6},
      {"off", test_off},         {"bad_env", test_bad_env},
      {"sampling", test_sampling}, {"overflow", test_overflow},
      {"partial_and_stale", test_partial_and_stale}, {"tree", test_tree}, {"ce", test_ce}, {"relative_dir", test_relative_dir},
      {"threads", test_threads}, {"exit_writer", test_exit_writer},
      {"arms", test_arms},       {"arms_steps", test_arms_steps},
  };
  return check_main(TESTS, CHECK_COUNT(TESTS), argc - 3, argv + 3);
}
