/* ccltune's own description of the NCCL profiler-plugin ABI, versions 1 to 6.
 *
 * Written from the published ABI facts (field order and types, enum values) of NCCL's
 * plugins/profiler/example/nccl/profiler_v1.h .. profiler_v6.h, profiler.h and common.h,
 * not copied, so the plugin builds without CUDA or NCCL. Which NCCL release introduced
 * which version (from NCCL's git tags, src/plugin/profiler.cc):
 *   v1 2.23, v2 2.24, v3 2.26, v4 2.27, v5 2.28, v6 2.29; each release loads the newest
 *   it knows first and falls back to older ones.
 * Differences that matter here:
 *   - v1: func, datatype, algo and proto are uint8_t enum values, not strings;
 *   - v1..v3: init gets no communicator facts (commHash is in each coll/p2p descriptor),
 *     no logger, and no GPU timestamps; v3 added KernelCh events (channel id only);
 *   - v4: init gets commHash, nNodes, nranks, rank and the logger; KernelCh events carry
 *     the GPU globaltimer at start (descriptor) and at stop (recordEventState argument);
 *     p2p descriptors carry nChannels;
 *   - v5: the type field widens to uint64_t, API events precede coll/p2p, and init takes
 *     the commId second;
 *   - v6: adds copy-engine (CE) event descriptors at the end of the union; every other
 *     member keeps its v5 offset. */
#ifndef CCLTUNE_PROFILER_ABI_H
#define CCLTUNE_PROFILER_ABI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6
} ncclResult_t;

typedef enum {
  NCCL_LOG_NONE = 0,
  NCCL_LOG_VERSION = 1,
  NCCL_LOG_WARN = 2,
  NCCL_LOG_INFO = 3,
  NCCL_LOG_ABORT = 4,
  NCCL_LOG_TRACE = 5
} ncclDebugLogLevel;

#define CCLP_LOG_INIT 0x1ul
#define CCLP_LOG_ENV 0x80ul
#define CCLP_LOG_PROFILE 0x4000ul

typedef void (*ncclDebugLogger_t)(ncclDebugLogLevel level, unsigned long flags, const char* file,
                                  int line, const char* fmt, ...);

/* Event type bits (the descriptor's type and the activation mask). */
enum {
  ncclProfileGroup = 1 << 0,
  ncclProfileColl = 1 << 1,
  ncclProfileP2p = 1 << 2,
  ncclProfileProxyOp = 1 << 3,
  ncclProfileProxyStep = 1 << 4,
  ncclProfileProxyCtrl = 1 << 5,
  ncclProfileKernelCh = 1 << 6, /* v3+ */
  ncclProfileNetPlugin = 1 << 7,
  ncclProfileGroupApi = 1 << 8, /* v5+ */
  ncclProfileCollApi = 1 << 9,
  ncclProfileP2pApi = 1 << 10,
  ncclProfileKernelLaunch = 1 << 11,
  ncclProfileCeColl = 1 << 12, /* v6 */
  ncclProfileCeSync = 1 << 13,
  ncclProfileCeBatch = 1 << 14
};

/* One enum for every version; only the state this plugin acts on is named. */
typedef int ncclProfilerEventState_t;
#define ncclProfilerKernelChStop 22

/* ---- version 1 (NCCL 2.23) -------------------------------------------------------------- */
typedef struct {
  uint8_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      const char* name;
      uint64_t commHash;
      uint64_t seqNumber;
      uint8_t func; /* ncclFunc_t */
      void const* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      uint8_t datatype; /* ncclDataType_t */
      uint32_t op;
      size_t trafficBytes;
      uint8_t nMaxChannels;
      uint8_t nWarps;
      uint8_t algo;  /* NCCL_ALGO_* */
      uint8_t proto; /* NCCL_PROTO_* */
      int isCollnet;
      int isNvls;
    } coll;
    struct {
      const char* name;
      uint64_t commHash;
      uint8_t func;
      void* buff;
      uint8_t datatype;
      size_t count;
      int peer;
    } p2p;
    struct {
      pid_t pid;
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
  };
} ncclProfilerEventDescr_v1_t;

/* v1..v3 state arguments (this plugin never reads them). */
typedef union {
  struct {
    size_t transSize;
    int steps;
  } proxyOp;
  struct {
    int appendedProxyOps;
  } proxyCtrl;
} ncclProfilerEventStateArgs_v1_t;
typedef ncclProfilerEventStateArgs_v1_t ncclProfilerEventStateArgs_v2_t;
typedef ncclProfilerEventStateArgs_v1_t ncclProfilerEventStateArgs_v3_t;

