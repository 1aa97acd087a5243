/* ccltune's own description of the NCCL/RCCL tuner-plugin ABI (v2..v6).
 *
 * Written from the published ABI facts (struct layouts, enum values), not copied from
 * NCCL, so the plugin builds without CUDA or NCCL headers. Layout notes that matter:
 *  - the cost table is a contiguous float[numAlgo][numProto] passed as float**;
 *  - ncclTunerConstants_v5_t includes perChMaxNVLSTreeBws (1152 bytes; the example
 *    plugin's fork omits it);
 *  - RCCL may pass numAlgo == 8, so never assume CCLT_NUM_ALGOS at call time. */
#ifndef CCLTUNE_TUNER_ABI_H
#define CCLTUNE_TUNER_ABI_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclTimeout = 8,
  ncclNumResults = 9
} ncclResult_t;

/* Only 0..4 reach a tuner; the rest are listed so the enum is int-sized and complete. */
typedef enum {
  ncclFuncBroadcast = 0,
  ncclFuncReduce = 1,
  ncclFuncAllGather = 2,
  ncclFuncReduceScatter = 3,
  ncclFuncAllReduce = 4,
  ncclFuncSendRecv = 5,
  ncclFuncSend = 6,
  ncclFuncRecv = 7,
  ncclFuncAlltoAll = 8,
  ncclFuncScatter = 9,
  ncclFuncGather = 10,
  ncclFuncAllGatherV = 11,
  ncclNumFuncs = 15
} ncclFunc_t;

#define CCLT_NUM_COLLS 5

#define CCLT_ALGO_UNDEF (-1)
#define CCLT_ALGO_TREE 0
#define CCLT_ALGO_RING 1
#define CCLT_ALGO_COLLNET_DIRECT 2
#define CCLT_ALGO_COLLNET_CHAIN 3
#define CCLT_ALGO_NVLS 4
#define CCLT_ALGO_NVLS_TREE 5
#define CCLT_ALGO_PAT 6
#define CCLT_NUM_ALGOS 7

#define CCLT_PROTO_UNDEF (-1)
#define CCLT_PROTO_LL 0
#define CCLT_PROTO_LL128 1
#define CCLT_PROTO_SIMPLE 2
#define CCLT_NUM_PROTOS 3

/* A cost-table cell NCCL does not consider. */
#define CCLT_COST_IGNORE (-1.0f)

typedef enum {
  NCCL_LOG_NONE = 0,
  NCCL_LOG_VERSION = 1,
  NCCL_LOG_WARN = 2,
  NCCL_LOG_INFO = 3,
  NCCL_LOG_ABORT = 4,
  NCCL_LOG_TRACE = 5
} ncclDebugLogLevel;

typedef enum {
  NCCL_INIT = 0x1,
  NCCL_COLL = 0x2,
  NCCL_P2P = 0x4,
  NCCL_SHM = 0x8,
  NCCL_NET = 0x10,
  NCCL_GRAPH = 0x20,
  NCCL_TUNING = 0x40,
  NCCL_ENV = 0x80,
  NCCL_ALLOC = 0x100,
  NCCL_CALL = 0x200,
  NCCL_PROXY = 0x400,
  NCCL_NVLS = 0x800,
  NCCL_BOOTSTRAP = 0x1000,
  NCCL_REG = 0x2000,
  NCCL_PROFILE = 0x4000,
  NCCL_RAS = 0x8000,
  NCCL_ALL = ~0
} ncclDebugLogSubSys;

typedef void (*ncclDebugLogger_t)(ncclDebugLogLevel level, unsigned long flags, const char* file,
                                  int line, const char* fmt, ...);

/* v5 == v6, 12 bytes. NCCL fills {nNodes, minLocalRanks, maxLocalRanks}. */
typedef struct {
  int nNvlDomains;
  int minRanksPerNvlDomain;
  int maxRanksPerNvlDomain;
} ncclNvlDomainInfo_v5_t;
typedef ncclNvlDomainInfo_v5_t ncclNvlDomainInfo_v6_t;

#define CCLT_V5_NUM_ALGOS 7
#define CCLT_V5_NUM_PROTOS 3
#define CCLT_V5_NUM_HW_LINKS 3
#define CCLT_V5_NUM_COMPCAPS 4
#define CCLT_V5_NUM_SCALES 3

/* v5 == v6, 1152 bytes; µs latencies and GB/s bandwidths feeding NCCL's own model.
 * ccltune never writes it. */
typedef struct {
  double baseLatencies[CCLT_V5_NUM_ALGOS][CCLT_V5_NUM_PROTOS];
  double hwLatencies[CCLT_V5_NUM_HW_LINKS][CCLT_V5_NUM_ALGOS][CCLT_V5_NUM_PROTOS];
  double llMaxBws[CCLT_V5_NUM_COMPCAPS][CCLT_V5_NUM_SCALES];
  double perChMaxRingLL128Bws[CCLT_V5_NUM_COMPCAPS][CCLT_V5_NUM_SCALES];
  double perChMaxTreeLL128Bws[CCLT_V5_NUM_COMPCAPS][CCLT_V5_NUM_SCALES];
  double perChMaxTreeBws[CCLT_V5_NUM_COMPCAPS][CCLT_V5_NUM_SCALES];
  double perChMaxNVLSTreeBws[CCLT_V5_NUM_COMPCAPS][CCLT_V5_NUM_SCALES];
} ncclTunerConstants_v5_t;
typedef ncclTunerConstants_v5_t ncclTunerConstants_v6_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void** context);
  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes, int collNetSupport,
                              int nvlsSupport, int numPipeOps, int* algorithm, int* protocol,
                              int* nChannels);
  ncclResult_t (*destroy)(void* context);
} ncclTuner_v2_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void** context);
  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                              float** collCostTable, int numAlgo, int numProto, int* nChannels);
  ncclResult_t (*destroy)(void* context);
} ncclTuner_v3_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void** context);
  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                              float** collCostTable, int numAlgo, int numProto, int regBuff,
                              int* nChannels);
  ncclResult_t (*destroy)(void* context);
} ncclTuner_v4_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** context, uint64_t commId, size_t nRanks, size_t nNodes,
                       ncclDebugLogger_t logFunction, ncclNvlDomainInfo_v5_t* nvlDomainInfo,
                       ncclTunerConstants_v5_t* constants);
  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                              float** collCostTable, int numAlgo, int numProto, int regBuff,
                              int* nChannels);
  ncclResult_t (*finalize)(void* context);
} ncclTuner_v5_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** context, uint64_t commId, size_t nRanks, size_t nNodes,
                       ncclDebugLogger_t logFunction, ncclNvlDomainInfo_v6_t* nvlDomainInfo,
                       ncclTunerConstants_v6_t* constants);
  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                              float** collCostTable, int numAlgo, int numProto, int regBuff,
                              int* nChannels);
  ncclResult_t (*finalize)(void* context);
  /* optional (may be NULL): adjust the chunk size NCCL computed */
  ncclResult_t (*getChunkSize)(void* context, ncclFunc_t collType, size_t nBytes, int algo,
                               int proto, int nChannels, size_t* chunkSize);
} ncclTuner_v6_t;

#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
_Static_assert(sizeof(ncclNvlDomainInfo_v5_t) == 12, "nvlDomainInfo is 12 bytes");
_Static_assert(sizeof(ncclTunerConstants_v5_t) == 1152, "tuner constants v5 are 1152 bytes");
_Static_assert(sizeof(void*) != 8 || sizeof(ncclTuner_v6_t) == 40, "v6 struct is 40 bytes");
#endif

#endif /* CCLTUNE_TUNER_ABI_H */
