/* In-run arms (CCLTUNE_ARMS=<arms file>): several rule sets in one run, switched in blocks of
 * whole steps on a schedule every rank computes identically from its own call count.
 * Formats and schedule: /work/CONTRACTS.md section 2 and docs/plugin.md ("In-run arms");
 * Python twin of the pure parts: src/ccltune/ab/schedule.py.
 *   arms_file.c      the arms file -> ccl_arms_cfg (bounded, strict)
 *   arms_schedule.c  splitmix64, block -> arm, period detection (pure)
 *   arms.c           per-communicator state, the hot path, the arm log, ccltuneArmShare_v1 */
#ifndef CCLTUNE_ARMS_H
#define CCLTUNE_ARMS_H

#include <stddef.h>
#include <stdint.h>

#include "ccltune_arm_share.h"
#include "ccltune_tuner_abi.h"
#include "commfile.h"
#include "rules.h"

#define CCLT_ARMS_MAX 32                 /* arms in one file, arm 0 included */
#define CCLT_ARMS_NAME_MAX 64            /* bytes of an arm's name */
#define CCLT_ARMS_MAX_FILE (64u << 10)   /* bytes of an arms file */
#define CCLT_ARMS_MAX_BLOCKS 100000      /* max_blocks; the log holds max_blocks + 1 lines */
#define CCLT_ARMS_MAX_WARMUP 100000      /* warmup_blocks */
#define CCLT_ARMS_MAX_BLOCK_PERIODS 100000
#define CCLT_ARMS_MAX_PERIOD (1 << 24)   /* period=<int>, step_calls=<int> */
#define CCLT_ARMS_FIRST_CHECK 1024       /* period=auto: checked when the call count is 1024 * 4^k ... */
#define CCLT_ARMS_KEY_CAP (1u << 18)     /* ... up to 262,144 calls (2 MiB of keys); after it: period=none */

typedef struct {
  uint64_t seed;
  int warmupBlocks, blockPeriods, maxBlocks;
  int period; /* 0: auto */
  int onlyRanks; /* nranks=N: arms only on communicators of N ranks, the others run NCCL's default (0: every one) */
  int stepCalls; /* period=auto: the calls of one step as the job's workload counts them (0: not given); the
                    period found is raised to its multiple nearest to this (a decode loop's calls are one key:
                    the sequence repeats every call, the step every stepCalls calls) */
  int nArms;
  char names[CCLT_ARMS_MAX][CCLT_ARMS_NAME_MAX + 1];
  char* rules[CCLT_ARMS_MAX]; /* malloc'd path, NULL: NCCL's default (always NULL for arm 0) */
  char log[CCLT_COMMFILE_DIR_MAX + 1];
} ccl_arms_cfg;

/* Parses an arms file held in buf. baseDir: the folder relative rules= paths are taken from (the
 * arms file's own). Returns 0, or -1 with "line N: reason" (or a whole-file reason) in why. On -1
 * the cfg holds nothing to free beyond what ccl_arms_cfg_free frees. */
int ccl_arms_parse_buffer(const char* buf, size_t len, const char* baseDir, ccl_arms_cfg* cfg, char* why,
                          size_t whyLen);
/* Reads (regular file, at most CCLT_ARMS_MAX_FILE bytes) and parses path. 0 or -1 with why. */
int ccl_arms_parse_file(const char* path, ccl_arms_cfg* cfg, char* why, size_t whyLen);
void ccl_arms_cfg_free(ccl_arms_cfg* cfg);

/* ---- pure schedule (arms_schedule.c) ---- */
/* splitmix64: *state += 0x9e3779b97f4a7c15, then the usual mix of the new state. */
uint64_t ccl_splitmix64(uint64_t* state);
/* The arm of block b: 0 while b < warmup; then the warm-up round (arms 0..n-1 in order); then round
 * r = 0, 1, ...: a Fisher-Yates shuffle of 0..n-1 driven by splitmix64 seeded with seed ^ r
 * (i from n-1 down to 1: j = next() % (i + 1), swap a[i], a[j]). nArms 1..CCLT_ARMS_MAX. */
int ccl_arm_at(uint64_t block, int nArms, uint64_t seed, uint64_t warmupBlocks);
/* The key period detection compares: (collective, nBytes, numPipeOps), packed when they fit,
 * hashed otherwise (equal calls give equal keys either way). */
uint64_t ccl_arms_key(int coll, uint64_t nBytes, int numPipeOps);
/* The smallest p <= n/3 such that the last max(3p, ceil(n/2)) keys of keys[0..n) repeat with
 * period p, or 0. work: n int32 (a Z-function of the reversed keys). O(n), no allocation. */
uint32_t ccl_period_detect(const uint64_t* keys, uint32_t n, int32_t* work);
/* The period blocks are made of, from the sequence's own period p (0: none): p, or with stepCalls > 0 the
 * multiple of p nearest to stepCalls (at least p). */
uint64_t ccl_arms_step_period(uint32_t p, int stepCalls);

/* ---- per communicator (arms.c) ---- */
typedef struct ccl_arms ccl_arms;
/* Loads an arm's rule file for this communicator (plugin.c's loader, which logs what it read at INFO);
 * NULL when the file cannot be used, the reason then in why (no WARN of its own). */
typedef ccl_comm* (*ccl_arms_loader)(const char* path, void* user, char* why, size_t whyLen);

/* NULL when CCLTUNE_ARMS is unset or empty, or when its nranks= names another size than nRanks (an INFO line:
 * that communicator runs NCCL's default). A bad arms file, an arm's rule file that cannot be
 * used, a log folder that cannot be written or no memory: one WARN, NULL (NCCL's default). */
ccl_arms* ccl_arms_open(uint64_t commId, int hasCommId, unsigned seq, size_t nRanks,
                        ncclDebugLogger_t logger, ccl_arms_loader load, void* user);
/* Hot path: counts the call and returns the rules of the arm in force (NULL: NCCL's default).
 * No allocation, lock or system call but one clock_gettime(CLOCK_REALTIME) per block switch.
 * Calls on one communicator come in NCCL's issue order, never at once (NCCL communicators are not
 * used from two threads at once); arm_of may be read from any thread. */
const ccl_comm* ccl_arms_rules(ccl_arms* a, int coll, uint64_t nBytes, int numPipeOps);
/* Writes the arm log (temp + rename), then frees. 0, or -1 when the log could not be written. */
int ccl_arms_close(ccl_arms* a);

#endif
