/* The per-communicator file writer shared by the capture and the arm log (commfile.h). */
#include "commfile.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LOG_FLAGS (NCCL_TUNING | NCCL_INIT)
#define LOG(logger, level, ...) \
  do { if (logger) (logger)(level, LOG_FLAGS, __FILE__, __LINE__, __VA_ARGS__); } while (0)

static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static ccl_commfile* live;
static int exit_hook;
static _Atomic unsigned next_seq;

unsigned ccl_commfile_next_seq(void) { return atomic_fetch_add(&next_seq, 1); }

static void sanitize(char* s) {
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '.' ||
          *s == '-' || *s == '_'))
      *s = '_';
}

static void write_at_exit(void);

int ccl_commfile_open(ccl_commfile* f, const char* kind, const char* var, const char* dir, uint64_t commId,
                      int hasCommId, unsigned seq, ncclDebugLogger_t logger, ccl_commfile_body body, void* owner) {
  if (strlen(dir) > CCLT_COMMFILE_DIR_MAX) {
    LOG(logger, NCCL_LOG_WARN, "ccltune tuner: %s is too long (%zu bytes, at most %d); no %s file", var,
        strlen(dir), CCLT_COMMFILE_DIR_MAX, kind);
    return -1;
  }
  if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
    LOG(logger, NCCL_LOG_WARN, "ccltune tuner: %s=%s: cannot create it (%s); no %s file", var, dir, strerror(errno),
        kind);
    return -1;
  }
  if (access(dir, W_OK | X_OK) != 0) {
    LOG(logger, NCCL_LOG_WARN, "ccltune tuner: %s=%s: not a writable directory (%s); no %s file", var, dir,
        strerror(errno), kind);
    return -1;
  }
  f->kind = kind;
  f->body = body;
  f->owner = owner;
  f->commId = commId;
  f->hasCommId = hasCommId;
  f->seq = seq;
  f->logger = logger;
  strcpy(f->dir, dir);
  if (gethostname(f->host, sizeof f->host - 1) != 0 || !f->host[0]) strcpy(f->host, "unknown");
  f->host[sizeof f->host - 1] = '\0';
  sanitize(f->host);
  pthread_mutex_lock(&live_lock);
  if (!exit_hook) exit_hook = atexit(write_at_exit) == 0;
  f->next = live;
  live = f;
  pthread_mutex_unlock(&live_lock);
  return 0;
}

/* Returns 0 or -1 (errno-style reason in why). */
static int write_file(ccl_commfile* c, const char* closedBy, const char** why) {
  char name[512], path[sizeof c->dir + sizeof name + 2], tmp[sizeof path + 8];
  if (c->hasCommId)
    snprintf(name, sizeof name, "ccltune-%s.%s.%ld.%016llx.%u.txt", c->kind, c->host, (long)getpid(),
             (unsigned long long)c->commId, c->seq);
  else
    snprintf(name, sizeof name, "ccltune-%s.%s.%ld.nocommid.%u.txt", c->kind, c->host, (long)getpid(), c->seq);
  snprintf(path, sizeof path, "%s/%s", c->dir, name);
  snprintf(tmp, sizeof tmp, "%s/.%s.XXXXXX", c->dir, name);
  int fd = mkstemp(tmp);
  if (fd < 0) { *why = strerror(errno); return -1; }
  FILE* f = fdopen(fd, "w");
  if (!f) { *why = strerror(errno); close(fd); unlink(tmp); return -1; }
  errno = 0;
  int bad = c->body(f, c->owner, closedBy) != 0;
  int err = errno;
  if (!bad && (fflush(f) != 0 || fsync(fd) != 0)) { bad = 1; err = errno; }
  if (fclose(f) != 0 && !bad) { bad = 1; err = errno; }
  if (!bad && rename(tmp, path) != 0) { bad = 1; err = errno; }
  if (bad) { unlink(tmp); *why = strerror(err ? err : EIO); return -1; }
  return 0;
}

int ccl_commfile_close(ccl_commfile* f) {
  pthread_mutex_lock(&live_lock);
  for (ccl_commfile** p = &live; *p; p = &(*p)->next)
    if (*p == f) { *p = f->next; break; }
  pthread_mutex_unlock(&live_lock);
  const char* why = "";
  int rc = write_file(f, "finalize", &why);
  if (rc) LOG(f->logger, NCCL_LOG_WARN, "ccltune tuner: cannot write the %s file into %s: %s", f->kind, f->dir, why);
  return rc;
}

/* Communicators never finalized (common: a job exits without destroying its process group).
 * NCCL's logger may be gone by now, so failures go to stderr. The owners stay allocated and
 * listed: other threads may still be inside getCollInfo, and a finalize that comes later still
 * writes its (complete) file over this one. */
static void write_at_exit(void) {
  pthread_mutex_lock(&live_lock);
  for (ccl_commfile* c = live; c; c = c->next) {
    const char* why = "";
    if (write_file(c, "exit", &why)) fprintf(stderr, "ccltune tuner: cannot write the %s file into %s: %s\n", c->kind, c->dir, why);
  }
  pthread_mutex_unlock(&live_lock);
}
