/* Per-communicator matcher. At init the rules that apply to this communicator (nNodes,
 * nRanks, platform section) are compiled per collective into sorted size-segment
 * boundaries; each segment keeps, in file order, the rules covering all of it. A query is
 * one binary search plus a scan of a short list, so first-match order is preserved and
 * numPipeOps/regBuff (known only at call time) are checked per rule. */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rules.h"

typedef struct {
  uint64_t minBytes, maxBytes; /* checked again at query time: see the linear fallback */
  int algo, proto, channels, numPipeOps, regBuff, line;
} hot_rule;

/* Heavily overlapping rule sets make segment lists quadratic; past this many entries a
 * collective falls back to one segment holding every rule (a linear, still exact scan). */
#define MAX_SEGMENT_ENTRIES (1 << 22)

typedef struct {
  int nSeg;           /* segment k covers [bounds[k], bounds[k+1]) ; last one is open */
  uint64_t* bounds;
  int* segStart;      /* nSeg+1 offsets into idx */
  int* idx;           /* indices into ccl_comm.rules */
} coll_index;

struct ccl_comm {
  int nRules;
  hot_rule* rules;
  coll_index coll[CCLT_NUM_COLL_IDS];
};

static int cmp_u64(const void* a, const void* b) {
  uint64_t x = *(const uint64_t*)a, y = *(const uint64_t*)b;
  return x < y ? -1 : x > y;
}

/* Index of the last bound <= v, or -1. */
static int seg_of(const uint64_t* b, int n, uint64_t v) {
  int lo = 0, hi = n; /* first index with b[i] > v */
  while (lo < hi) {
    int mid = (lo + hi) >> 1;
    if (b[mid] <= v) lo = mid + 1;
    else hi = mid;
  }
  return lo - 1;
}

static int is_terminal(const hot_rule* r) {
  return r->algo == CCLT_DEFAULT && r->proto == CCLT_DEFAULT && r->numPipeOps == CCLT_ANY &&
         r->regBuff == CCLT_ANY;
}

/* Walk (or fill, when idx != NULL) the segment lists; returns the entry count. */
static int fill_segments(const ccl_comm* c, const int* list, const uint64_t* minB,
                         const uint64_t* maxB, int n, coll_index* ci, char* closed, int* idx,
                         int* cursor) {
  int total = 0;
  memset(closed, 0, (size_t)ci->nSeg);
  for (int i = 0; i < n; i++) {
    int first = seg_of(ci->bounds, ci->nSeg, minB[i]);
    int last = maxB[i] == UINT64_MAX ? ci->nSeg - 1 : seg_of(ci->bounds, ci->nSeg, maxB[i]);
    for (int k = first; k <= last; k++) {
      if (closed[k]) continue;
      if (idx) idx[cursor[k]++] = list[i];
      else ci->segStart[k + 1]++;
      if (++total > MAX_SEGMENT_ENTRIES && !idx) return total; /* caller goes linear */
      if (is_terminal(&c->rules[list[i]])) closed[k] = 1;
    }
  }
  return total;
}

static int build_coll(ccl_comm* c, const int* list, const uint64_t* minB, const uint64_t* maxB,
                      int n, coll_index* ci) {
  if (n == 0) return 0;
  uint64_t* b = malloc(sizeof(uint64_t) * 2 * (size_t)n);
  if (!b) return -1;
  int nb = 0;
  for (int i = 0; i < n; i++) {
    b[nb++] = minB[i];
    if (maxB[i] != UINT64_MAX) b[nb++] = maxB[i] + 1;
  }
  qsort(b, (size_t)nb, sizeof *b, cmp_u64);
  int u = 0;
  for (int i = 0; i < nb; i++)
    if (u == 0 || b[u - 1] != b[i]) b[u++] = b[i];
  ci->bounds = b;
  ci->nSeg = u;
  ci->segStart = calloc((size_t)u + 1, sizeof(int));
  char* closed = malloc((size_t)u);
  int* cursor = malloc(sizeof(int) * (size_t)u);
  int rc = -1;
  if (ci->segStart && closed && cursor) {
    int total = fill_segments(c, list, minB, maxB, n, ci, closed, NULL, NULL);
    int linear = total > MAX_SEGMENT_ENTRIES;
    if (linear) {
      ci->nSeg = u = 1;
      ci->bounds[0] = 0;
      ci->segStart[0] = 0;
      ci->segStart[1] = total = n;
    }
    for (int k = 0; k < u; k++) ci->segStart[k + 1] += ci->segStart[k];
    ci->idx = malloc(sizeof(int) * (size_t)(total ? total : 1));
    if (ci->idx) {
      memcpy(cursor, ci->segStart, sizeof(int) * (size_t)u);
      if (linear) memcpy(ci->idx, list, sizeof(int) * (size_t)n);
      else fill_segments(c, list, minB, maxB, n, ci, closed, ci->idx, cursor);
      rc = 0;
    }
  }
  free(closed);
  free(cursor);
  return rc;
}

