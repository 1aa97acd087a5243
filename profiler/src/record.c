/* The hot path (see prof.h): startEvent/recordEventState/stopEvent land here. No lock and
 * no allocation: atomics on tables allocated with the communicator's context at init.
 *
 * A timed call's lifetime: the coll/p2p start claims slot t % CCLP_SLOTS and sets
 * `remaining` to 1 (the task's own stop) plus, with GPU timing, the task's nChannels (one
 * KernelCh stop per channel: NCCL adds one profiler proxy op per channel the task runs on,
 * src/enqueue.cc). NCCL stops the task once it is enqueued, usually before the proxy thread
 * has seen any channel start, so the task's stop alone cannot end the call. Whichever stop
 * brings `remaining` to zero records the call: GPU time = latest channel stop - earliest
 * channel start. A call whose channel events never all arrive is recorded from what did
 * arrive when its slot is needed again or at finalize (cclp_flush_pending).
 *
 * Every call is tagged at its start with the arm in force (the tuner's share, arm_now): the arm's
 * sums count it, and a timed call carries the arm to its sums and its call line. */
#include "prof.h"

#include <string.h>

#define TICKET_BITS 40
#define TICKET_MASK ((1ull << TICKET_BITS) - 1)
#define KERNEL_FLAG (1ull << 47)
#define CHANNEL_SHIFT 40
#define MAX_CHANNEL 127
#define DROP_SET 1024 /* distinct dropped keys remembered, to count each once */

static cclp_ctx* _Atomic g_ctx[CCLP_MAX_COMMS];
static _Atomic unsigned g_next;
static _Atomic uint64_t g_dropped_keys[DROP_SET];

static cclp_ctx* ctx_of(unsigned index) {
  return index < CCLP_MAX_COMMS ? atomic_load_explicit(&g_ctx[index], memory_order_acquire) : NULL;
}

int cclp_register(cclp_ctx* ctx) {
  ctx->index = atomic_fetch_add(&g_next, 1);
  if (ctx->index >= CCLP_MAX_COMMS) return -1;
  atomic_store_explicit(&g_ctx[ctx->index], ctx, memory_order_release);
  return 0;
}

void cclp_unregister(cclp_ctx* ctx) { atomic_store_explicit(&g_ctx[ctx->index], NULL, memory_order_release); }

static void* encode(unsigned index, uint64_t ticket, int kernel, int channel) {
  uint64_t h = (uint64_t)(index + 1) << 48 | (ticket & TICKET_MASK);
  if (kernel) h |= KERNEL_FLAG | (uint64_t)channel << CHANNEL_SHIFT;
  return (void*)(uintptr_t)h;
}

/* The context and slot a handle names, or NULL when the call is over (stale handle). */
static cclp_slot* decode(void* handle, cclp_ctx** ctx, uint64_t* ticket, int* kernel) {
  uint64_t h = (uint64_t)(uintptr_t)handle;
  if (h >> 48 == 0) return NULL;
  *ctx = ctx_of((unsigned)(h >> 48) - 1);
  if (!*ctx) return NULL;
  *ticket = h & TICKET_MASK;
  *kernel = (h & KERNEL_FLAG) != 0;
  cclp_slot* s = &(*ctx)->slots[*ticket % CCLP_SLOTS];
  if (atomic_load_explicit(&s->owner, memory_order_acquire) != *ticket + 1) return NULL;
  return s;
}

/* ---- entries ------------------------------------------------------------------------------ */

/* NCCL's name as the file writes it: at most 31 characters, blanks as '_'. */
static char name_char(char c) { return (c == ' ' || c == '\t' || c == '\n' || c == '\r') ? '_' : c; }

static uint64_t mix(uint64_t h, uint64_t v) { return (h ^ v) * 0x100000001b3ull; }

static uint64_t hash_name(uint64_t h, const char* s) {
  if (!s) return mix(h, '-');
  for (int i = 0; i < CCLP_NAME_LEN - 1 && s[i]; i++) h = mix(h, (unsigned char)name_char(s[i]));
  return mix(h, 0);
}

static int same_name(const char* stored, const char* s) {
  if (!s) return stored[0] == '-' && stored[1] == 0;
  int i = 0;
  for (; i < CCLP_NAME_LEN - 1 && s[i]; i++)
    if (stored[i] != name_char(s[i])) return 0;
  return stored[i] == 0;
}

