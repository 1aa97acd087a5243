/* NCCL/RCCL tuner entry points (v2..v6). The only exported symbols are the five const
 * ncclTunerPlugin_vN structs and ccltuneArmShare_v1 (arms.c). init loads and compiles the rule
 * file for one communicator, or with CCLTUNE_ARMS set the rule file of every arm (arms.c), and,
 * with CCLTUNE_CAPTURE set, opens its capture table (capture.c); getCollInfo counts the call and
 * reads the compiled rules (of the arm in force): no allocation, locking or logging, and it
 * returns ncclSuccess on every path (NCCL fails the collective otherwise). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arms.h"
#include "ccltune_tuner_abi.h"
#include "capture.h"
#include "rules.h"

#define EXPORT __attribute__((visibility("default")))
#define LOG_FLAGS (NCCL_TUNING | NCCL_INIT)
#define LOG(logger, level, ...) \
  do { if (logger) (logger)(level, LOG_FLAGS, __FILE__, __LINE__, __VA_ARGS__); } while (0)

/* Rejected lines: every one at INFO, and one WARN per load quoting the first few (NCCL logs each
 * communicator's init: a WARN per line would flood the log of every job). */
#define FIRST_REJECTED 3
typedef struct {
  ncclDebugLogger_t logger;
  const char* path;
  char first[640];
  size_t len;
  int n;
} diag_ctx;

static void note_line(void* user, int line, const char* reason) {
  diag_ctx* d = user;
  LOG(d->logger, NCCL_LOG_INFO, "%s:%d: %s", d->path, line, reason);
  if (++d->n <= FIRST_REJECTED && d->len < sizeof d->first) {
    int k = snprintf(d->first + d->len, sizeof d->first - d->len, "%sline %d: %.160s", d->n > 1 ? "; " : "",
                     line, reason);
    if (k > 0) d->len = d->len + (size_t)k < sizeof d->first ? d->len + (size_t)k : sizeof d->first - 1;
  }
}

/* NCCL_TUNER_CONFIG_FILE, else CCLTUNE_RULES, else ./nccl_tuner.conf if it exists. */
static const char* rule_file(void) {
  const char* p = getenv("NCCL_TUNER_CONFIG_FILE");
  if (p && *p) return p;
  p = getenv("CCLTUNE_RULES");
  if (p && *p) return p;
  return access("nccl_tuner.conf", F_OK) == 0 ? "nccl_tuner.conf" : NULL;
}

/* One communicator's context: its compiled rules, its arms and its capture table (any may be NULL;
 * with arms, rules is NULL: the arm in force decides). */
typedef struct {
  ccl_comm* rules;
  ccl_arms* arms;
  ccl_capture* capture;
} plugin_ctx;

/* What a rule file is compiled for: one communicator. */
typedef struct {
  size_t nRanks, nNodes;
  ncclDebugLogger_t logger;
  const int* nvl3;
  char* why; /* NULL: a file that cannot be used is a WARN; else its reason goes here (an arm's rules) */
  size_t whyLen;
} comm_facts;

/* Never fails: a bad file gives NULL (after a WARN, or with the reason in cf->why) and leaves NCCL's
 * choices untouched. */
static ccl_comm* load_rules(const char* path, const comm_facts* cf) {
  size_t nRanks = cf->nRanks, nNodes = cf->nNodes;
  ncclDebugLogger_t logger = cf->logger;
  ccl_ruleset rs;
  memset(&rs, 0, sizeof rs);
  diag_ctx d = {.logger = logger, .path = path};
  errno = 0;
  int rc = ccl_parse_file(path, &rs, note_line, &d);
  if (rc != CCLT_FILE_OK && cf->why) {
    snprintf(cf->why, cf->whyLen, "%s", ccl_file_problem(rc));
  } else if (rc != CCLT_FILE_OK) { /* named but unusable: the job runs untuned, so say it where it is seen */
    LOG(logger, NCCL_LOG_WARN, "ccltune tuner: cannot read rule file %s (%s); NCCL's choices are left unchanged",
        path, ccl_file_problem(rc));
  }
  if (rc != CCLT_FILE_OK) {
    ccl_ruleset_free(&rs);
    return NULL;
  }
  ccl_platform plat;
  ccl_platform_detect(&plat);
  ccl_platform_set_nvl(&plat, nRanks, nNodes, cf->nvl3);
  ccl_comm* comm = ccl_comm_build(&rs, nRanks, nNodes, &plat);
  char desc[256];
  ccl_platform_describe(&plat, desc, sizeof desc);
  if (!comm && cf->why) {
    snprintf(cf->why, cf->whyLen, "out of memory compiling it");
  } else if (!comm) {
    LOG(logger, NCCL_LOG_WARN, "ccltune tuner: out of memory compiling %s; NCCL's choices are left unchanged", path);
  } else {
    LOG(logger, NCCL_LOG_INFO,
        "ccltune tuner: loaded %d rules from %s (%d apply to this communicator: nRanks=%zu nNodes=%zu platform=%s)",
        rs.nRules, path, ccl_comm_nrules(comm), nRanks, nNodes, desc);
    if (rs.nRejected)
      LOG(logger, NCCL_LOG_WARN, "ccltune tuner: %d lines of %s rejected and skipped (%s%s); each is logged at "
          "INFO, and `ccltune plugin check %s` lists them", rs.nRejected, path, d.first,
          rs.nRejected > FIRST_REJECTED ? "; ..." : "", path);
  }
  ccl_ruleset_free(&rs);
  return comm;
}