/* ---- version 2 (NCCL 2.24): names become strings ---------------------------------------- */
typedef struct {
  uint8_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      const char* name;
      uint64_t commHash;
      uint64_t seqNumber;
      const char* func;
      void const* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      size_t trafficBytes;
      uint8_t nMaxChannels;
      uint8_t nWarps;
      const char* algo;
      const char* proto;
    } coll;
    struct {
      const char* name;
      uint64_t commHash;
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
    } p2p;
    struct {
      pid_t pid;
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
  };
} ncclProfilerEventDescr_v2_t;

/* ---- version 3 (NCCL 2.26): trafficBytes gone, KernelCh events (no timer) --------------- */
typedef struct {
  uint8_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      const char* name;
      uint64_t commHash;
      uint64_t seqNumber;
      const char* func;
      void const* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t nMaxChannels;
      uint8_t nWarps;
      const char* algo;
      const char* proto;
    } coll;
    struct {
      const char* name;
      uint64_t commHash;
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
    } p2p;
    struct {
      pid_t pid;
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
    struct {
      uint8_t channelId;
    } kernelCh;
    struct {
      int64_t id;
      void* data;
    } netPlugin;
  };
} ncclProfilerEventDescr_v3_t;

/* ---- version 4 (NCCL 2.27): comm facts at init, GPU timers on KernelCh ------------------ */
#define CCLP_V4_TASK_EVENTS                                                                    \
  struct {                                                                                     \
    pid_t pid;                                                                                 \
    uint8_t channelId;                                                                         \
    int peer;                                                                                  \
    int nSteps;                                                                                \
    int chunkSize;                                                                             \
    int isSend;                                                                                \
  } proxyOp;                                                                                   \
  struct {                                                                                     \
    int step;                                                                                  \
  } proxyStep;                                                                                 \
  struct {                                                                                     \
    uint8_t channelId;                                                                         \
    uint64_t pTimer; /* GPU globaltimer (ns) when the channel started */                       \
  } kernelCh;                                                                                  \
  struct {                                                                                     \
    int64_t id;                                                                                \
    void* data;                                                                                \
  } netPlugin;

typedef struct {
  uint8_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      uint64_t seqNumber;
      const char* func;
      void const* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t nChannels;
      uint8_t nWarps;
      const char* algo;
      const char* proto;
    } coll;
    struct {
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t nChannels;
    } p2p;
    CCLP_V4_TASK_EVENTS
  };
} ncclProfilerEventDescr_v4_t;

/* v4..v6 state arguments: the KernelCh stop carries the GPU globaltimer at the stop. */
typedef union {
  struct {
    size_t transSize;
  } proxyStep;
  struct {
    int appendedProxyOps;
  } proxyCtrl;
  struct {
    void* data;
  } netPlugin;
  struct {
    uint64_t pTimer;
  } kernelCh;
} ncclProfilerEventStateArgs_v4_t;
typedef ncclProfilerEventStateArgs_v4_t ncclProfilerEventStateArgs_v5_t;
typedef ncclProfilerEventStateArgs_v4_t ncclProfilerEventStateArgs_v6_t;

/* ---- version 5 (NCCL 2.28): 64-bit type, API events first in the union ------------------ */
#define CCLP_V5_UNION_HEAD                                                                     \
  struct {                                                                                     \
    bool graphCaptured;                                                                        \
    int groupDepth;                                                                            \
  } groupApi;                                                                                  \
  struct {                                                                                     \
    const char* func;                                                                          \
    size_t count;                                                                              \
    const char* datatype;                                                                      \
    int root;                                                                                  \
    void* stream;                                                                              \
    bool graphCaptured;                                                                        \
  } collApi;                                                                                   \
  struct {                                                                                     \
    const char* func;                                                                          \
    size_t count;                                                                              \
    const char* datatype;                                                                      \
    void* stream;                                                                              \
    bool graphCaptured;                                                                        \
  } p2pApi;                                                                                    \
  struct {                                                                                     \
    void* stream;                                                                              \
  } kernelLaunch;                                                                              \
  struct {                                                                                     \
    uint64_t seqNumber;                                                                        \
    const char* func;                                                                          \
    void const* sendBuff;                                                                      \
    void* recvBuff;                                                                            \
    size_t count;                                                                              \
    int root;                                                                                  \
    const char* datatype;                                                                      \
    uint8_t nChannels;                                                                         \
    uint8_t nWarps;                                                                            \
    const char* algo;                                                                          \
    const char* proto;                                                                         \
    void* parentGroup;                                                                         \
  } coll;                                                                                      \
  struct {                                                                                     \
    const char* func;                                                                          \
    void* buff;                                                                                \
    const char* datatype;                                                                      \
    size_t count;                                                                              \
    int peer;                                                                                  \
    uint8_t nChannels;                                                                         \
    void* parentGroup;                                                                         \
  } p2p;                                                                                       \
  CCLP_V4_TASK_EVENTS