static void copy_name(char* dst, const char* s) {
  if (!s) s = "-";
  int i = 0;
  for (; i < CCLP_NAME_LEN - 1 && s[i]; i++) dst[i] = name_char(s[i]);
  dst[i] = 0;
  if (i == 0) strcpy(dst, "-");
}

static uint64_t key_hash(const cclp_event* ev) {
  uint64_t h = mix(0xcbf29ce484222325ull, (uint64_t)ev->type);
  h = hash_name(hash_name(hash_name(hash_name(h, ev->func), ev->dtype), ev->algo), ev->proto);
  h = mix(mix(mix(mix(h, ev->count), (uint64_t)ev->nchannels), (uint64_t)ev->nwarps), (uint64_t)ev->peer);
  return h ? h : 1;
}

static int same_key(const cclp_entry* e, uint64_t h, const cclp_event* ev) {
  return e->hash == h && e->kind == ev->type && e->count == ev->count && e->nchannels == ev->nchannels &&
         e->nwarps == ev->nwarps && e->peer == ev->peer && same_name(e->op, ev->func) &&
         same_name(e->dtype, ev->dtype) && same_name(e->algo, ev->algo) && same_name(e->proto, ev->proto);
}

static void count_dropped_key(cclp_ctx* ctx, uint64_t h) {
  for (int i = 0; i < DROP_SET; i++) {
    _Atomic uint64_t* s = &g_dropped_keys[(h + (uint64_t)i) % DROP_SET];
    uint64_t want = (h ^ (uint64_t)ctx->index << 52) | 1, cur = 0;
    if (atomic_compare_exchange_strong(s, &cur, want)) {
      atomic_fetch_add_explicit(&ctx->dropped_entries, 1, memory_order_relaxed);
      return;
    }
    if (cur == want) return; /* counted already */
  }
}

/* The entry of ev's key, claimed on first use; -1 when the table is full. */
static int find_entry(cclp_ctx* ctx, const cclp_event* ev) {
  uint64_t h = key_hash(ev);
  for (int i = 0; i < CCLP_ENTRIES; i++) {
    int idx = (int)((h + (uint64_t)i) & (CCLP_ENTRIES - 1));
    cclp_entry* e = &ctx->entries[idx];
    int st = atomic_load_explicit(&e->state, memory_order_acquire);
    if (st == 0) {
      int zero = 0;
      if (atomic_compare_exchange_strong_explicit(&e->state, &zero, 1, memory_order_acquire,
                                                  memory_order_acquire)) {
        e->hash = h;
        e->kind = (char)ev->type;
        copy_name(e->op, ev->func);
        copy_name(e->dtype, ev->dtype);
        copy_name(e->algo, ev->algo);
        copy_name(e->proto, ev->proto);
        e->count = ev->count;
        e->nchannels = ev->nchannels;
        e->nwarps = ev->nwarps;
        e->peer = ev->peer;
        e->order = atomic_fetch_add_explicit(&ctx->nentries, 1, memory_order_relaxed);
        atomic_store_explicit(&e->state, 2, memory_order_release);
        return idx;
      }
      st = zero;
    }
    while (st == 1) st = atomic_load_explicit(&e->state, memory_order_acquire); /* a few stores away */
    if (same_key(e, h, ev)) return idx;
  }
  count_dropped_key(ctx, h);
  return -1;
}

static void atomic_max_u64(_Atomic uint64_t* a, uint64_t v) {
  uint64_t cur = atomic_load_explicit(a, memory_order_relaxed);
  while (v > cur && !atomic_compare_exchange_weak_explicit(a, &cur, v, memory_order_relaxed, memory_order_relaxed)) {
  }
}

static void atomic_min_u64(_Atomic uint64_t* a, uint64_t v) {
  uint64_t cur = atomic_load_explicit(a, memory_order_relaxed);
  while (v < cur && !atomic_compare_exchange_weak_explicit(a, &cur, v, memory_order_relaxed, memory_order_relaxed)) {
  }
}

/* ---- arms ---------------------------------------------------------------------------------- */

/* The arm in force for the communicator `hash`, from the tuner's share; -1 without one. The share
 * is final from init for every communicator but the process's first: its init runs before NCCL
 * loads the tuner, so its first collective looks once more (the one lookup outside init: a dlopen
 * with RTLD_NOLOAD, once per communicator). A start that races with that lookup gets -1 (NCCL
 * starts a communicator's tasks from one thread: not seen in practice). */
