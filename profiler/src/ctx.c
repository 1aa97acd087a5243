/* A communicator context's whole life, in one place: opened at NCCL's profiler init (the
 * environment read, the tables allocated, the arm share looked up, the context registered for
 * the hot path and put on the live list), closed at finalize (unregistered, pending calls
 * flushed, the file written, the arm share released, freed), and, for contexts never finalized,
 * written at process exit. Not on the hot path: this file may lock and allocate. */
#include "prof.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static cclp_ctx* live; /* contexts not finalized yet, for the exit writer */

/* The folder as the context keeps it: relative to the directory at init (the job may change
 * directory before the file is written). */
static void set_dir(cclp_ctx* ctx, const char* dir) {
  if (dir[0] != '/' && getcwd(ctx->dir, sizeof ctx->dir - strlen(dir) - 2)) {
    strcat(ctx->dir, "/");
    strcat(ctx->dir, dir);
  } else {
    strcpy(ctx->dir, dir);
  }
}

cclp_ctx* cclp_ctx_open(int abi, int has_comm, uint64_t comm_hash, int rank, int nranks, int nnodes,
                        ncclDebugLogger_t logger, int* mask) {
  cclp_config cfg;
  *mask = 0; /* off, or no usable folder: NCCL then starts no event at all */
  if (!cclp_read_config(&cfg, logger)) return NULL;
  if (strlen(cfg.dir) >= sizeof(((cclp_ctx*)0)->dir) - 256) {
    cclp_log(logger, NCCL_LOG_WARN, "ccltune profiler: CCLTUNE_PROFILE is too long (%zu bytes); not profiling",
             strlen(cfg.dir));
    return NULL;
  }
  if ((mkdir(cfg.dir, 0777) != 0 && errno != EEXIST) || access(cfg.dir, W_OK | X_OK) != 0) {
    cclp_log(logger, NCCL_LOG_WARN, "ccltune profiler: CCLTUNE_PROFILE=%s is not a writable directory (%s); "
             "not profiling", cfg.dir, strerror(errno));
    return NULL;
  }
  *mask = -1;
  cclp_ctx* ctx = calloc(1, sizeof *ctx);
  if (ctx && cfg.calls) ctx->lines = calloc(cfg.calls, sizeof *ctx->lines);
  if (!ctx || (cfg.calls && !ctx->lines)) {
    if (ctx) free(ctx);
    cclp_log(logger, NCCL_LOG_WARN, "ccltune profiler: out of memory for this communicator's tables; not profiling it");
    return NULL;
  }
  ctx->abi = abi;
  ctx->gpu_timing = abi >= 4;
  ctx->has_comm = has_comm ? 2 : 0;
  ctx->comm_hash = comm_hash;
  ctx->rank = rank;
  ctx->nranks = nranks;
  ctx->nnodes = nnodes;
  ctx->every = cfg.every;
  ctx->calls_cap = cfg.calls;
  ctx->logger = logger;
  set_dir(ctx, cfg.dir);
  if (gethostname(ctx->host, sizeof ctx->host - 1) != 0 || !ctx->host[0]) strcpy(ctx->host, "unknown");
  for (char* c = ctx->host; *c; c++)
    if (*c == ' ' || *c == '/') *c = '_';
  /* the communicators after the first find the tuner here; the first one's init runs before NCCL
   * loads the tuner (NCCL 2.28 src/init.cc, initTransportsRank: ncclProfilerPluginInit, then
   * ncclTunerPluginLoad), so its first collective looks again (record.c, arm_now) */
  if (cclp_share_find(&ctx->share) != CCLP_SHARE_NOT_LOADED) atomic_store(&ctx->share_state, 2);
  if (cclp_register(ctx) != 0) {
    cclp_log(logger, NCCL_LOG_WARN, "ccltune profiler: more than %d communicators in this process; not profiling "
             "this one", CCLP_MAX_COMMS);
    cclp_share_release(&ctx->share);
    free(ctx->lines);
    free(ctx);
    return NULL;
  }
  pthread_mutex_lock(&live_lock);
  ctx->next = live;
  live = ctx;
  pthread_mutex_unlock(&live_lock);
  *mask = ncclProfileColl | ncclProfileP2p | (ctx->gpu_timing ? ncclProfileKernelCh : 0) |
          (abi >= 6 ? ncclProfileCeColl : 0);
  cclp_log(logger, NCCL_LOG_INFO, "ccltune profiler: ABI v%d, %s timing, every %llu call(s), into %s", abi,
           ctx->gpu_timing ? "GPU kernel-channel" : "host", (unsigned long long)cfg.every, cfg.dir);
  return ctx;
}

int cclp_close(cclp_ctx* ctx) {
  pthread_mutex_lock(&live_lock);
  for (cclp_ctx** p = &live; *p; p = &(*p)->next)
    if (*p == ctx) { *p = ctx->next; break; }
  pthread_mutex_unlock(&live_lock);
  cclp_unregister(ctx); /* NCCL sends nothing after finalize; a stray handle now decodes to nothing */
  cclp_flush_pending(ctx);
  const char* why = "";
  int rc = cclp_write_file(ctx, &why);
  if (rc < 0) cclp_log(ctx->logger, NCCL_LOG_WARN, "ccltune profiler: cannot write the profile into %s: %s", ctx->dir, why);
  else if (rc > 0) cclp_log(ctx->logger, NCCL_LOG_INFO, "ccltune profiler: no file: %s", why);
  uint64_t lost = atomic_load(&ctx->lost_calls);
  if (lost) /* sampled calls whose kernel-channel times never came: in calls, not in timed */
    cclp_log(ctx->logger, NCCL_LOG_INFO, "ccltune profiler: %llu sampled call(s) of comm %016llx had no complete GPU "
             "times and are counted but not timed", (unsigned long long)lost, (unsigned long long)ctx->comm_hash);
  if (atomic_load(&ctx->share_state) == 2) cclp_share_release(&ctx->share);
  free(ctx->lines);
  free(ctx);
  return rc < 0 ? -1 : 0;
}

/* Communicators never finalized (common: a job exits without destroying its process group).
 * A destructor, not atexit: it runs at exit and also if the library is unloaded first (NCCL
 * dlcloses the plugin when its last communicator is finalized; an atexit handler left behind
 * in unmapped code would crash the exit). NCCL's logger may be gone by now, so failures go to
 * stderr. The contexts stay allocated: a proxy thread may still be delivering events. */
__attribute__((destructor)) static void write_at_exit(void) {
  pthread_mutex_lock(&live_lock);
  for (cclp_ctx* c = live; c; c = c->next) {
    cclp_flush_pending(c);
    const char* why = "";
    if (cclp_write_file(c, &why) < 0) fprintf(stderr, "ccltune profiler: cannot write the profile into %s: %s\n", c->dir, why);
  }
  pthread_mutex_unlock(&live_lock);
}
