/* A fixed-size log histogram of durations in nanoseconds, HDR-style: values below 64 ns have
 * a bucket each; above, every power of two is cut into 32 equal buckets, so a bucket spans at
 * most 1/32 of its lower bound and its midpoint is within 1/64 (1.6%) of any value in it.
 * Durations of 2^40 ns (18 minutes) and more share the last bucket (the exact max is kept
 * beside the histogram). Pure functions: no state, no allocation. */
#ifndef CCLTUNE_PROFILER_HIST_H
#define CCLTUNE_PROFILER_HIST_H

#include <stdint.h>

#define CCLP_HIST_SUB_BITS 5
#define CCLP_HIST_LINEAR 64 /* 2^(SUB_BITS+1): below this a bucket is one nanosecond */
#define CCLP_HIST_TOP_EXP 39 /* largest power of two with its own buckets */
#define CCLP_HIST_BUCKETS \
  (CCLP_HIST_LINEAR + (CCLP_HIST_TOP_EXP - 5) * (1 << CCLP_HIST_SUB_BITS))
/* the documented worst-case relative error of a reported percentile: 1/64 */
#define CCLP_HIST_REL_ERROR (1.0 / 64.0)

/* The bucket of a duration. */
int cclp_hist_bucket(uint64_t ns);

/* The value reported for a bucket: its midpoint (exact below 64 ns). */
double cclp_hist_value(int bucket);

/* The p-th percentile (0 < p <= 100, nearest rank) of the n values counted in hist, as
 * its bucket's value, never above max_ns. Returns -1 when n is 0. */
double cclp_hist_percentile(const uint32_t* hist, uint64_t n, double p, uint64_t max_ns);

#endif
