/* The profile file (format: docs/profiler.md, "ccltune-profile 1"), written whole into a
 * temporary file in the same folder and renamed, at finalize or, for communicators never
 * finalized, at process exit. Not on the hot path: this file may lock and allocate. */
#include "prof.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static cclp_ctx* live;
void cclp_live_add(cclp_ctx* ctx) {
  pthread_mutex_lock(&live_lock);
  ctx->next = live;
  live = ctx;
  pthread_mutex_unlock(&live_lock);
}

static void put_int(FILE* f, int v) {
  if (v < 0) fputs(" -", f);
  else fprintf(f, " %d", v);
}

static void put_us(FILE* f, double ns) { fprintf(f, " %.3f", ns / 1000.0); }

static int by_order(const void* a, const void* b) {
  unsigned x = (*(cclp_entry* const*)a)->order, y = (*(cclp_entry* const*)b)->order;
  return (x > y) - (x < y);
}

static int by_ticket(const void* a, const void* b) {
  uint64_t x = ((const cclp_line*)a)->ticket, y = ((const cclp_line*)b)->ticket;
  return (x > y) - (x < y);
}

static void write_body(FILE* f, cclp_ctx* ctx, int has_comm) {
  fprintf(f, "# ccltune-profile 1\n# host %s pid %ld comm %016llx rank", ctx->host, (long)getpid(),
          (unsigned long long)(has_comm ? ctx->comm_hash : 0));
  put_int(f, has_comm ? ctx->rank : -1);
  fputs(" nranks", f);
  put_int(f, ctx->nranks);
  fputs(" nnodes", f);
  put_int(f, ctx->nnodes);
  fprintf(f, " abi %d every %llu\n", ctx->abi, (unsigned long long)ctx->every);
  if (ctx->gpu_timing) fputs("# timing gpu-kernel-channels\n", f);
  else
    fprintf(f, "# timing host ABI v%d has no GPU timer: host clock from the task's start to its stop, "
               "which NCCL calls once the operation is enqueued, not when it has run\n", ctx->abi);
  fputs("# columns kind op count datatype algo proto nchannels nwarps peer calls timed sum_us p10_us p50_us "
        "p90_us max_us\n", f);

  cclp_entry* order[CCLP_ENTRIES];
  int file_index[CCLP_ENTRIES], n = 0;
  for (int i = 0; i < CCLP_ENTRIES; i++)
    if (atomic_load_explicit(&ctx->entries[i].state, memory_order_acquire) == 2) order[n++] = &ctx->entries[i];
  qsort(order, (size_t)n, sizeof order[0], by_order);
  for (int i = 0; i < n; i++) {
    cclp_entry* e = order[i];
    file_index[e - ctx->entries] = i;
    uint64_t calls = atomic_load(&e->calls), timed = atomic_load(&e->timed), max = atomic_load(&e->max_ns);
    fprintf(f, "%s %s %llu %s %s %s", e->kind == CCLP_P2P ? "p2p" : "coll", e->op, (unsigned long long)e->count,
            e->dtype, e->algo, e->proto);
    put_int(f, e->nchannels);
    put_int(f, e->nwarps);
    put_int(f, e->peer);
    fprintf(f, " %llu %llu", (unsigned long long)calls, (unsigned long long)timed);
    if (!timed) {
      fputs(" - - - - -\n", f);
      continue;
    }
    uint32_t hist[CCLP_HIST_BUCKETS];
    uint64_t counted = 0;
    for (int b = 0; b < CCLP_HIST_BUCKETS; b++) counted += hist[b] = atomic_load(&e->hist[b]);
    put_us(f, (double)atomic_load(&e->sum_ns));
    put_us(f, cclp_hist_percentile(hist, counted, 10, max));
    put_us(f, cclp_hist_percentile(hist, counted, 50, max));
    put_us(f, cclp_hist_percentile(hist, counted, 90, max));
    put_us(f, (double)max);
    fputc('\n', f);
  }

  fputs("# calls seq entry start_ns end_ns\n", f);
  uint64_t nlines = atomic_load(&ctx->nlines);
  if (nlines > ctx->calls_cap) nlines = ctx->calls_cap;
  cclp_line* lines = nlines ? malloc(nlines * sizeof *lines) : NULL;
  uint64_t kept = 0, unready = 0;
  for (uint64_t i = 0; i < nlines && lines; i++) {
    if (!atomic_load_explicit(&ctx->lines[i].ready, memory_order_acquire)) { unready++; continue; }
    lines[kept++] = ctx->lines[i];
  }
  if (nlines && !lines) unready = nlines; /* out of memory: the lines are counted as dropped */
  if (lines) qsort(lines, kept, sizeof *lines, by_ticket);
  for (uint64_t i = 0; i < kept; i++)
    fprintf(f, "call %llu %d %llu %llu\n", (unsigned long long)lines[i].seq, file_index[lines[i].entry],
            (unsigned long long)lines[i].start_ns, (unsigned long long)lines[i].end_ns);
  free(lines);
  fprintf(f, "# dropped entries %llu calls %llu\n# end\n", (unsigned long long)atomic_load(&ctx->dropped_entries),
          (unsigned long long)(atomic_load(&ctx->dropped_lines) + unready));
}

