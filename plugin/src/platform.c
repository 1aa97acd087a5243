/* Platform facts read once per init: GPU model, AMD partitions, NVLink domain shape.
 * Everything is read below $CCLTUNE_SYSFS_ROOT (default "/") so tests use a fake tree. */
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rules.h"

static void strip(char* s) {
  char* p = s;
  while (*p == ' ' || *p == '\t') p++;
  memmove(s, p, strlen(p) + 1);
  size_t n = strlen(s);
  while (n && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' ' || s[n - 1] == '\t'))
    s[--n] = '\0';
}

/* First line of a file, stripped; 0 when it could be read and is not empty. */
static int read_first_line(const char* path, char* out, size_t n) {
  FILE* f = fopen(path, "r");
  if (!f) return -1;
  int ok = fgets(out, (int)n, f) != NULL;
  fclose(f);
  if (!ok) return -1;
  strip(out);
  return out[0] ? 0 : -1;
}

/* "Model:" line of the NVIDIA driver's information file. */
static int read_nvidia_model(const char* path, char* out, size_t n) {
  char line[256];
  FILE* f = fopen(path, "r");
  if (!f) return -1;
  int rc = -1;
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "Model:", 6) == 0) {
      size_t len = strlen(line + 6);
      if (len >= n) len = n - 1; /* a model name longer than the buffer is truncated */
      memcpy(out, line + 6, len);
      out[len] = '\0';
      strip(out);
      rc = out[0] ? 0 : -1;
      break;
    }
  }
  fclose(f);
  return rc;
}

/* Try every match of root+pattern in sorted order; the first readable one wins. */
static int first_match(const char* root, const char* pattern, int nvidia, char* out, size_t n) {
  char pat[1024];
  glob_t g;
  snprintf(pat, sizeof pat, "%s%s", root, pattern);
  if (glob(pat, 0, NULL, &g) != 0) return -1;
  int rc = -1;
  for (size_t i = 0; i < g.gl_pathc && rc != 0; i++) {
    const char* card = strstr(g.gl_pathv[i], "/drm/card");
    if (card && strchr(card + 9, '-') && strchr(card + 9, '-') < strchr(card + 9, '/'))
      continue; /* card0-DP-1 and friends are connectors, not GPUs */
    rc = nvidia ? read_nvidia_model(g.gl_pathv[i], out, n) : read_first_line(g.gl_pathv[i], out, n);
  }
  globfree(&g);
  return rc;
}

void ccl_platform_detect(ccl_platform* p) {
  const char* root = getenv("CCLTUNE_SYSFS_ROOT");
  const char* model = getenv("CCLTUNE_GPU_MODEL");
  if (!root) root = "";
  memset(p->gpu, 0, sizeof p->gpu);
  p->partition[0] = p->nps[0] = '\0';
  if (model && *model) snprintf(p->gpu, sizeof p->gpu, "%s", model);
  else if (first_match(root, "/proc/driver/nvidia/gpus/*/information", 1, p->gpu, sizeof p->gpu))
    if (first_match(root, "/sys/class/drm/card*/device/product_name", 0, p->gpu, sizeof p->gpu))
      p->gpu[0] = '\0';
  if (first_match(root, "/sys/class/drm/card*/device/current_compute_partition", 0, p->partition,
                  sizeof p->partition))
    p->partition[0] = '\0';
  if (first_match(root, "/sys/class/drm/card*/device/current_memory_partition", 0, p->nps,
                  sizeof p->nps))
    p->nps[0] = '\0';
  for (char* c = p->partition; *c; c++) if (*c >= 'a' && *c <= 'z') *c = (char)(*c - 32);
  for (char* c = p->nps; *c; c++) if (*c >= 'a' && *c <= 'z') *c = (char)(*c - 32);
}

/* nvl3 = {nNvlDomains, minRanks, maxRanks} from NCCL v5+, or NULL: derive from the
 * communicator shape (v2..v4), assuming one NVLink domain per node. */
void ccl_platform_set_nvl(ccl_platform* p, size_t nRanks, size_t nNodes, const int* nvl3) {
  if (nvl3) {
    p->nvlDomains = nvl3[0];
    p->minRanksPerNvlDomain = nvl3[1];
    p->maxRanksPerNvlDomain = nvl3[2];
  } else if (nNodes > 0 && nNodes <= 0x7fffffff && nRanks <= 0x7fffffff) {
    p->nvlDomains = (int)nNodes;
    p->minRanksPerNvlDomain = (int)(nRanks / nNodes);
    p->maxRanksPerNvlDomain = (int)((nRanks + nNodes - 1) / nNodes);
  } else {
    p->nvlDomains = p->minRanksPerNvlDomain = p->maxRanksPerNvlDomain = -1;
  }
}

static int is_word_char(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* docs/rules.md: a section's gpu= value (lower-cased) names the model when it is, case-insensitively, one
 * whole word of the model name or a run of its words: "h200" names "NVIDIA H200", "h100 80gb" names
 * "NVIDIA H100 80GB HBM3"; "h20" does not name "NVIDIA H200", nor "mi300" "AMD Instinct MI300A". A word is a
 * run of ASCII letters and digits. rules.py's gpu_names is the twin (tests/plugin/test_golden.py). */
static int names_model(const char* model, const char* value) {
  size_t n = strlen(value);
  if (n == 0) return 1;
  for (const char* at = model; *at; at++) {
    size_t i = 0;
    while (i < n && at[i]) {
      char a = at[i];
      if (a >= 'A' && a <= 'Z') a = (char)(a + 32);
      if (a != value[i]) break;
      i++;
    }
    if (i == n && (at == model || !is_word_char(at[-1])) && !is_word_char(at[n])) return 1;
  }
  return 0;
}

int ccl_section_matches(const ccl_section* s, const ccl_platform* p) {
  if (!s->valid) return 0;
  if ((s->keys & CCLT_PK_GPU) && (!p->gpu[0] || !names_model(p->gpu, s->gpu))) return 0;
  if ((s->keys & CCLT_PK_NVLDOMAINS) && (p->nvlDomains < 1 || p->nvlDomains != s->nvlDomains))
    return 0;
  if ((s->keys & CCLT_PK_NVLRANKS) &&
      (p->minRanksPerNvlDomain != s->nvlRanks || p->maxRanksPerNvlDomain != s->nvlRanks))
    return 0;
  if ((s->keys & CCLT_PK_PARTITION) && strcmp(p->partition, s->partition) != 0) return 0;
  if ((s->keys & CCLT_PK_NPS) && strcmp(p->nps, s->nps) != 0) return 0;
  return 1;
}

void ccl_platform_describe(const ccl_platform* p, char* out, size_t n) {
  snprintf(out, n, "gpu=%s nvldomains=%d nvlranks=%d..%d partition=%s nps=%s",
           p->gpu[0] ? p->gpu : "?", p->nvlDomains, p->minRanksPerNvlDomain,
           p->maxRanksPerNvlDomain, p->partition[0] ? p->partition : "?", p->nps[0] ? p->nps : "?");
}
