/* One file per communicator per process, written whole (temp file in the same folder, then
 * rename) at finalize, or at process exit for a communicator never finalized. The capture
 * (capture.c) and the in-run arm log (arms.c) are both written through it; it depends on
 * nothing of the tuner but NCCL's logger type, so the profiler plugin can share it.
 * File name: DIR/ccltune-<kind>.<host>.<pid>.<commId as 16 hex | nocommid>.<seq>.txt
 * Not on the hot path: open, close and the exit writer lock and allocate. */
#ifndef CCLTUNE_COMMFILE_H
#define CCLTUNE_COMMFILE_H

#include <stdint.h>
#include <stdio.h>

#include "ccltune_tuner_abi.h" /* ncclDebugLogger_t */

#define CCLT_COMMFILE_DIR_MAX 3800 /* bytes of a folder name; the file name needs the rest of PATH_MAX */

typedef struct ccl_commfile ccl_commfile;

/* Writes the body of the file (everything after nothing: the writer adds no line of its own).
 * closedBy: "finalize" or "exit". Returns 0, or -1 with errno set. Must not call back into the
 * live list. */
typedef int (*ccl_commfile_body)(FILE* f, void* owner, const char* closedBy);

struct ccl_commfile {
  ccl_commfile* next; /* live list, for the exit writer */
  const char* kind;   /* "capture", "arms": a static string */
  ccl_commfile_body body;
  void* owner;
  uint64_t commId;
  int hasCommId;
  unsigned seq;
  ncclDebugLogger_t logger;
  char dir[CCLT_COMMFILE_DIR_MAX + 1];
  char host[256];
};

/* The next communicator sequence number of this process (0, 1, ...): the <seq> of its files. */
unsigned ccl_commfile_next_seq(void);

/* Fills f, creates DIR when missing (one level), checks that it can be written, and puts f on the
 * live list. var names where DIR came from in the messages ("CCLTUNE_CAPTURE"). Returns 0, or -1
 * after one WARN (f is then not listed and nothing is to be closed). */
int ccl_commfile_open(ccl_commfile* f, const char* kind, const char* var, const char* dir, uint64_t commId,
                      int hasCommId, unsigned seq, ncclDebugLogger_t logger, ccl_commfile_body body, void* owner);

/* Takes f off the live list and writes its file ("finalize"). Returns 0, or -1 after one WARN. */
int ccl_commfile_close(ccl_commfile* f);

#endif
