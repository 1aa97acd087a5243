/* The pure half of in-run arms: which arm a block runs, and the period of a call sequence.
 * Python twin: src/ccltune/ab/schedule.py (tests/plugin/test_arms.py checks they agree). */
#include "arms.h"

uint64_t ccl_splitmix64(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

int ccl_arm_at(uint64_t block, int nArms, uint64_t seed, uint64_t warmupBlocks) {
  if (nArms < 1 || nArms > CCLT_ARMS_MAX || block < warmupBlocks) return 0;
  uint64_t k = (uint64_t)nArms, b = block - warmupBlocks;
  if (b < k) return (int)b; /* the warm-up round: each arm once, in order */
  uint64_t round = (b - k) / k, pos = (b - k) % k;
  int order[CCLT_ARMS_MAX];
  for (int i = 0; i < nArms; i++) order[i] = i;
  uint64_t state = seed ^ round;
  for (int i = nArms - 1; i >= 1; i--) {
    int j = (int)(ccl_splitmix64(&state) % (uint64_t)(i + 1));
    int t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
  return order[pos];
}

uint64_t ccl_arms_key(int coll, uint64_t nBytes, int numPipeOps) {
  if (coll >= 0 && coll < 15 && nBytes >> 48 == 0 && numPipeOps >= 0 && numPipeOps < 4096)
    return nBytes | (uint64_t)(coll + 1) << 48 | (uint64_t)numPipeOps << 52;
  uint64_t s = nBytes ^ (uint64_t)(uint32_t)coll << 32 ^ (uint64_t)(uint32_t)numPipeOps;
  return ccl_splitmix64(&s) | 1ull << 63; /* never equal to a packed key: bit 63 is 0 in those */
}

/* With r the keys reversed (r[i] = keys[n-1-i]), r[0..L) has period p exactly when z[p] >= L - p
 * (z: the Z-function of r). The smallest p that holds over L = max(3p, ceil(n/2)) is the answer. */
uint32_t ccl_period_detect(const uint64_t* keys, uint32_t n, int32_t* z) {
  if (n < 3) return 0;
#define R(i) keys[n - 1 - (i)]
  uint32_t l = 0, r = 0;
  z[0] = (int32_t)n;
  for (uint32_t i = 1; i < n; i++) {
    uint32_t zi = 0;
    if (i < r) {
      zi = r - i;
      if ((uint32_t)z[i - l] < zi) zi = (uint32_t)z[i - l];
    }
    while (i + zi < n && R(zi) == R(i + zi)) zi++;
    z[i] = (int32_t)zi;
    if (i + zi > r) {
      l = i;
      r = i + zi;
    }
  }
#undef R
  uint32_t half = (n + 1) / 2;
  for (uint32_t p = 1; p <= n / 3; p++) {
    uint32_t len = 3 * p > half ? 3 * p : half;
    if ((uint32_t)z[p] >= len - p) return p;
  }
  return 0;
}

uint64_t ccl_arms_step_period(uint32_t p, int stepCalls) {
  if (!p || stepCalls <= 0) return p;
  uint64_t m = ((uint64_t)stepCalls + p / 2) / p;
  return (uint64_t)p * (m ? m : 1);
}
