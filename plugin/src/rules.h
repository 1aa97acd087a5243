/* Rule-file model shared by the parser, the platform filter and the matcher.
 * Python twin: src/ccltune/rules.py (same acceptance, same reason strings). */
#ifndef CCLTUNE_RULES_H
#define CCLTUNE_RULES_H

#include <stddef.h>
#include <stdint.h>

#include "ccltune_tuner_abi.h" /* CCLT_NUM_ALGOS, CCLT_NUM_PROTOS */

#define CCLT_MAX_LINE 1024      /* bytes per line, terminator excluded */
#define CCLT_MAX_CHANNELS 64
#define CCLT_DEFAULT (-2)       /* algo/proto "default": keep NCCL's choice */
#define CCLT_ANY (-1)           /* wildcard for nNodes, nRanks, numPipeOps, regBuff */
#define CCLT_NUM_COLL_IDS 5     /* broadcast, reduce, allgather, reducescatter, allreduce */

typedef struct {
  uint64_t minBytes, maxBytes; /* inclusive */
  int coll;                    /* 0..4 */
  int algo, proto;             /* id, or CCLT_DEFAULT */
  int channels;                /* -1/0: leave nChannels alone; 1..64: set it */
  int nNodes, nRanks, numPipeOps, regBuff; /* CCLT_ANY or a value */
  int section;                 /* index into sections, -1: before any platform line */
  int line;
} ccl_rule;

/* platform-section keys */
enum { CCLT_PK_GPU = 1, CCLT_PK_NVLDOMAINS = 2, CCLT_PK_NVLRANKS = 4, CCLT_PK_PARTITION = 8,
       CCLT_PK_NPS = 16 };

typedef struct {
  int valid;       /* 0: the platform line was rejected, its rules never apply */
  unsigned keys;   /* CCLT_PK_* bits present; 0 = any platform */
  char gpu[64];    /* lower-cased substring */
  int nvlDomains, nvlRanks;
  char partition[8], nps[8]; /* upper-cased */
  int line;
} ccl_section;

/* What is known of the machine and the communicator (unknown: "" or -1). */
typedef struct {
  char gpu[128];
  int nvlDomains, minRanksPerNvlDomain, maxRanksPerNvlDomain;
  char partition[16], nps[16];
} ccl_platform;

typedef void (*ccl_diag_fn)(void* user, int line, const char* reason);

typedef struct {
  ccl_rule* rules;
  int nRules, capRules;
  ccl_section* sections;
  int nSections, capSections;
  int nRejected;
} ccl_ruleset;

/* Parse a whole buffer (may hold NUL bytes). Calls diag for each rejected line.
 * Returns 0, or -1 when out of memory (the ruleset then holds what was parsed). */
int ccl_parse_buffer(const char* buf, size_t len, ccl_ruleset* rs, ccl_diag_fn diag, void* user);
/* The largest rule file read (docs/plugin.md): a larger one is refused, not parsed. */
#define CCLT_MAX_FILE_BYTES (16u << 20)
enum { CCLT_FILE_OK = 0, CCLT_FILE_ERRNO = -1, CCLT_FILE_NOT_REGULAR = -2, CCLT_FILE_TOO_LARGE = -3 };
/* Read a regular file of at most CCLT_MAX_FILE_BYTES and parse it. Opened non-blocking: a FIFO or
 * a device is refused at once, never waited on or read without end. Returns CCLT_FILE_OK or a
 * negative CCLT_FILE_* code (CCLT_FILE_ERRNO: errno set); ccl_file_problem says it in words. */
int ccl_parse_file(const char* path, ccl_ruleset* rs, ccl_diag_fn diag, void* user);
const char* ccl_file_problem(int rc);
/* The reader under ccl_parse_file (also of the arms file): a regular file of at most maxBytes into a
 * malloc'd buffer (*out, *outLen; NULL unless CCLT_FILE_OK; the caller frees it). */
int ccl_read_file(const char* path, size_t maxBytes, char** out, size_t* outLen);
void ccl_ruleset_free(ccl_ruleset* rs);

/* Name tables (index = id), defined once in parse.c; used by the parser, the capture writer and the
 * harnesses. ccl_coll_aliases: ccltune's name of a collective where it differs (all_reduce), else NULL. */
extern const char* const ccl_coll_names[CCLT_NUM_COLL_IDS];
extern const char* const ccl_coll_aliases[CCLT_NUM_COLL_IDS];
extern const char* const ccl_algo_names[CCLT_NUM_ALGOS];
extern const char* const ccl_proto_names[CCLT_NUM_PROTOS];

/* platform.c */
void ccl_platform_detect(ccl_platform* p); /* gpu/partition/nps from env + sysfs */
void ccl_platform_set_nvl(ccl_platform* p, size_t nRanks, size_t nNodes, const int* nvl3);
int ccl_section_matches(const ccl_section* s, const ccl_platform* p);
void ccl_platform_describe(const ccl_platform* p, char* out, size_t n);

/* match.c: rules of one communicator compiled per collective. Read-only after build. */
typedef struct ccl_comm ccl_comm;
ccl_comm* ccl_comm_build(const ccl_ruleset* rs, size_t nRanks, size_t nNodes,
                         const ccl_platform* p);
void ccl_comm_free(ccl_comm* c);
int ccl_comm_nrules(const ccl_comm* c);
/* First-match decision. table: contiguous [numAlgo][numProto] (NULL: no cell usable);
 * regBuff -1 = unknown (matches only wildcard rules); partialDefaults 0 skips rules
 * with exactly one of algo/proto "default" (v2 cannot express them).
 * Returns the winning rule's line (0: none); *cell = a*numProto+p to zero, or -1;
 * *channels = value to store, or 0 to leave nChannels alone. No allocation. */
int ccl_comm_decide(const ccl_comm* c, int coll, uint64_t nBytes, int numPipeOps, int regBuff,
                    const float* table, int numAlgo, int numProto, int partialDefaults,
                    int* cell, int* channels);

#endif