static int arm_now(cclp_ctx* ctx, uint64_t hash) {
  int st = atomic_load_explicit(&ctx->share_state, memory_order_acquire);
  if (st == 0 && atomic_compare_exchange_strong(&ctx->share_state, &st, 1)) {
    cclp_share_find(&ctx->share);
    atomic_store_explicit(&ctx->share_state, 2, memory_order_release);
    st = 2;
  }
  return st == 2 && ctx->share.arm_of ? ctx->share.arm_of(hash) : -1;
}

/* The sums of arm `arm`, or NULL (counted apart) when it is outside -1..CCLP_ARMS-2. */
static cclp_arm_sum* arm_sum(cclp_ctx* ctx, int arm) {
  if (arm >= -1 && arm < CCLP_ARMS - 1) return &ctx->arms[arm + 1];
  return NULL;
}

/* ---- timed calls -------------------------------------------------------------------------- */

static void record_timed(cclp_ctx* ctx, const cclp_slot* s, uint64_t ticket, uint64_t start, uint64_t end) {
  int entry = s->entry;
  cclp_entry* e = &ctx->entries[entry];
  uint64_t ns = end - start;
  cclp_arm_sum* a = arm_sum(ctx, s->arm);
  if (a) {
    atomic_fetch_add_explicit(&a->timed, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&a->sum_ns, ns, memory_order_relaxed);
  }
  atomic_fetch_add_explicit(&e->timed, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&e->sum_ns, ns, memory_order_relaxed);
  atomic_max_u64(&e->max_ns, ns);
  atomic_fetch_add_explicit(&e->hist[cclp_hist_bucket(ns)], 1, memory_order_relaxed);
  uint64_t i = atomic_fetch_add_explicit(&ctx->nlines, 1, memory_order_relaxed);
  if (i >= ctx->calls_cap) {
    atomic_fetch_add_explicit(&ctx->dropped_lines, 1, memory_order_relaxed);
    return;
  }
  cclp_line* l = &ctx->lines[i];
  l->entry = entry;
  l->arm = s->arm;
  l->ticket = ticket;
  l->seq = s->seq;
  l->start_ns = start;
  l->end_ns = end;
  atomic_store_explicit(&l->ready, 1, memory_order_release);
}

/* Records the call in s (which this thread alone now ends), if its times are complete. */
static void finish(cclp_ctx* ctx, cclp_slot* s, uint64_t ticket, int task_stopped) {
  uint64_t start, end;
  if (ctx->gpu_timing) {
    start = atomic_load_explicit(&s->gpu_start, memory_order_relaxed);
    end = atomic_load_explicit(&s->gpu_stop, memory_order_relaxed);
  } else {
    start = s->host_start;
    end = task_stopped ? cclp_now_ns() : 0;
  }
  if (end != 0 && start != UINT64_MAX && end >= start) record_timed(ctx, s, ticket, start, end);
  else atomic_fetch_add_explicit(&ctx->lost_calls, 1, memory_order_relaxed);
}

/* Takes a slot still held by an unfinished call: records what that call has. */
static void take_over(cclp_ctx* ctx, cclp_slot* s, uint64_t owner) {
  if (atomic_exchange_explicit(&s->remaining, -(1 << 20), memory_order_acq_rel) > 0)
    finish(ctx, s, owner - 1, 0);
}

void cclp_flush_pending(cclp_ctx* ctx) {
  for (int i = 0; i < CCLP_SLOTS; i++) {
    cclp_slot* s = &ctx->slots[i];
    uint64_t owner = atomic_load_explicit(&s->owner, memory_order_acquire);
    if (owner && atomic_compare_exchange_strong(&s->owner, &owner, 0)) take_over(ctx, s, owner);
  }
}

