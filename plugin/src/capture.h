/* Workload capture: with CCLTUNE_CAPTURE=DIR the plugin counts every getCollInfo call of a
 * communicator by (collective, nBytes, numPipeOps, regBuff) and writes one file per
 * communicator into DIR at finalize, or at process exit for a communicator never finalized.
 * File format: docs/workload.md ("Capture files"); reader: src/ccltune/workload/capture.py. */
#ifndef CCLTUNE_CAPTURE_H
#define CCLTUNE_CAPTURE_H

#include <stddef.h>
#include <stdint.h>

#include "ccltune_tuner_abi.h"

#define CCLT_CAPTURE_SLOTS 4096 /* distinct keys per communicator; a power of two */
#define CCLT_CAPTURE_PROBES 32  /* probes before a call is counted as overflow */

typedef struct ccl_capture ccl_capture;

/* NULL when CCLTUNE_CAPTURE is unset or empty. On a directory that cannot be written, or
 * out of memory, logs a WARN and returns NULL (capture is best effort, never fatal).
 * hasCommId 0: the ABI (v2..v4) gives no communicator id; the file name then carries only
 * the per-process sequence number seq (ccl_commfile_next_seq). */
ccl_capture* ccl_capture_open(uint64_t commId, int hasCommId, unsigned seq, size_t nRanks, size_t nNodes,
                              ncclDebugLogger_t logger);

/* Hot path: no allocation, lock, system call or log. Lock-free, safe from any thread.
 * regBuff -1 = unknown (v2, v3). */
void ccl_capture_record(ccl_capture* c, int coll, uint64_t nBytes, int numPipeOps, int regBuff);

/* Writes the file (temp + rename), then frees. Returns 0, or -1 when the file could not be
 * written (a WARN is logged). NULL is a no-op. */
int ccl_capture_close(ccl_capture* c);

#endif
