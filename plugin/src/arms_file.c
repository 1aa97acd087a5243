/* The arms file (format: docs/plugin.md "In-run arms"), parsed strictly: the first line is
 * "# ccltune-arms 1"; then blank lines, lines starting with '#', and key=value lines, each key once:
 * seed, warmup_blocks, block_periods, period, max_blocks, log (all required), step_calls and nranks (optional),
 * and one line per arm:
 * "arm=NAME" or "arm=NAME rules=PATH" (PATH is the rest of the line). Any other line, a value out of
 * its range, a repeated key or name, or rules= on the first arm (arm 0 is NCCL's default) rejects the
 * whole file: the plugin then runs NCCL's default. Relative paths are taken from the arms file's folder. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arms.h"

#define LINE_MAX_BYTES 8192
#define ECHO 60

static int fail(char* why, size_t n, int line, const char* fmt, const char* a, const char* b) {
  char msg[512];
  snprintf(msg, sizeof msg, fmt, a, b);
  if (line > 0) snprintf(why, n, "line %d: %s", line, msg);
  else snprintf(why, n, "%s", msg);
  return -1;
}

/* s quoted for a message: at most ECHO bytes, other than printable ASCII as '?' */
static const char* quote(const char* s, char* out) {
  size_t i = 0;
  for (; s[i] && i < ECHO; i++) out[i] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
  if (s[i]) { memcpy(out + i, "...", 3); i += 3; }
  out[i] = '\0';
  return out;
}

static int parse_u64(const char* s, uint64_t* out) {
  uint64_t v = 0;
  if (!*s) return -1;
  for (; *s; s++) {
    if (*s < '0' || *s > '9') return -1;
    unsigned d = (unsigned)(*s - '0');
    if (v > (UINT64_MAX - d) / 10) return -1;
    v = v * 10 + d;
  }
  *out = v;
  return 0;
}

static int parse_int(const char* s, int lo, int hi, int* out) {
  uint64_t v;
  if (parse_u64(s, &v) || v < (uint64_t)lo || v > (uint64_t)hi) return -1;
  *out = (int)v;
  return 0;
}

static int good_name(const char* s) {
  if (!*s) return 0;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_' ||
          *s == '.' || *s == '-'))
      return 0;
  return 1;
}

/* base/path, or path when absolute; -1 when it does not fit in n bytes. */
static int join(const char* base, const char* path, char* out, size_t n) {
  int k = path[0] == '/' || !base[0] ? snprintf(out, n, "%s", path) : snprintf(out, n, "%s/%s", base, path);
  return k < 0 || (size_t)k >= n ? -1 : 0;
}

static char* trim(char* s) {
  while (*s == ' ' || *s == '\t') s++;
  size_t n = strlen(s);
  while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r')) s[--n] = '\0';
  return s;
}

enum { K_SEED, K_WARMUP, K_BLOCK_PERIODS, K_PERIOD, K_MAX_BLOCKS, K_LOG, K_STEP_CALLS, K_NRANKS, K_N };
#define K_REQUIRED K_STEP_CALLS /* keys before it are required */
static const char* const KEYS[K_N] = {"seed", "warmup_blocks", "block_periods", "period", "max_blocks", "log",
                                      "step_calls", "nranks"};

static int parse_arm(char* v, int line, const char* baseDir, ccl_arms_cfg* cfg, char* why, size_t n) {
  char q[ECHO + 4], path[4096];
  char* rules = NULL;
  char* sp = v + strcspn(v, " \t");
  if (*sp) {
    *sp = '\0';
    char* rest = trim(sp + 1);
    if (strncmp(rest, "rules=", 6) != 0)
      return fail(why, n, line, "arm %s: expected rules=PATH after the name, got '%s'", v, quote(rest, q));
    rules = trim(rest + 6);
    if (!*rules) return fail(why, n, line, "arm %s: rules= names no file%s", v, "");
  }
  if (!good_name(v) || strlen(v) > CCLT_ARMS_NAME_MAX)
    return fail(why, n, line, "arm name '%s' is not 1 to 64 of [A-Za-z0-9_.-]%s", quote(v, q), "");
  if (cfg->nArms == CCLT_ARMS_MAX) return fail(why, n, line, "more than %s arms%s", "32", "");
  for (int i = 0; i < cfg->nArms; i++)
    if (strcmp(cfg->names[i], v) == 0) return fail(why, n, line, "arm name '%s' given twice%s", v, "");
  if (rules && cfg->nArms == 0)
    return fail(why, n, line, "the first arm (%s) is arm 0, NCCL's default: it takes no rules=%s", v, "");
  if (rules) {
    if (join(baseDir, rules, path, sizeof path))
      return fail(why, n, line, "arm %s: the rules path is too long (%s)", v, quote(rules, q));
    cfg->rules[cfg->nArms] = strdup(path);
    if (!cfg->rules[cfg->nArms]) return fail(why, n, line, "out of memory%s%s", "", "");
  }
  strcpy(cfg->names[cfg->nArms], v);
  cfg->nArms++;
  return 0;
}

