/* Rule-file parser: a buffer in, rules + platform sections + diagnostics out.
 * Every rejection reason here has an identical twin in src/ccltune/rules.py. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rules.h"

/* The names, once (index = id; the Python twin: rules.COLLECTIVES, rules.ALGORITHMS, rules.PROTOCOLS,
 * checked equal by tests/plugin/test_golden.py). The parser's lookups are derived from them. */
const char* const ccl_coll_names[CCLT_NUM_COLL_IDS] = {"broadcast", "reduce", "allgather", "reducescatter",
                                                       "allreduce"};
/* ccltune's name of each collective (collectives/ registry) where it differs, accepted as an alias */
const char* const ccl_coll_aliases[CCLT_NUM_COLL_IDS] = {NULL, NULL, "all_gather", "reduce_scatter", "all_reduce"};
const char* const ccl_algo_names[CCLT_NUM_ALGOS] = {"tree", "ring", "collnet_direct", "collnet_chain",
                                                    "nvls", "nvls_tree", "pat"};
const char* const ccl_proto_names[CCLT_NUM_PROTOS] = {"ll", "ll128", "simple"};

#define ECHO_MAX 40 /* bytes of an offending value quoted in a reason */
#define REASON_MAX 512

static char lower(char c) { return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c; }
static char upper(char c) { return (c >= 'a' && c <= 'z') ? (char)(c - 'a' + 'A') : c; }

static int ieq(const char* a, const char* b) {
  for (; *a && *b; a++, b++)
    if (lower(*a) != lower(*b)) return 0;
  return *a == *b;
}

/* s equals name with name's underscores left out (case-insensitive): NCCL_ALGO's spelling of an algorithm
 * (collnetdirect, nvlstree), as rules.nccl_spelling derives it. */
static int ieq_nccl_spelling(const char* s, const char* name) {
  for (;; s++, name++) {
    while (*name == '_') name++;
    if (lower(*s) != lower(*name)) return 0;
    if (!*s) return 1;
  }
}

/* The id of s among names[0..n) (or aliases[i], or NCCL's spelling when nccl_spelling), or "default"
 * (CCLT_DEFAULT) when with_default. 1 when found. */
static int lookup(const char* const* names, const char* const* aliases, int n, int nccl_spelling,
                  int with_default, const char* s, int* id) {
  for (int i = 0; i < n; i++)
    if (ieq(names[i], s) || (aliases && aliases[i] && ieq(aliases[i], s)) || (nccl_spelling && ieq_nccl_spelling(s, names[i]))) {
      *id = i;
      return 1;
    }
  if (with_default && ieq("default", s)) { *id = CCLT_DEFAULT; return 1; }
  return 0;
}

/* Quote a value for a reason: at most ECHO_MAX bytes, non-printable bytes as \xNN. */
static void echo(const char* s, char* out, size_t n) {
  size_t len = strlen(s), k = 0;
  for (size_t i = 0; i < len && i < ECHO_MAX && k + 5 < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c < 0x20 || c > 0x7e) k += (size_t)snprintf(out + k, n - k, "\\x%02x", c);
    else out[k++] = (char)c;
  }
  if (len > ECHO_MAX && k + 4 < n) { memcpy(out + k, "...", 3); k += 3; }
  out[k] = '\0';
}

static char* trim(char* s) {
  while (*s == ' ' || *s == '\t') s++;
  size_t n = strlen(s);
  while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t')) s[--n] = '\0';
  return s;
}

/* Size: digits, optional K/M/G/T, optional B. 0 ok, -1 bad syntax, -2 overflow. */
static int parse_size(const char* s, uint64_t* out) {
  uint64_t v = 0;
  const char* p = s;
  if (*p < '0' || *p > '9') return -1;
  for (; *p >= '0' && *p <= '9'; p++) {
    unsigned d = (unsigned)(*p - '0');
    if (v > (UINT64_MAX - d) / 10) {
      while (*p >= '0' && *p <= '9') p++; /* keep checking the syntax first */
      const char* q = p;
      if (*q && strchr("KMGTkmgt", *q)) q++;
      if (*q == 'B' || *q == 'b') q++;
      return *q ? -1 : -2;
    }
    v = v * 10 + d;
  }
  int shift = 0;
  switch (upper(*p)) {
    case 'K': shift = 10; p++; break;
    case 'M': shift = 20; p++; break;
    case 'G': shift = 30; p++; break;
    case 'T': shift = 40; p++; break;
    default: break;
  }
  if (*p == 'B' || *p == 'b') p++;
  if (*p) return -1;
  if (shift && v > (UINT64_MAX >> shift)) return -2;
  *out = v << shift;
  return 0;
}