static ccl_comm* load_arm_rules(const char* path, void* user, char* why, size_t whyLen) {
  comm_facts cf = *(const comm_facts*)user;
  cf.why = why;
  cf.whyLen = whyLen;
  return load_rules(path, &cf);
}

/* The communicator's rules without arms: the rule file, if one is named or found. */
static ccl_comm* load_rule_file(const comm_facts* cf) {
  const char* path = rule_file();
  if (!path) {
    LOG(cf->logger, NCCL_LOG_INFO,
        "ccltune tuner: no rule file (NCCL_TUNER_CONFIG_FILE, CCLTUNE_RULES, ./nccl_tuner.conf); "
        "NCCL's choices are left unchanged");
    return NULL;
  }
  return load_rules(path, cf);
}

/* Never fails; *ctx stays NULL when there is no rule to apply, no arms and no capture. With
 * CCLTUNE_ARMS set the arms decide (a bad arms file: NCCL's default) and the rule file is not read. */
static ncclResult_t init_common(uint64_t commId, int hasCommId, size_t nRanks, size_t nNodes,
                                ncclDebugLogger_t logger, const int* nvl3, void** ctx) {
  if (!ctx) return ncclSuccess;
  *ctx = NULL;
  comm_facts cf = {nRanks, nNodes, logger, nvl3, NULL, 0};
  unsigned seq = ccl_commfile_next_seq();
  const char* armsFile = getenv("CCLTUNE_ARMS");
  ccl_comm* rules = NULL;
  ccl_arms* arms = NULL;
  if (armsFile && *armsFile) {
    arms = ccl_arms_open(commId, hasCommId, seq, nRanks, logger, load_arm_rules, &cf);
    if (rule_file())
      LOG(logger, NCCL_LOG_INFO, "ccltune tuner: CCLTUNE_ARMS is set: the rule file %s is not read (the arms' "
          "rule files decide)", rule_file());
  } else {
    rules = load_rule_file(&cf);
  }
  ccl_capture* capture = ccl_capture_open(commId, hasCommId, seq, nRanks, nNodes, logger);
  if (!rules && !arms && !capture) return ncclSuccess;
  plugin_ctx* p = malloc(sizeof *p);
  if (!p) {
    LOG(logger, NCCL_LOG_WARN, "ccltune tuner: out of memory; NCCL's choices are left unchanged");
    ccl_comm_free(rules);
    ccl_arms_close(arms);
    ccl_capture_close(capture);
    return ncclSuccess;
  }
  p->rules = rules;
  p->arms = arms;
  p->capture = capture;
  *ctx = p;
  return ncclSuccess;
}

static ncclResult_t init_v5(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes,
                            ncclDebugLogger_t logger, ncclNvlDomainInfo_v5_t* nvl,
                            ncclTunerConstants_v5_t* constants) {
  (void)constants; /* read-only by design: ccltune tunes choices, not NCCL's model */
  int nvl3[3];
  if (nvl) {
    nvl3[0] = nvl->nNvlDomains;
    nvl3[1] = nvl->minRanksPerNvlDomain;
    nvl3[2] = nvl->maxRanksPerNvlDomain;
  }
  return init_common(commId, 1, nRanks, nNodes, logger, nvl ? nvl3 : NULL, ctx);
}

static ncclResult_t init_v2(size_t nRanks, size_t nNodes, ncclDebugLogger_t logger, void** ctx) {
  return init_common(0, 0, nRanks, nNodes, logger, NULL, ctx);
}

/* A capture that cannot be written is logged, not returned: NCCL would fail commDestroy. */
static ncclResult_t finalize(void* ctx) {
  plugin_ctx* p = ctx;
  if (!p) return ncclSuccess;
  ccl_capture_close(p->capture);
  ccl_arms_close(p->arms);
  ccl_comm_free(p->rules);
  free(p);
  return ncclSuccess;
}