static void start_task(cclp_ctx* ctx, void** handle, const cclp_event* ev) {
  if (ev->has_hash && __atomic_load_n(&ctx->has_comm, __ATOMIC_ACQUIRE) != 2) { /* v1..v3: the first event names it */
    int expected = 0;
    if (__atomic_compare_exchange_n(&ctx->has_comm, &expected, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
      ctx->comm_hash = ev->comm_hash;
      ctx->rank = ev->rank;
      __atomic_store_n(&ctx->has_comm, 2, __ATOMIC_RELEASE);
    }
  }
  int entry = find_entry(ctx, ev);
  if (entry >= 0) atomic_fetch_add_explicit(&ctx->entries[entry].calls, 1, memory_order_relaxed);
  int arm = arm_now(ctx, ev->has_hash ? ev->comm_hash : ctx->comm_hash);
  cclp_arm_sum* a = arm_sum(ctx, arm);
  if (!a) atomic_fetch_add_explicit(&ctx->arm_outside, 1, memory_order_relaxed);
  else {
    atomic_fetch_add_explicit(&a->calls, 1, memory_order_relaxed);
    if (entry < 0) atomic_fetch_add_explicit(&a->no_entry, 1, memory_order_relaxed);
  }
  uint64_t n = atomic_fetch_add_explicit(&ctx->ncalls, 1, memory_order_relaxed);
  uint64_t p2p_seq = ev->type == CCLP_P2P ? atomic_fetch_add_explicit(&ctx->np2p, 1, memory_order_relaxed) : 0;
  /* A CE collective is not timed: NCCL starts and stops its event on the host around enqueuing the
   * copies (NCCL 2.30 src/ce_coll.cc:1367,1406) and leaves GPU timing to the plugin (CUDA events on the
   * descriptor's stream), which this plugin, built without CUDA, does not record. Its NULL handle also
   * keeps NCCL from starting its CeSync and CeBatch children (src/plugin/profiler.cc:869-931). */
  if (ev->type == CCLP_CE) return;
  if (entry < 0 || n % ctx->every) return; /* not sampled: NULL handle, NCCL sends no channel events */
  uint64_t ticket = atomic_fetch_add_explicit(&ctx->nsampled, 1, memory_order_relaxed) & TICKET_MASK;
  cclp_slot* s = &ctx->slots[ticket % CCLP_SLOTS];
  uint64_t prev = atomic_exchange_explicit(&s->owner, 0, memory_order_acq_rel);
  if (prev) take_over(ctx, s, prev); /* CCLP_SLOTS calls later and still unfinished */
  int channels = ctx->gpu_timing && ev->nchannels > 0 ? ev->nchannels : 0;
  atomic_store_explicit(&s->kstops, 0, memory_order_relaxed);
  atomic_store_explicit(&s->gpu_start, UINT64_MAX, memory_order_relaxed);
  atomic_store_explicit(&s->gpu_stop, 0, memory_order_relaxed);
  s->host_start = ctx->gpu_timing ? 0 : cclp_now_ns();
  s->seq = ev->type == CCLP_COLL ? ev->seq : p2p_seq;
  s->entry = entry;
  s->arm = arm;
  atomic_store_explicit(&s->remaining, 1 + channels, memory_order_relaxed);
  atomic_store_explicit(&s->owner, ticket + 1, memory_order_release);
  *handle = encode(ctx->index, ticket, 0, 0);
}

void cclp_start(cclp_ctx* ctx, void** handle, const cclp_event* ev) {
  *handle = NULL;
  if (!ctx) return;
  if (ev->type == CCLP_COLL || ev->type == CCLP_P2P || ev->type == CCLP_CE) {
    start_task(ctx, handle, ev);
  } else if (ev->type == CCLP_KERNEL_CH && ev->parent) {
    cclp_ctx* pctx;
    uint64_t ticket;
    int kernel;
    cclp_slot* s = decode(ev->parent, &pctx, &ticket, &kernel);
    if (!s || kernel || pctx != ctx || ev->channel < 0 || ev->channel > MAX_CHANNEL) return;
    atomic_min_u64(&s->gpu_start, ev->ptimer);
    *handle = encode(ctx->index, ticket, 1, ev->channel);
  }
}

void cclp_record_stop_timer(void* handle, uint64_t ptimer) {
  cclp_ctx* ctx;
  uint64_t ticket;
  int kernel;
  cclp_slot* s = decode(handle, &ctx, &ticket, &kernel);
  if (s && kernel) atomic_max_u64(&s->gpu_stop, ptimer);
}

void cclp_stop(void* handle) {
  cclp_ctx* ctx;
  uint64_t ticket;
  int kernel;
  cclp_slot* s = decode(handle, &ctx, &ticket, &kernel);
  if (!s) return;
  if (kernel) atomic_fetch_add_explicit(&s->kstops, 1, memory_order_relaxed);
  if (atomic_fetch_sub_explicit(&s->remaining, 1, memory_order_acq_rel) != 1) return;
  /* this thread brought `remaining` to zero: it alone records the call, then frees the slot
   * (a start that took the slot over meanwhile owns it already: the exchange then fails) */
  finish(ctx, s, ticket, !kernel);
  uint64_t owner = ticket + 1;
  atomic_compare_exchange_strong(&s->owner, &owner, 0);
}