/* Non-negative decimal that fits in an int; 0 ok, -1 not. */
static int parse_uint(const char* s, int* out) {
  long long v = 0;
  if (!*s) return -1;
  for (; *s; s++) {
    if (*s < '0' || *s > '9') return -1;
    v = v * 10 + (*s - '0');
    if (v > INT_MAX) return -1;
  }
  *out = (int)v;
  return 0;
}

/* -1, or an integer in [lo, hi]. */
static int parse_int_field(const char* s, int lo, int hi, int* out) {
  int v;
  if (strcmp(s, "-1") == 0) { *out = -1; return 0; }
  if (parse_uint(s, &v) != 0 || v < lo || v > hi) return -1;
  *out = v;
  return 0;
}

static int grow(void** arr, int* cap, int need, size_t elem) {
  if (need <= *cap) return 0;
  int ncap = *cap ? *cap * 2 : 16;
  void* p = realloc(*arr, (size_t)ncap * elem);
  if (!p) return -1;
  *arr = p;
  *cap = ncap;
  return 0;
}

/* Fill a section from the fields after "platform". Returns 0 or writes a reason. */
static int parse_platform(char** f, int nf, ccl_section* sec, char* why) {
  char e[ECHO_MAX * 4 + 8];
  if (nf == 0 || (nf == 1 && (strcmp(f[0], "*") == 0 || ieq(f[0], "any")))) return 0;
  for (int i = 0; i < nf; i++) {
    char orig[ECHO_MAX * 4 + 8];
    echo(f[i], orig, sizeof orig);
    char* eq = strchr(f[i], '=');
    char* key = f[i];
    char* val = eq ? eq + 1 : NULL;
    if (eq) {
      *eq = '\0';
      key = trim(key);
      val = trim(val);
    }
    if (!eq || !*key || !*val) {
      snprintf(why, REASON_MAX, "platform: malformed pair '%s' (expected key=value)", orig);
      return -1;
    }
    static const struct { const char* k; unsigned bit; } keys[] = {
        {"gpu", CCLT_PK_GPU}, {"nvldomains", CCLT_PK_NVLDOMAINS}, {"nvlranks", CCLT_PK_NVLRANKS},
        {"partition", CCLT_PK_PARTITION}, {"nps", CCLT_PK_NPS}};
    unsigned bit = 0;
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
      if (ieq(key, keys[k].k)) bit = keys[k].bit;
    echo(key, e, sizeof e);
    if (!bit) {
      snprintf(why, REASON_MAX,
               "platform: unknown key '%s' (valid: gpu, nvldomains, nvlranks, partition, nps)", e);
      return -1;
    }
    if (sec->keys & bit) { snprintf(why, REASON_MAX, "platform: duplicate key '%s'", e); return -1; }
    sec->keys |= bit;
    echo(val, e, sizeof e);
    if (bit == CCLT_PK_GPU) {
      if (strlen(val) >= sizeof sec->gpu) {
        snprintf(why, REASON_MAX, "platform: gpu '%s' is longer than 63 bytes", e);
        return -1;
      }
      size_t j = 0;
      for (; val[j]; j++) sec->gpu[j] = lower(val[j]);
      sec->gpu[j] = '\0';
    } else if (bit == CCLT_PK_NVLDOMAINS || bit == CCLT_PK_NVLRANKS) {
      int v;
      if (parse_uint(val, &v) != 0 || v < 1) {
        snprintf(why, REASON_MAX, "platform: %s '%s' is not a positive integer",
                 bit == CCLT_PK_NVLDOMAINS ? "nvldomains" : "nvlranks", e);
        return -1;
      }
      if (bit == CCLT_PK_NVLDOMAINS) sec->nvlDomains = v;
      else sec->nvlRanks = v;
    } else {
      static const char* const parts[] = {"SPX", "DPX", "TPX", "QPX", "CPX", NULL};
      static const char* const npss[] = {"NPS1", "NPS2", "NPS4", NULL};
      int part = bit == CCLT_PK_PARTITION;
      const char* const* ok = part ? parts : npss;
      char* dst = part ? sec->partition : sec->nps;
      int found = 0;
      for (; *ok; ok++)
        if (ieq(*ok, val)) { strcpy(dst, *ok); found = 1; }
      if (!found) {
        snprintf(why, REASON_MAX, part ? "platform: partition '%s' is not one of SPX, DPX, TPX, QPX, CPX"
                                       : "platform: nps '%s' is not one of NPS1, NPS2, NPS4", e);
        return -1;
      }
    }
  }
  return 0;
}