ccl_comm* ccl_comm_build(const ccl_ruleset* rs, size_t nRanks, size_t nNodes,
                         const ccl_platform* p) {
  ccl_comm* c = calloc(1, sizeof *c);
  int n = rs->nRules;
  int* list = malloc(sizeof(int) * (size_t)(n ? n : 1));
  uint64_t* minB = malloc(sizeof(uint64_t) * (size_t)(n ? n : 1));
  uint64_t* maxB = malloc(sizeof(uint64_t) * (size_t)(n ? n : 1));
  char* secOk = malloc((size_t)rs->nSections + 1);
  if (c) c->rules = malloc(sizeof(hot_rule) * (size_t)(n ? n : 1));
  if (!c || !c->rules || !list || !minB || !maxB || !secOk) goto fail;
  for (int s = 0; s < rs->nSections; s++) secOk[s] = (char)ccl_section_matches(&rs->sections[s], p);
  for (int i = 0; i < n; i++) { /* keep the rules of this communicator, in file order */
    const ccl_rule* r = &rs->rules[i];
    if (r->nNodes != CCLT_ANY && (size_t)r->nNodes != nNodes) continue;
    if (r->nRanks != CCLT_ANY && (size_t)r->nRanks != nRanks) continue;
    if (r->section >= 0 && !secOk[r->section]) continue;
    hot_rule h = {r->minBytes, r->maxBytes, r->algo, r->proto, r->channels, r->numPipeOps, r->regBuff, r->line};
    c->rules[c->nRules] = h;
    list[c->nRules] = i; /* temporarily: ruleset index */
    c->nRules++;
  }
  for (int coll = 0; coll < CCLT_NUM_COLL_IDS; coll++) {
    int m = 0;
    for (int j = 0; j < c->nRules; j++) {
      const ccl_rule* r = &rs->rules[list[j]];
      if (r->coll != coll) continue;
      minB[m] = r->minBytes;
      maxB[m] = r->maxBytes;
      m++;
    }
    int* sub = malloc(sizeof(int) * (size_t)(m ? m : 1));
    if (!sub) goto fail;
    m = 0;
    for (int j = 0; j < c->nRules; j++)
      if (rs->rules[list[j]].coll == coll) sub[m++] = j;
    int rc = build_coll(c, sub, minB, maxB, m, &c->coll[coll]);
    free(sub);
    if (rc) goto fail;
  }
  free(list); free(minB); free(maxB); free(secOk);
  return c;
fail:
  free(list); free(minB); free(maxB); free(secOk);
  ccl_comm_free(c);
  return NULL;
}

void ccl_comm_free(ccl_comm* c) {
  if (!c) return;
  for (int i = 0; i < CCLT_NUM_COLL_IDS; i++) {
    free(c->coll[i].bounds);
    free(c->coll[i].segStart);
    free(c->coll[i].idx);
  }
  free(c->rules);
  free(c);
}

int ccl_comm_nrules(const ccl_comm* c) { return c ? c->nRules : 0; }

/* Cheapest usable (>= 0, not NaN) cell along one row or column; -1 if none. */
static int cheapest(const float* t, int numAlgo, int numProto, int algo, int proto) {
  int best = -1;
  int n = algo == CCLT_DEFAULT ? numAlgo : numProto;
  for (int i = 0; i < n; i++) {
    int a = algo == CCLT_DEFAULT ? i : algo, p = proto == CCLT_DEFAULT ? i : proto;
    if (a >= numAlgo || p >= numProto) continue;
    float v = t[a * numProto + p];
    if (v >= 0.0f && (best < 0 || v < t[best])) best = a * numProto + p;
  }
  return best;
}

int ccl_comm_decide(const ccl_comm* c, int coll, uint64_t nBytes, int numPipeOps, int regBuff,
                    const float* table, int numAlgo, int numProto, int partialDefaults,
                    int* cell, int* channels) {
  *cell = -1;
  *channels = 0;
  if (!c || coll < 0 || coll >= CCLT_NUM_COLL_IDS) return 0;
  const coll_index* ci = &c->coll[coll];
  int k = seg_of(ci->bounds, ci->nSeg, nBytes);
  if (k < 0) return 0;
  /* a cell is an int index: a table of more than INT_MAX cells (no real NCCL passes one) is no table */
  if (numAlgo <= 0 || numProto <= 0 || (int64_t)numAlgo * numProto > INT_MAX) table = NULL;
  for (int i = ci->segStart[k]; i < ci->segStart[k + 1]; i++) {
    const hot_rule* r = &c->rules[ci->idx[i]];
    if (nBytes < r->minBytes || nBytes > r->maxBytes) continue;
    if (r->numPipeOps != CCLT_ANY && r->numPipeOps != numPipeOps) continue;
    if (r->regBuff != CCLT_ANY && r->regBuff != regBuff) continue;
    int chosen = -1;
    if (r->algo == CCLT_DEFAULT && r->proto == CCLT_DEFAULT) {
      /* keep NCCL's choice: matches, stops, changes no cell */
    } else if (!table) {
      continue;
    } else if (r->algo == CCLT_DEFAULT || r->proto == CCLT_DEFAULT) {
      if (!partialDefaults) continue;
      chosen = cheapest(table, numAlgo, numProto, r->algo, r->proto);
      if (chosen < 0) continue;
    } else {
      if (r->algo >= numAlgo || r->proto >= numProto) continue;
      chosen = r->algo * numProto + r->proto;
      if (!(table[chosen] >= 0.0f)) continue; /* IGNORE (or NaN): NCCL cannot run it */
    }
    *cell = chosen;
    *channels = r->channels >= 1 ? r->channels : 0;
    return r->line;
  }
  return 0;
}