static void apply(void* ctx, ncclFunc_t coll, size_t nBytes, int numPipeOps, float** table,
                  int numAlgo, int numProto, int regBuff, int* nChannels) {
  int cell, ch;
  float* t = (float*)table; /* NCCL passes a contiguous float[numAlgo][numProto] */
  const plugin_ctx* p = ctx;
  if (!p) return;
  ccl_capture_record(p->capture, (int)coll, nBytes, numPipeOps, regBuff);
  const ccl_comm* rules = p->arms ? ccl_arms_rules(p->arms, (int)coll, nBytes, numPipeOps) : p->rules;
  if (!ccl_comm_decide(rules, (int)coll, nBytes, numPipeOps, regBuff, t, numAlgo, numProto, 1,
                       &cell, &ch))
    return;
  if (cell >= 0) t[cell] = 0.0f;
  if (ch > 0 && nChannels) *nChannels = ch;
}

static ncclResult_t getCollInfo_v4(void* ctx, ncclFunc_t coll, size_t nBytes, int numPipeOps,
                                   float** table, int numAlgo, int numProto, int regBuff,
                                   int* nChannels) {
  apply(ctx, coll, nBytes, numPipeOps, table, numAlgo, numProto, regBuff, nChannels);
  return ncclSuccess;
}

static ncclResult_t getCollInfo_v3(void* ctx, ncclFunc_t coll, size_t nBytes, int numPipeOps,
                                   float** table, int numAlgo, int numProto, int* nChannels) {
  /* v3 has no regBuff: -1 = unknown, so only rules with regBuff -1 match */
  apply(ctx, coll, nBytes, numPipeOps, table, numAlgo, numProto, -1, nChannels);
  return ncclSuccess;
}

/* v2 returns the pair itself; the table below only says which cells exist (collnet and
 * NVLS depend on the flags NCCL passes). Rules with one "default" half are skipped. */
static ncclResult_t getCollInfo_v2(void* ctx, ncclFunc_t coll, size_t nBytes, int collNetSupport,
                                   int nvlsSupport, int numPipeOps, int* algorithm, int* protocol,
                                   int* nChannels) {
  float t[CCLT_NUM_ALGOS][CCLT_NUM_PROTOS];
  int cell, ch;
  const plugin_ctx* pc = ctx;
  if (!pc) return ncclSuccess;
  ccl_capture_record(pc->capture, (int)coll, nBytes, numPipeOps, -1);
  const ccl_comm* rules = pc->arms ? ccl_arms_rules(pc->arms, (int)coll, nBytes, numPipeOps) : pc->rules;
  if (!rules) return ncclSuccess;
  for (int a = 0; a < CCLT_NUM_ALGOS; a++) {
    int ok = 1;
    if (a == CCLT_ALGO_COLLNET_DIRECT || a == CCLT_ALGO_COLLNET_CHAIN) ok = collNetSupport;
    if (a == CCLT_ALGO_NVLS || a == CCLT_ALGO_NVLS_TREE) ok = nvlsSupport;
    for (int p = 0; p < CCLT_NUM_PROTOS; p++) t[a][p] = ok ? 1.0f : CCLT_COST_IGNORE;
  }
  if (!ccl_comm_decide(rules, (int)coll, nBytes, numPipeOps, -1, &t[0][0], CCLT_NUM_ALGOS,
                       CCLT_NUM_PROTOS, 0, &cell, &ch))
    return ncclSuccess;
  if (cell >= 0 && algorithm && protocol) {
    *algorithm = cell / CCLT_NUM_PROTOS;
    *protocol = cell % CCLT_NUM_PROTOS;
  }
  if (ch > 0 && nChannels) *nChannels = ch;
  return ncclSuccess;
}

#define NAME "ccltune"

EXPORT const ncclTuner_v6_t ncclTunerPlugin_v6 = {
    .name = NAME, .init = init_v5, .getCollInfo = getCollInfo_v4, .finalize = finalize, .getChunkSize = NULL};
EXPORT const ncclTuner_v5_t ncclTunerPlugin_v5 = {
    .name = NAME, .init = init_v5, .getCollInfo = getCollInfo_v4, .finalize = finalize};
EXPORT const ncclTuner_v4_t ncclTunerPlugin_v4 = {
    .name = NAME, .init = init_v2, .getCollInfo = getCollInfo_v4, .destroy = finalize};
EXPORT const ncclTuner_v3_t ncclTunerPlugin_v3 = {
    .name = NAME, .init = init_v2, .getCollInfo = getCollInfo_v3, .destroy = finalize};
EXPORT const ncclTuner_v2_t ncclTunerPlugin_v2 = {
    .name = NAME, .init = init_v2, .getCollInfo = getCollInfo_v2, .destroy = finalize};
