/* Prints the offsets and sizes of the profiler ABI structs as the plugin's header declares them.
 * tests/plugin/test_profiler_harness.py compares the output with tests/abi_layout.txt, which is
 * the same program compiled against NCCL's own plugins/profiler/example/nccl headers (NCCL
 * master 5067397c, x86_64 Linux, gcc): any field moved by a header edit fails the test. */
#include "ccltune_profiler_abi.h"
#include <stdio.h>
#include <stddef.h>
#define O(T, F) printf("%s.%s %zu\n", #T, #F, offsetof(T, F))
#define S(T) printf("sizeof %s %zu\n", #T, sizeof(T))
static void dump(void) {
  S(ncclProfilerEventDescr_v1_t); O(ncclProfilerEventDescr_v1_t, coll.commHash); O(ncclProfilerEventDescr_v1_t, coll.seqNumber); O(ncclProfilerEventDescr_v1_t, coll.func); O(ncclProfilerEventDescr_v1_t, coll.count); O(ncclProfilerEventDescr_v1_t, coll.datatype); O(ncclProfilerEventDescr_v1_t, coll.nMaxChannels); O(ncclProfilerEventDescr_v1_t, coll.nWarps); O(ncclProfilerEventDescr_v1_t, coll.algo); O(ncclProfilerEventDescr_v1_t, coll.proto); O(ncclProfilerEventDescr_v1_t, p2p.commHash); O(ncclProfilerEventDescr_v1_t, p2p.func); O(ncclProfilerEventDescr_v1_t, p2p.datatype); O(ncclProfilerEventDescr_v1_t, p2p.count); O(ncclProfilerEventDescr_v1_t, p2p.peer); O(ncclProfilerEventDescr_v1_t, rank);
  S(ncclProfilerEventDescr_v2_t); O(ncclProfilerEventDescr_v2_t, coll.commHash); O(ncclProfilerEventDescr_v2_t, coll.seqNumber); O(ncclProfilerEventDescr_v2_t, coll.func); O(ncclProfilerEventDescr_v2_t, coll.count); O(ncclProfilerEventDescr_v2_t, coll.datatype); O(ncclProfilerEventDescr_v2_t, coll.nMaxChannels); O(ncclProfilerEventDescr_v2_t, coll.nWarps); O(ncclProfilerEventDescr_v2_t, coll.algo); O(ncclProfilerEventDescr_v2_t, coll.proto); O(ncclProfilerEventDescr_v2_t, p2p.func); O(ncclProfilerEventDescr_v2_t, p2p.datatype); O(ncclProfilerEventDescr_v2_t, p2p.count); O(ncclProfilerEventDescr_v2_t, p2p.peer);
  S(ncclProfilerEventDescr_v3_t); O(ncclProfilerEventDescr_v3_t, coll.commHash); O(ncclProfilerEventDescr_v3_t, coll.seqNumber); O(ncclProfilerEventDescr_v3_t, coll.func); O(ncclProfilerEventDescr_v3_t, coll.count); O(ncclProfilerEventDescr_v3_t, coll.datatype); O(ncclProfilerEventDescr_v3_t, coll.nMaxChannels); O(ncclProfilerEventDescr_v3_t, coll.nWarps); O(ncclProfilerEventDescr_v3_t, coll.algo); O(ncclProfilerEventDescr_v3_t, coll.proto); O(ncclProfilerEventDescr_v3_t, p2p.func); O(ncclProfilerEventDescr_v3_t, p2p.peer); O(ncclProfilerEventDescr_v3_t, kernelCh.channelId);
  S(ncclProfilerEventDescr_v4_t); O(ncclProfilerEventDescr_v4_t, coll.seqNumber); O(ncclProfilerEventDescr_v4_t, coll.func); O(ncclProfilerEventDescr_v4_t, coll.count); O(ncclProfilerEventDescr_v4_t, coll.datatype); O(ncclProfilerEventDescr_v4_t, coll.nChannels); O(ncclProfilerEventDescr_v4_t, coll.nWarps); O(ncclProfilerEventDescr_v4_t, coll.algo); O(ncclProfilerEventDescr_v4_t, coll.proto); O(ncclProfilerEventDescr_v4_t, p2p.func); O(ncclProfilerEventDescr_v4_t, p2p.peer); O(ncclProfilerEventDescr_v4_t, p2p.nChannels); O(ncclProfilerEventDescr_v4_t, kernelCh.channelId); O(ncclProfilerEventDescr_v4_t, kernelCh.pTimer);
  S(ncclProfilerEventDescr_v5_t); O(ncclProfilerEventDescr_v5_t, parentObj); O(ncclProfilerEventDescr_v5_t, rank); O(ncclProfilerEventDescr_v5_t, coll.seqNumber); O(ncclProfilerEventDescr_v5_t, coll.func); O(ncclProfilerEventDescr_v5_t, coll.count); O(ncclProfilerEventDescr_v5_t, coll.datatype); O(ncclProfilerEventDescr_v5_t, coll.nChannels); O(ncclProfilerEventDescr_v5_t, coll.nWarps); O(ncclProfilerEventDescr_v5_t, coll.algo); O(ncclProfilerEventDescr_v5_t, coll.proto); O(ncclProfilerEventDescr_v5_t, coll.parentGroup); O(ncclProfilerEventDescr_v5_t, p2p.func); O(ncclProfilerEventDescr_v5_t, p2p.peer); O(ncclProfilerEventDescr_v5_t, p2p.nChannels); O(ncclProfilerEventDescr_v5_t, kernelCh.channelId); O(ncclProfilerEventDescr_v5_t, kernelCh.pTimer);
  S(ncclProfilerEventDescr_v6_t); O(ncclProfilerEventDescr_v6_t, coll.seqNumber); O(ncclProfilerEventDescr_v6_t, coll.nChannels); O(ncclProfilerEventDescr_v6_t, coll.proto); O(ncclProfilerEventDescr_v6_t, p2p.nChannels); O(ncclProfilerEventDescr_v6_t, kernelCh.pTimer); O(ncclProfilerEventDescr_v6_t, ceColl.stream); O(ncclProfilerEventDescr_v6_t, ceCollBatch.useIntraSync);
  S(ncclProfilerEventStateArgs_v1_t); S(ncclProfilerEventStateArgs_v4_t); S(ncclProfilerEventStateArgs_v5_t);
  S(ncclProfiler_v1_t); S(ncclProfiler_v4_t); O(ncclProfiler_v5_t, finalize); O(ncclProfiler_v6_t, recordEventState);
}
int main(void) {
  dump();
  return 0;
}