static int parse_line(char* s, int line, const char* baseDir, ccl_arms_cfg* cfg, int* seen, char* why, size_t n) {
  char q[ECHO + 4];
  char* eq = strchr(s, '=');
  if (!eq) return fail(why, n, line, "expected key=value, got '%s'%s", quote(s, q), "");
  *eq = '\0';
  char* k = trim(s);
  char* v = trim(eq + 1);
  if (strcmp(k, "arm") == 0) return parse_arm(v, line, baseDir, cfg, why, n);
  int key = -1;
  for (int i = 0; i < K_N; i++)
    if (strcmp(k, KEYS[i]) == 0) key = i;
  if (key < 0)
    return fail(why, n, line, "unknown key '%s' (keys: seed, warmup_blocks, block_periods, period, max_blocks, "
                "log, step_calls, nranks, arm)%s", quote(k, q), "");
  if (seen[key]) return fail(why, n, line, "%s given twice%s", k, "");
  seen[key] = 1;
  int bad = 0;
  switch (key) {
    case K_SEED: bad = parse_u64(v, &cfg->seed); break;
    case K_WARMUP: bad = parse_int(v, 0, CCLT_ARMS_MAX_WARMUP, &cfg->warmupBlocks); break;
    case K_BLOCK_PERIODS: bad = parse_int(v, 1, CCLT_ARMS_MAX_BLOCK_PERIODS, &cfg->blockPeriods); break;
    case K_MAX_BLOCKS: bad = parse_int(v, 0, CCLT_ARMS_MAX_BLOCKS, &cfg->maxBlocks); break;
    case K_STEP_CALLS: bad = parse_int(v, 0, CCLT_ARMS_MAX_PERIOD, &cfg->stepCalls); break;
    case K_NRANKS: bad = parse_int(v, 1, CCLT_ARMS_MAX_PERIOD, &cfg->onlyRanks); break;
    case K_PERIOD:
      if (strcmp(v, "auto") == 0) cfg->period = 0;
      else bad = parse_int(v, 1, CCLT_ARMS_MAX_PERIOD, &cfg->period);
      break;
    case K_LOG:
      if (!*v || join(baseDir, v, cfg->log, sizeof cfg->log))
        return fail(why, n, line, "log: '%s' is empty or longer than the %s bytes a folder may have", quote(v, q),
                    "3800");
      break;
    default: break;
  }
  if (bad) {
    static const char* const RANGE[K_N] = {"a whole number from 0 to 18446744073709551615", "a whole number from 0 to 100000",
                                           "a whole number from 1 to 100000", "auto or a whole number from 1 to 16777216",
                                           "a whole number from 0 to 100000", "",
                                           "a whole number from 0 to 16777216", "a whole number from 1 to 16777216"};
    return fail(why, n, line, "%s must be %s", k, RANGE[key]);
  }
  return 0;
}

int ccl_arms_parse_buffer(const char* buf, size_t len, const char* baseDir, ccl_arms_cfg* cfg, char* why,
                          size_t whyLen) {
  memset(cfg, 0, sizeof *cfg);
  int seen[K_N] = {0};
  char line[LINE_MAX_BYTES + 2];
  size_t at = 0;
  int lineno = 0;
  if (memchr(buf, '\0', len)) return fail(why, whyLen, 0, "holds a NUL byte: not a text file%s%s", "", "");
  while (at < len) {
    const char* end = memchr(buf + at, '\n', len - at);
    size_t n = end ? (size_t)(end - (buf + at)) : len - at;
    lineno++;
    if (n > LINE_MAX_BYTES) return fail(why, whyLen, lineno, "longer than %s bytes%s", "8192", "");
    memcpy(line, buf + at, n);
    line[n] = '\0';
    at += n + 1;
    char* s = trim(line);
    if (lineno == 1) {
      if (strcmp(s, "# ccltune-arms 1") != 0)
        return fail(why, whyLen, 1, "expected the header '# ccltune-arms 1'%s%s", "", "");
      continue;
    }
    if (!*s || *s == '#') continue;
    if (parse_line(s, lineno, baseDir, cfg, seen, why, whyLen)) return -1;
  }
  if (lineno == 0) return fail(why, whyLen, 0, "is empty: expected the header '# ccltune-arms 1'%s%s", "", "");
  for (int i = 0; i < K_REQUIRED; i++)
    if (!seen[i]) return fail(why, whyLen, 0, "%s= is missing%s", KEYS[i], "");
  if (cfg->nArms == 0) return fail(why, whyLen, 0, "no arm= line%s%s", "", "");
  return 0;
}

int ccl_arms_parse_file(const char* path, ccl_arms_cfg* cfg, char* why, size_t whyLen) {
  memset(cfg, 0, sizeof *cfg);
  char* buf;
  size_t len;
  int rc = ccl_read_file(path, CCLT_ARMS_MAX_FILE, &buf, &len);
  if (rc != CCLT_FILE_OK) {
    if (rc == CCLT_FILE_TOO_LARGE) snprintf(why, whyLen, "larger than %u bytes", CCLT_ARMS_MAX_FILE);
    else snprintf(why, whyLen, "%s", ccl_file_problem(rc));
    return -1;
  }
  char base[4096];
  const char* slash = strrchr(path, '/');
  size_t bl = slash ? (size_t)(slash - path) : 0;
  if (bl >= sizeof base) bl = 0;
  memcpy(base, path, bl);
  base[bl] = '\0';
  if (slash && bl == 0) strcpy(base, "/");
  rc = ccl_arms_parse_buffer(buf, len, base, cfg, why, whyLen);
  free(buf);
  if (rc) ccl_arms_cfg_free(cfg);
  return rc;
}

void ccl_arms_cfg_free(ccl_arms_cfg* cfg) {
  for (int i = 0; i < CCLT_ARMS_MAX; i++) {
    free(cfg->rules[i]);
    cfg->rules[i] = NULL;
  }
}