/* Parse one rule's fields. Returns 0 or writes a reason. */
static int parse_rule(char** f, int nf, ccl_rule* r, char* why) {
  char e[ECHO_MAX * 4 + 8];
  static const char* const intNames[4] = {"nNodes", "nRanks", "numPipeOps", "regBuff"};
  if (nf < 8 || nf > 10) {
    snprintf(why, REASON_MAX, "expected 8, 9 or 10 fields, got %d", nf);
    return -1;
  }
  if (!lookup(ccl_coll_names, ccl_coll_aliases, CCLT_NUM_COLL_IDS, 0, 0, f[0], &r->coll)) {
    echo(f[0], e, sizeof e);
    snprintf(why, REASON_MAX,
             "unknown collective '%s' (valid: broadcast, reduce, allgather, reducescatter, allreduce)", e);
    return -1;
  }
  uint64_t* bounds[2] = {&r->minBytes, &r->maxBytes};
  for (int i = 0; i < 2; i++) {
    int rc = parse_size(f[1 + i], bounds[i]);
    if (rc == 0) continue;
    echo(f[1 + i], e, sizeof e);
    if (rc == -1)
      snprintf(why, REASON_MAX, "%s: invalid size '%s' (expected digits with optional K, M, G or T suffix)",
               i ? "maxbytes" : "minbytes", e);
    else
      snprintf(why, REASON_MAX, "%s: size '%s' does not fit in 64 bits", i ? "maxbytes" : "minbytes", e);
    return -1;
  }
  if (r->minBytes > r->maxBytes) {
    snprintf(why, REASON_MAX, "minbytes %llu > maxbytes %llu", (unsigned long long)r->minBytes,
             (unsigned long long)r->maxBytes);
    return -1;
  }
  if (!lookup(ccl_algo_names, NULL, CCLT_NUM_ALGOS, 1, 1, f[3], &r->algo)) {
    echo(f[3], e, sizeof e);
    snprintf(why, REASON_MAX,
             "unknown algorithm '%s' (valid: tree, ring, collnet_direct, collnet_chain, nvls, nvls_tree, pat, default)", e);
    return -1;
  }
  if (!lookup(ccl_proto_names, NULL, CCLT_NUM_PROTOS, 0, 1, f[4], &r->proto)) {
    echo(f[4], e, sizeof e);
    snprintf(why, REASON_MAX, "unknown protocol '%s' (valid: ll, ll128, simple, default)", e);
    return -1;
  }
  if (parse_int_field(f[5], 0, CCLT_MAX_CHANNELS, &r->channels) != 0) {
    echo(f[5], e, sizeof e);
    snprintf(why, REASON_MAX, "channels: '%s' is not -1, 0 or 1..64", e);
    return -1;
  }
  int* ints[4] = {&r->nNodes, &r->nRanks, &r->numPipeOps, &r->regBuff};
  for (int i = 0; i < 4; i++) {
    *ints[i] = CCLT_ANY;
    if (6 + i >= nf) continue;
    int isReg = i == 3;
    if (parse_int_field(f[6 + i], isReg ? 0 : 1, isReg ? 1 : INT_MAX, ints[i]) == 0) continue;
    echo(f[6 + i], e, sizeof e);
    snprintf(why, REASON_MAX, isReg ? "%s: '%s' is not -1, 0 or 1" : "%s: '%s' is not -1 or a positive integer",
             intNames[i], e);
    return -1;
  }
  return 0;
}