typedef struct {
  uint64_t type;
  void* parentObj;
  int rank;
  union {
    CCLP_V5_UNION_HEAD
  };
} ncclProfilerEventDescr_v5_t;

/* ---- version 6 (NCCL 2.29): CE descriptors appended -------------------------------------- */
typedef struct {
  uint64_t type;
  void* parentObj;
  int rank;
  union {
    CCLP_V5_UNION_HEAD
    struct {
      uint64_t seqNumber;
      const char* func;
      void const* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      const char* syncStrategy;
      bool intraBatchSync;
      uint32_t batchSize;
      uint32_t numBatches;
      uint32_t ceSeqNum;
      void* stream;
    } ceColl;
    struct {
      bool isComplete;
      int nRanks;
    } ceCollSync;
    struct {
      int numOps;
      size_t totalBytes;
      bool useIntraSync;
    } ceCollBatch;
  };
} ncclProfilerEventDescr_v6_t;

/* ---- the exported structs ----------------------------------------------------------------- */
#define CCLP_PLUGIN_STRUCT(V, INIT_ARGS)                                                       \
  typedef struct {                                                                             \
    const char* name;                                                                          \
    ncclResult_t (*init) INIT_ARGS;                                                            \
    ncclResult_t (*startEvent)(void* context, void** eHandle, ncclProfilerEventDescr_v##V##_t* eDescr); \
    ncclResult_t (*stopEvent)(void* eHandle);                                                  \
    ncclResult_t (*recordEventState)(void* eHandle, ncclProfilerEventState_t eState,          \
                                     ncclProfilerEventStateArgs_v##V##_t* eStateArgs);         \
    ncclResult_t (*finalize)(void* context);                                                   \
  } ncclProfiler_v##V##_t;

#define CCLP_INIT_V1 (void** context, int* eActivationMask)
#define CCLP_INIT_V4                                                                           \
  (void** context, int* eActivationMask, const char* commName, uint64_t commHash, int nNodes,  \
   int nranks, int rank, ncclDebugLogger_t logfn)
#define CCLP_INIT_V5                                                                           \
  (void** context, uint64_t commId, int* eActivationMask, const char* commName, int nNodes,    \
   int nranks, int rank, ncclDebugLogger_t logfn)

CCLP_PLUGIN_STRUCT(1, CCLP_INIT_V1)
CCLP_PLUGIN_STRUCT(2, CCLP_INIT_V1)
CCLP_PLUGIN_STRUCT(3, CCLP_INIT_V1)
CCLP_PLUGIN_STRUCT(4, CCLP_INIT_V4)
CCLP_PLUGIN_STRUCT(5, CCLP_INIT_V5)
CCLP_PLUGIN_STRUCT(6, CCLP_INIT_V5)

/* The v1 enum values (NCCL 2.23's ncclFunc_t, ncclDataType_t, NCCL_ALGO_*, NCCL_PROTO_*),
 * in the order of their numbers; the names are what later versions pass as strings. */
#define CCLP_V1_FUNC_NAMES "Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce", \
                           "SendRecv", "Send", "Recv"
#define CCLP_V1_DTYPE_NAMES "ncclInt8", "ncclUint8", "ncclInt32", "ncclUint32", "ncclInt64", \
                            "ncclUint64", "ncclFloat16", "ncclFloat32", "ncclFloat64", "ncclBfloat16", \
                            "ncclFloat8e4m3", "ncclFloat8e5m2"
#define CCLP_V1_ALGO_NAMES "TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT"
#define CCLP_V1_PROTO_NAMES "LL", "LL128", "SIMPLE"

#endif
