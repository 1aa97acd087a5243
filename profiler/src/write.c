/* The profile file's text (format: docs/profiler.md, "ccltune-profile 2"), written whole into a
 * temporary file in the same folder and renamed; when is ctx.c's business (finalize, or process
 * exit for communicators never finalized). Reads the context, changes nothing in it. Not on the
 * hot path: this file allocates. */
#include "prof.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
  fprintf(f, "# ccltune-profile 2\n# host %s pid %ld comm %016llx rank", ctx->host, (long)getpid(),
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
  int share = atomic_load_explicit(&ctx->share_state, memory_order_acquire);
  if (share == 2 && ctx->share.arm_of) fputs("# arms tuner\n", f);
  else fprintf(f, "# arms none %s\n", share == 2 ? ctx->share.why : "(no collective ran to look the tuner up)");
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

  fputs("# sums arm calls timed sum_us no_entry\n", f);
  for (int a = 0; a < CCLP_ARMS; a++) {
    cclp_arm_sum* s = &ctx->arms[a];
    uint64_t calls = atomic_load(&s->calls);
    if (!calls) continue;
    fprintf(f, "arm %d %llu %llu", a - 1, (unsigned long long)calls, (unsigned long long)atomic_load(&s->timed));
    put_us(f, (double)atomic_load(&s->sum_ns));
    fprintf(f, " %llu\n", (unsigned long long)atomic_load(&s->no_entry));
  }

  fputs("# calls seq entry arm start_ns end_ns\n", f);
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
    fprintf(f, "call %llu %d %d %llu %llu\n", (unsigned long long)lines[i].seq, file_index[lines[i].entry],
            lines[i].arm, (unsigned long long)lines[i].start_ns, (unsigned long long)lines[i].end_ns);
  free(lines);
  fprintf(f, "# dropped entries %llu calls %llu arms %llu\n# end\n",
          (unsigned long long)atomic_load(&ctx->dropped_entries),
          (unsigned long long)(atomic_load(&ctx->dropped_lines) + unready),
          (unsigned long long)atomic_load(&ctx->arm_outside));
}

int cclp_write_file(cclp_ctx* ctx, const char** why) {
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
