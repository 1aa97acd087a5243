/* White-box test of the histogram: every bucket's reported value is within 1/64 of every
 * value that falls in it (checked at each bucket's bounds), buckets are monotonic, and the
 * nearest-rank percentile picks the right bucket and never exceeds the exact max.
 *   test_hist [TEST...]   (no name: all; --list: the names) */
#include "../../plugin/tests/check.h"
#include "hist.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

static void check_value(uint64_t ns) {
  int b = cclp_hist_bucket(ns);
  double v = cclp_hist_value(b);
  CHECK(b >= 0 && b < CCLP_HIST_BUCKETS, "bucket of %llu: %d", (unsigned long long)ns, b);
  if (ns < (1ull << (CCLP_HIST_TOP_EXP + 1)))
    CHECK(fabs(v - (double)ns) <= CCLP_HIST_REL_ERROR * (double)ns + 1e-9, "%llu ns reported as %.3f",
          (unsigned long long)ns, v);
}

static void test_buckets(void) {
  int prev = -1;
  for (uint64_t ns = 0; ns < 200000; ns++) { /* every value up to 200 us */
    int b = cclp_hist_bucket(ns);
    CHECK(b == prev || b == prev + 1, "buckets not contiguous at %llu", (unsigned long long)ns);
    prev = b;
    check_value(ns);
  }
  for (int e = 17; e <= CCLP_HIST_TOP_EXP; e++) /* bucket bounds of every octave above */
    for (uint64_t sub = 0; sub < 32; sub++) {
      uint64_t lo = (32 + sub) << (e - 5), width = 1ull << (e - 5);
      check_value(lo);
      check_value(lo + width - 1);
      CHECK(cclp_hist_bucket(lo) == cclp_hist_bucket(lo + width - 1) &&
                (cclp_hist_bucket(lo + width) == cclp_hist_bucket(lo) + 1 || cclp_hist_bucket(lo) == CCLP_HIST_BUCKETS - 1),
            "octave %d sub %llu bounds", e, (unsigned long long)sub);
    }
  CHECK(cclp_hist_bucket(UINT64_MAX) == CCLP_HIST_BUCKETS - 1, "huge values share the last bucket");
  printf("histogram: %d buckets, worst-case relative error 1/64\n", CCLP_HIST_BUCKETS);
}

static void test_percentile(void) {
  static uint32_t hist[CCLP_HIST_BUCKETS];
  memset(hist, 0, sizeof hist);
  uint64_t values[] = {10000, 20000, 30000, 40000, 1000000}; /* ns */
  for (int i = 0; i < 5; i++) hist[cclp_hist_bucket(values[i])]++;
  CHECK(cclp_hist_percentile(hist, 0, 50, 0) == -1, "empty histogram");
  double p50 = cclp_hist_percentile(hist, 5, 50, 1000000); /* rank 3: 30 us */
  CHECK(fabs(p50 - 30000) <= 30000 / 64.0, "p50 %.1f", p50);
  double p10 = cclp_hist_percentile(hist, 5, 10, 1000000); /* rank 1: 10 us */
  CHECK(fabs(p10 - 10000) <= 10000 / 64.0, "p10 %.1f", p10);
  double p90 = cclp_hist_percentile(hist, 5, 90, 1000000); /* rank 5 */
  CHECK(p90 <= 1000000 && p90 >= 1000000 * (1 - 1 / 64.0), "p90 %.1f never above max", p90);
  CHECK(cclp_hist_percentile(hist, 5, 90, 999000) == 999000, "clamped to the exact max");
}

int main(int argc, char** argv) {
  static const check_test TESTS[] = {{"buckets", test_buckets}, {"percentile", test_percentile}};
  return check_main(TESTS, CHECK_COUNT(TESTS), argc - 1, argv + 1);
}