/* Writes ctx's file. Returns 0, or -1 with the reason in why. */
static int write_file(cclp_ctx* ctx, const char** why) {
  int has_comm = __atomic_load_n(&ctx->has_comm, __ATOMIC_ACQUIRE) == 2;
  if (!has_comm && atomic_load(&ctx->ncalls) == 0) {
    *why = "no collective seen, so its communicator is unknown (ABI before v4)";
    return 1;
  }
  char name[512], path[sizeof ctx->dir + sizeof name + 2], tmp[sizeof path + 8], rank[16] = "-";
  if (has_comm) snprintf(rank, sizeof rank, "%d", ctx->rank);
  snprintf(name, sizeof name, "ccltune-profile.%s.%ld.%016llx.%s.txt", ctx->host, (long)getpid(),
           (unsigned long long)(has_comm ? ctx->comm_hash : 0), rank);
  snprintf(path, sizeof path, "%s/%s", ctx->dir, name);
  snprintf(tmp, sizeof tmp, "%s/.%s.XXXXXX", ctx->dir, name);
  int fd = mkstemp(tmp);
  if (fd < 0) { *why = strerror(errno); return -1; }
  FILE* f = fdopen(fd, "w");
  if (!f) { *why = strerror(errno); close(fd); unlink(tmp); return -1; }
  write_body(f, ctx, has_comm);
  int bad = ferror(f) || fflush(f) != 0 || fsync(fd) != 0;
  int err = errno;
  if (fclose(f) != 0 && !bad) { bad = 1; err = errno; }
  if (!bad && rename(tmp, path) != 0) { bad = 1; err = errno; }
  if (bad) { unlink(tmp); *why = strerror(err); return -1; }
  return 0;
}

int cclp_close(cclp_ctx* ctx) {
  pthread_mutex_lock(&live_lock);
  for (cclp_ctx** p = &live; *p; p = &(*p)->next)
    if (*p == ctx) { *p = ctx->next; break; }
  pthread_mutex_unlock(&live_lock);
  cclp_ctx_forget(ctx); /* NCCL sends nothing after finalize; a stray handle now decodes to nothing */
  cclp_flush_pending(ctx);
  const char* why = "";
  int rc = write_file(ctx, &why);
  if (rc < 0) cclp_log(ctx->logger, NCCL_LOG_WARN, "ccltune profiler: cannot write the profile into %s: %s", ctx->dir, why);
  else if (rc > 0) cclp_log(ctx->logger, NCCL_LOG_INFO, "ccltune profiler: no file: %s", why);
  uint64_t lost = atomic_load(&ctx->lost_calls);
  if (lost) /* sampled calls whose kernel-channel times never came: in calls, not in timed */
    cclp_log(ctx->logger, NCCL_LOG_INFO, "ccltune profiler: %llu sampled call(s) of comm %016llx had no complete GPU "
             "times and are counted but not timed", (unsigned long long)lost, (unsigned long long)ctx->comm_hash);
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
    if (write_file(c, &why) < 0) fprintf(stderr, "ccltune profiler: cannot write the profile into %s: %s\n", c->dir, why);
  }
  pthread_mutex_unlock(&live_lock);
}
