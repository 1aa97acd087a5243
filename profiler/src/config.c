/* The environment (read at each communicator's init, never on the hot path) and logging.
 * A bad value is one warning line through NCCL's logger (stderr before v4, which has none)
 * and the documented default; never a failure of NCCL's init. */
#include "prof.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

uint64_t cclp_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void cclp_log(ncclDebugLogger_t logger, ncclDebugLogLevel level, const char* fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (logger) logger(level, CCLP_LOG_INIT | CCLP_LOG_ENV | CCLP_LOG_PROFILE, __FILE__, __LINE__, "%s", msg);
  else if (level == NCCL_LOG_WARN) fprintf(stderr, "NCCL WARN %s\n", msg);
}

/* An integer in [lo, hi] from variable name, or def with a warning. */
static uint64_t env_uint(const char* name, uint64_t def, uint64_t lo, uint64_t hi, ncclDebugLogger_t logger) {
  const char* s = getenv(name);
  if (!s || !*s) return def;
  char* end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || *end || s[0] == '-' || s[0] == '+' || v < lo || v > hi) {
    cclp_log(logger, NCCL_LOG_WARN, "ccltune profiler: %s='%.64s' is not an integer in %llu..%llu; using %llu",
             name, s, (unsigned long long)lo, (unsigned long long)hi, (unsigned long long)def);
    return def;
  }
  return v;
}

int cclp_read_config(cclp_config* cfg, ncclDebugLogger_t logger) {
  cfg->dir = getenv("CCLTUNE_PROFILE");
  if (!cfg->dir || !*cfg->dir) {
    cfg->dir = NULL;
    return 0;
  }
  cfg->every = env_uint("CCLTUNE_PROFILE_EVERY", 1, 1, CCLP_EVERY_MAX, logger);
  cfg->calls = (uint32_t)env_uint("CCLTUNE_PROFILE_CALLS", CCLP_CALLS_DEFAULT, 0, CCLP_CALLS_MAX, logger);
  return 1;
}