/* One logical line (NUL-terminated, CR stripped). Returns -1 only when out of memory. */
static int parse_line(char* s, int lineno, ccl_ruleset* rs, ccl_diag_fn diag, void* user) {
  char why[REASON_MAX];
  char* f[CCLT_MAX_LINE + 1]; /* a line of n bytes has at most n+1 fields */
  int nf = 0;
  s = trim(s);
  if (!*s || *s == '#') return 0;
  for (char* p = s;; nf++) {
    char* comma = strchr(p, ',');
    f[nf] = p;
    if (!comma) { nf++; break; }
    *comma = '\0';
    p = comma + 1;
  }
  for (int i = 0; i < nf; i++) f[i] = trim(f[i]);
  if (ieq(f[0], "platform")) {
    if (grow((void**)&rs->sections, &rs->capSections, rs->nSections + 1, sizeof(ccl_section)))
      return -1;
    ccl_section* sec = &rs->sections[rs->nSections++];
    memset(sec, 0, sizeof *sec);
    sec->line = lineno;
    sec->valid = 1;
    if (parse_platform(f + 1, nf - 1, sec, why) != 0) {
      sec->valid = 0;
      rs->nRejected++;
      if (diag) diag(user, lineno, why);
    }
    return 0;
  }
  ccl_rule r;
  memset(&r, 0, sizeof r);
  if (parse_rule(f, nf, &r, why) != 0) {
    rs->nRejected++;
    if (diag) diag(user, lineno, why);
    return 0;
  }
  r.section = rs->nSections - 1;
  r.line = lineno;
  if (grow((void**)&rs->rules, &rs->capRules, rs->nRules + 1, sizeof(ccl_rule))) return -1;
  rs->rules[rs->nRules++] = r;
  return 0;
}

int ccl_parse_buffer(const char* buf, size_t len, ccl_ruleset* rs, ccl_diag_fn diag, void* user) {
  char line[CCLT_MAX_LINE + 1];
  size_t pos = 0;
  int lineno = 0;
  while (pos < len) {
    const char* nl = memchr(buf + pos, '\n', len - pos);
    size_t end = nl ? (size_t)(nl - buf) : len;
    size_t n = end - pos;
    lineno++;
    if (n > 0 && buf[end - 1] == '\r') n--;
    const char* start = buf + pos;
    pos = nl ? end + 1 : len;
    if (n > CCLT_MAX_LINE) {
      rs->nRejected++;
      if (diag) diag(user, lineno, "line longer than 1024 bytes");
      continue;
    }
    if (memchr(start, '\0', n)) {
      rs->nRejected++;
      if (diag) diag(user, lineno, "embedded NUL byte");
      continue;
    }
    memcpy(line, start, n);
    line[n] = '\0';
    if (parse_line(line, lineno, rs, diag, user) != 0) return -1;
  }
  return 0;
}

int ccl_read_file(const char* path, size_t maxBytes, char** out, size_t* outLen) {
  *out = NULL;
  *outLen = 0;
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return CCLT_FILE_ERRNO;
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    errno = e;
    return CCLT_FILE_ERRNO;
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return CCLT_FILE_NOT_REGULAR;
  }
  if ((uint64_t)st.st_size > maxBytes) {
    close(fd);
    return CCLT_FILE_TOO_LARGE;
  }
  size_t cap = (size_t)st.st_size + 1, len = 0; /* +1: a file that grew is seen to grow */
  char* buf = malloc(cap);
  int rc = CCLT_FILE_ERRNO;
  if (!buf) errno = ENOMEM;
  while (buf) {
    ssize_t got = read(fd, buf + len, cap - len);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) break;
    len += (size_t)got;
    if (got == 0) {
      rc = CCLT_FILE_OK;
      break;
    }
    if (len == cap) {
      if (cap > maxBytes) {
        rc = CCLT_FILE_TOO_LARGE;
        break;
      }
      char* nb = realloc(buf, cap * 2);
      if (!nb) {
        errno = ENOMEM;
        break;
      }
      buf = nb;
      cap *= 2;
    }
  }
  int e = errno;
  close(fd);
  if (rc != CCLT_FILE_OK) {
    free(buf);
    buf = NULL;
    len = 0;
  }
  *out = buf;
  *outLen = len;
  errno = e;
  return rc;
}

int ccl_parse_file(const char* path, ccl_ruleset* rs, ccl_diag_fn diag, void* user) {
  char* buf;
  size_t len;
  int rc = ccl_read_file(path, CCLT_MAX_FILE_BYTES, &buf, &len);
  if (rc == CCLT_FILE_OK) rc = ccl_parse_buffer(buf, len, rs, diag, user);
  int e = errno;
  free(buf);
  errno = e;
  return rc;
}

const char* ccl_file_problem(int rc) {
  switch (rc) {
    case CCLT_FILE_OK: return "read";
    case CCLT_FILE_NOT_REGULAR: return "not a regular file (a FIFO, device or folder)";
    case CCLT_FILE_TOO_LARGE: return "larger than 16 MiB, the most a rule file may hold";
    default: return errno ? strerror(errno) : "out of memory";
  }
}

void ccl_ruleset_free(ccl_ruleset* rs) {
  free(rs->rules);
  free(rs->sections);
  memset(rs, 0, sizeof *rs);
}
