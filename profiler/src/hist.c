#include "hist.h"

#include <math.h>

int cclp_hist_bucket(uint64_t ns) {
  if (ns < CCLP_HIST_LINEAR) return (int)ns;
  int e = 63 - __builtin_clzll(ns); /* ns in [2^e, 2^(e+1)), e >= 6 */
  if (e > CCLP_HIST_TOP_EXP) return CCLP_HIST_BUCKETS - 1;
  int sub = (int)((ns >> (e - CCLP_HIST_SUB_BITS)) & ((1u << CCLP_HIST_SUB_BITS) - 1));
  return CCLP_HIST_LINEAR + (e - 6) * (1 << CCLP_HIST_SUB_BITS) + sub;
}

double cclp_hist_value(int bucket) {
  if (bucket < CCLP_HIST_LINEAR) return bucket;
  int e = 6 + (bucket - CCLP_HIST_LINEAR) / (1 << CCLP_HIST_SUB_BITS);
  int sub = (bucket - CCLP_HIST_LINEAR) % (1 << CCLP_HIST_SUB_BITS);
  double width = ldexp(1.0, e - CCLP_HIST_SUB_BITS);
  return ((1 << CCLP_HIST_SUB_BITS) + sub) * width + width / 2;
}

double cclp_hist_percentile(const uint32_t* hist, uint64_t n, double p, uint64_t max_ns) {
  if (n == 0) return -1;
  uint64_t rank = (uint64_t)ceil(p / 100.0 * (double)n);
  if (rank < 1) rank = 1;
  if (rank > n) rank = n;
  uint64_t seen = 0;
  for (int b = 0; b < CCLP_HIST_BUCKETS; b++) {
    seen += hist[b];
    if (seen >= rank) {
      double v = cclp_hist_value(b);
      return v > (double)max_ns ? (double)max_ns : v;
    }
  }
  return (double)max_ns; /* counts raced ahead of n: the largest value */
}
