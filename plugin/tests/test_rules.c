/* White-box tests of the parser, platform detection and matcher, compiled from the plugin
 * sources. Table-driven; every case has a name.
 *   test_rules [TEST...]   (no name: all; --list: the names) */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rules.h"

#include "check.h"

static char lastReason[1024];
static int lastLine, nDiag;
static void diag(void* u, int line, const char* reason) {
  (void)u;
  nDiag++;
  lastLine = line;
  snprintf(lastReason, sizeof lastReason, "%s", reason);
}

static void parse(const char* text, size_t len, ccl_ruleset* rs) {
  memset(rs, 0, sizeof *rs);
  nDiag = 0;
  lastReason[0] = '\0';
  ccl_parse_buffer(text, len, rs, diag, NULL);
}

/* ---- parser: one line each; reason "" = accepted ---- */
static const struct { const char* name; const char* line; const char* reason; } PARSE[] = {
    {"plain 8 fields", "allreduce,0,65536,ring,ll,4,1,8", ""},
    {"9 and 10 fields", "allreduce,0,1,ring,ll,4,1,8,2,1", ""},
    {"spaces and tabs", " \tAllReduce , 0 ,\t64K , RING , LL128 , -1 , -1 , -1 ", ""},
    {"aliases", "all_reduce,0,1,NVLSTree,Simple,0,-1,-1", ""},
    {"suffixes", "allgather,1kb,4GB,ring,simple,1,1,8", ""},
    {"u64 max", "allgather,0,18446744073709551615,ring,simple,1,1,8", ""},
    {"defaults", "reduce,0,1,default,default,2,-1,-1", ""},
    {"too few fields", "allreduce,0,1,ring,ll,4,1", "expected 8, 9 or 10 fields, got 7"},
    {"too many fields", "allreduce,0,1,ring,ll,4,1,8,1,1,1", "expected 8, 9 or 10 fields, got 11"},
    {"unknown collective", "alltoall,0,1,ring,ll,4,1,8",
     "unknown collective 'alltoall' (valid: broadcast, reduce, allgather, reducescatter, allreduce)"},
    {"unknown algorithm", "allreduce,0,1,rings,ll,4,1,8",
     "unknown algorithm 'rings' (valid: tree, ring, collnet_direct, collnet_chain, nvls, nvls_tree, pat, default)"},
    {"unknown protocol", "allreduce,0,1,ring,ll64,4,1,8",
     "unknown protocol 'll64' (valid: ll, ll128, simple, default)"},
    {"negative size", "allreduce,-1,1,ring,ll,4,1,8",
     "minbytes: invalid size '-1' (expected digits with optional K, M, G or T suffix)"},
    {"empty size", "allreduce,,1,ring,ll,4,1,8",
     "minbytes: invalid size '' (expected digits with optional K, M, G or T suffix)"},
    {"overflow digits", "allreduce,0,18446744073709551616,ring,ll,4,1,8",
     "maxbytes: size '18446744073709551616' does not fit in 64 bits"},
    {"overflow suffix", "allreduce,0,16777216T,ring,ll,4,1,8",
     "maxbytes: size '16777216T' does not fit in 64 bits"},
    {"min > max", "allreduce,2K,1K,ring,ll,4,1,8", "minbytes 2048 > maxbytes 1024"},
    {"channels 65", "allreduce,0,1,ring,ll,65,1,8", "channels: '65' is not -1, 0 or 1..64"},
    {"channels -2", "allreduce,0,1,ring,ll,-2,1,8", "channels: '-2' is not -1, 0 or 1..64"},
    {"nNodes 0", "allreduce,0,1,ring,ll,4,0,8", "nNodes: '0' is not -1 or a positive integer"},
    {"nRanks text", "allreduce,0,1,ring,ll,4,1,x", "nRanks: 'x' is not -1 or a positive integer"},
    {"pipeops", "allreduce,0,1,ring,ll,4,1,8,1.5", "numPipeOps: '1.5' is not -1 or a positive integer"},
    {"regBuff 2", "allreduce,0,1,ring,ll,4,1,8,1,2", "regBuff: '2' is not -1, 0 or 1"},
    {"echo escapes", "all\x01reduce,0,1,ring,ll,4,1,8",
     "unknown collective 'all\\x01reduce' (valid: broadcast, reduce, allgather, reducescatter, allreduce)"},
    {"echo truncates", "abcdefghijabcdefghijabcdefghijabcdefghijXYZ,0,1,ring,ll,4,1,8",
     "unknown collective 'abcdefghijabcdefghijabcdefghijabcdefghij...' (valid: broadcast, reduce, allgather, reducescatter, allreduce)"},
    {"platform ok", "platform,gpu=H200,nvldomains=1,nvlranks=4,partition=cpx,nps=nps4", ""},
    {"platform any", "platform,*", ""},
    {"platform unknown key", "platform,arch=gfx942",
     "platform: unknown key 'arch' (valid: gpu, nvldomains, nvlranks, partition, nps)"},
    {"platform malformed", "platform,gpu", "platform: malformed pair 'gpu' (expected key=value)"},
    {"platform empty value", "platform,gpu= ", "platform: malformed pair 'gpu=' (expected key=value)"},
    {"platform duplicate", "platform,gpu=a,GPU=b", "platform: duplicate key 'GPU'"},
    {"platform bad int", "platform,nvlranks=0", "platform: nvlranks '0' is not a positive integer"},
    {"platform bad partition", "platform,partition=XPX",
     "platform: partition 'XPX' is not one of SPX, DPX, TPX, QPX, CPX"},
};

static void test_parser(void) {
  for (size_t i = 0; i < sizeof PARSE / sizeof PARSE[0]; i++) {
    ccl_ruleset rs;
    parse(PARSE[i].line, strlen(PARSE[i].line), &rs);
    if (!PARSE[i].reason[0])
      CHECKN(PARSE[i].name, nDiag == 0, "rejected: %s", lastReason);
    else
      CHECKN(PARSE[i].name, nDiag == 1 && strcmp(lastReason, PARSE[i].reason) == 0 && rs.nRules == 0,
             "got %d diag(s), reason '%s'", nDiag, lastReason);
    ccl_ruleset_free(&rs);
  }
}

static void test_parser_file_shape(void) {
  ccl_ruleset rs;
  const char crlf[] = "# c\r\n  # indented\r\n\r\nallreduce,0,64K,ring,ll,4,1,8\r\n";
  parse(crlf, sizeof crlf - 1, &rs);
  CHECKN("crlf and comments", nDiag == 0 && rs.nRules == 1 && rs.rules[0].line == 4 &&
         rs.rules[0].maxBytes == 65536 && rs.rules[0].channels == 4, "nDiag %d rules %d", nDiag, rs.nRules);
  ccl_ruleset_free(&rs);

  const char nul[] = "allreduce,0,1,ring,ll,4,1,8\nallre\0duce,0,1,ring,ll,4,1,8\nreduce,0,1,ring,ll,4,1,8";
  parse(nul, sizeof nul - 1, &rs);
  CHECKN("embedded NUL", nDiag == 1 && lastLine == 2 && strcmp(lastReason, "embedded NUL byte") == 0 &&
         rs.nRules == 2 && rs.rules[1].line == 3, "nDiag %d line %d '%s'", nDiag, lastLine, lastReason);
  ccl_ruleset_free(&rs);

  char big[3000];
  memset(big, ' ', sizeof big);
  memcpy(big, "reduce,0,1,ring,ll,4,1,8", 24);
  big[1025] = '\n'; /* line 1: 1025 bytes */
  memcpy(big + 1026, "reduce,0,1,ring,ll,4,1,8\n", 25);
  parse(big, 1026 + 25, &rs);
  CHECKN("long line once", nDiag == 1 && lastLine == 1 && strcmp(lastReason, "line longer than 1024 bytes") == 0 &&
         rs.nRules == 1 && rs.rules[0].line == 2, "nDiag %d rules %d", nDiag, rs.nRules);
  ccl_ruleset_free(&rs);
  parse(big, 1024, &rs); /* exactly 1024 bytes (rule + trailing spaces): accepted */
  CHECKN("1024 bytes ok", nDiag == 0 && rs.nRules == 1, "'%s'", lastReason);
  ccl_ruleset_free(&rs);

  const char secs[] = "reduce,0,1,ring,ll,4,1,8\nplatform,gpu=h100\nreduce,0,1,ring,ll,4,1,8\n"
                      "platform,bogus=1\nreduce,0,1,ring,ll,4,1,8\nplatform,any\nreduce,0,1,ring,ll,4,1,8\n";
  parse(secs, sizeof secs - 1, &rs);
  CHECKN("sections", rs.nRules == 4 && rs.nSections == 3 && rs.rules[0].section == -1 &&
         rs.rules[1].section == 0 && rs.rules[2].section == 1 && !rs.sections[1].valid &&
         rs.rules[3].section == 2 && rs.sections[2].keys == 0 && nDiag == 1 && rs.nRejected == 1,
         "rules %d sections %d", rs.nRules, rs.nSections);
  ccl_ruleset_free(&rs);
}

/* ---- matcher ---- */
static const char* MATCH_RULES =
    "allreduce,0,1K,ring,ll,-1,-1,-1\n"            /* 1 */
    "allreduce,512,4K,nvls,simple,8,-1,-1\n"       /* 2: overlaps 1, later */
    "allreduce,512,4K,tree,default,2,-1,-1\n"      /* 3 */
    "allreduce,8K,8K,default,simple,0,-1,-1\n"     /* 4 */
    "allreduce,16K,32K,default,default,6,-1,-1\n"  /* 5 */
    "allreduce,16K,32K,ring,ll,9,-1,-1\n"          /* 6: shadowed by 5 */
    "allgather,0,max,ring,ll,1,-1,-1\n"            /* 7: rejected (max) */
    "allgather,0,1M,ring,ll128,-1,2,-1\n"          /* 8: nNodes 2 only */
    "allgather,0,1M,ring,simple,-1,-1,-1,2\n"      /* 9: numPipeOps 2 only */
    "allgather,0,1M,ring,ll,-1,-1,-1,-1,1\n"       /* 10: regBuff 1 only */
    "broadcast,0,18446744073709551615,pat,ll,-1,-1,-1\n"; /* 11: open-ended */

static float T[7 * 3];
static void table_default(void) {
  for (int i = 0; i < 21; i++) T[i] = 5.0f + (float)(i % 5);
  for (int p = 0; p < 3; p++) T[4 * 3 + p] = -1.0f; /* NVLS ignored */
  T[0 * 3 + 2] = 1.0f;                                /* tree/simple cheapest tree cell */
}

static const struct { const char* name; int coll; uint64_t bytes; int pipe, reg, nvls, line, cell, ch; } MATCH[] = {
    {"first of overlap", 4, 600, 1, 0, 0, 1, 1 * 3 + 0, 0},
    {"boundary max inclusive", 4, 1024, 1, 0, 0, 1, 3, 0},
    {"ignored cell skipped", 4, 2000, 1, 0, 0, 3, 0 * 3 + 2, 2},
    {"nvls when available", 4, 2000, 1, 0, 1, 2, 4 * 3 + 2, 8},
    {"gap misses", 4, 5000, 1, 0, 0, 0, -1, 0},
    {"default algo cheapest", 4, 8192, 1, 0, 0, 4, 0 * 3 + 2, 0},
    {"both default stops", 4, 20000, 1, 0, 0, 5, -1, 6},
    {"nNodes filtered", 2, 10, 1, 0, 0, 0, -1, 0},
    {"numPipeOps", 2, 10, 2, 0, 0, 9, 1 * 3 + 2, 0},
    {"regBuff", 2, 10, 1, 1, 0, 10, 1 * 3 + 0, 0},
    {"regBuff unknown", 2, 10, 1, -1, 0, 0, -1, 0},
    {"open-ended u64", 0, UINT64_MAX, 1, 0, 0, 11, 6 * 3 + 0, 0},
    {"bad collective id", 9, 10, 1, 0, 0, 0, -1, 0},
};

static void test_matcher(void) {
  ccl_ruleset rs;
  parse(MATCH_RULES, strlen(MATCH_RULES), &rs);
  CHECKN("matcher rules parsed", rs.nRules == 10 && nDiag == 1 && lastLine == 7, "rules %d", rs.nRules);
  ccl_platform plat;
  memset(&plat, 0, sizeof plat);
  ccl_platform_set_nvl(&plat, 8, 1, NULL);
  ccl_comm* c = ccl_comm_build(&rs, 8, 1, &plat);
  CHECKN("comm built", c && ccl_comm_nrules(c) == 9, "nrules %d", ccl_comm_nrules(c));
  for (size_t i = 0; c && i < sizeof MATCH / sizeof MATCH[0]; i++) {
    int cell, ch;
    table_default();
    if (MATCH[i].nvls) T[4 * 3 + 2] = 3.0f;
    int line = ccl_comm_decide(c, MATCH[i].coll, MATCH[i].bytes, MATCH[i].pipe, MATCH[i].reg, T, 7,
                               3, 1, &cell, &ch);
    CHECKN(MATCH[i].name, line == MATCH[i].line && cell == MATCH[i].cell && ch == MATCH[i].ch,
           "line %d cell %d ch %d", line, cell, ch);
  }
  int cell, ch;
  CHECKN("v2 skips partial default", c && ccl_comm_decide(c, 4, 8192, 1, 0, T, 7, 3, 0, &cell, &ch) == 0, "matched");
  ccl_comm_free(c);
  c = ccl_comm_build(&rs, 16, 2, &plat);
  table_default();
  CHECKN("nNodes 2 rule", c && ccl_comm_decide(c, 2, 10, 1, 0, T, 7, 3, 1, &cell, &ch) == 8 && cell == 4, "cell %d", cell);
  ccl_comm_free(c);
  ccl_ruleset_free(&rs);
}

/* numAlgo x numProto over INT_MAX: no cell index fits an int; the table is not touched (UBSan
 * caught a signed overflow in cheapest() here, ASan the read past the table) */
static void test_huge_table(void) {
  ccl_ruleset rs;
  const char* text = "allreduce,0,1M,default,simple,0,-1,-1\nallreduce,0,1M,ring,default,0,-1,-1\n";
  parse(text, strlen(text), &rs);
  ccl_platform plat;
  memset(&plat, 0, sizeof plat);
  ccl_comm* c = ccl_comm_build(&rs, 8, 1, &plat);
  float small[21];
  for (int i = 0; i < 21; i++) small[i] = 1.0f;
  const int shapes[][2] = {{7, INT_MAX / 3}, {INT_MAX / 2, 3}, {65536, 65536}};
  for (size_t i = 0; c && i < sizeof shapes / sizeof shapes[0]; i++) {
    int cell = 7, ch = 7;
    int line = ccl_comm_decide(c, 4, 1024, 1, 0, small, shapes[i][0], shapes[i][1], 1, &cell, &ch);
    CHECKN("huge table: no match", line == 0 && cell == -1 && ch == 0, "%dx%d: line %d cell %d", shapes[i][0],
           shapes[i][1], line, cell);
  }
  ccl_comm_free(c);
  ccl_ruleset_free(&rs);
}

/* a rule file that is not a regular file, or too large, is refused at once */
static void test_file_kinds(void) {
  ccl_ruleset rs;
  memset(&rs, 0, sizeof rs);
  CHECKN("/dev/zero refused", ccl_parse_file("/dev/zero", &rs, diag, NULL) == CCLT_FILE_NOT_REGULAR, "read");
  CHECKN("a folder refused", ccl_parse_file("/tmp", &rs, diag, NULL) == CCLT_FILE_NOT_REGULAR, "read");
  char big[] = "/tmp/ccltune_rules_big_XXXXXX";
  int fd = mkstemp(big);
  if (fd >= 0) {
    CHECKN("sparse file", ftruncate(fd, CCLT_MAX_FILE_BYTES + 1) == 0, "ftruncate");
    close(fd);
    CHECKN("over 16 MiB refused", ccl_parse_file(big, &rs, diag, NULL) == CCLT_FILE_TOO_LARGE, "read");
    unlink(big);
  }
  CHECKN("problem in words", strstr(ccl_file_problem(CCLT_FILE_TOO_LARGE), "16 MiB") != NULL, "%s",
         ccl_file_problem(CCLT_FILE_TOO_LARGE));
  ccl_ruleset_free(&rs);
}

/* ---- platform detection from a fake sysfs tree ---- */
static void put(const char* root, const char* rel, const char* text) {
  char path[512], cmd[600];
  snprintf(path, sizeof path, "%s/%s", root, rel);
  snprintf(cmd, sizeof cmd, "mkdir -p \"$(dirname '%s')\"", path);
  if (system(cmd) != 0) return;
  FILE* f = fopen(path, "w");
  if (f) { fputs(text, f); fclose(f); }
}

static void test_platform(void) {
  char root[] = "/tmp/ccltune_sysfs_XXXXXX";
  if (!mkdtemp(root)) { CHECKN("mkdtemp", 0, "failed"); return; }
  put(root, "proc/driver/nvidia/gpus/0000:1b:00.0/information", "Model: \t NVIDIA H200\nIRQ: 1\n");
  put(root, "proc/driver/nvidia/gpus/0000:0a:00.0/information", "Model:  NVIDIA H100 80GB HBM3\n");
  put(root, "sys/class/drm/card1/device/current_compute_partition", "cpx\n");
  put(root, "sys/class/drm/card1/device/current_memory_partition", "NPS4\n");
  setenv("CCLTUNE_SYSFS_ROOT", root, 1);
  unsetenv("CCLTUNE_GPU_MODEL");
  ccl_platform p;
  ccl_platform_detect(&p);
  CHECKN("nvidia model, sorted first", strcmp(p.gpu, "NVIDIA H100 80GB HBM3") == 0, "'%s'", p.gpu);
  CHECKN("amd partitions", strcmp(p.partition, "CPX") == 0 && strcmp(p.nps, "NPS4") == 0, "'%s' '%s'", p.partition, p.nps);
  setenv("CCLTUNE_GPU_MODEL", "AMD Instinct MI300X", 1);
  ccl_platform_detect(&p);
  CHECKN("env override", strcmp(p.gpu, "AMD Instinct MI300X") == 0, "'%s'", p.gpu);
  unsetenv("CCLTUNE_GPU_MODEL");

  ccl_section s;
  memset(&s, 0, sizeof s);
  s.valid = 1;
  s.keys = CCLT_PK_GPU | CCLT_PK_NVLRANKS | CCLT_PK_PARTITION;
  strcpy(s.gpu, "mi300");
  strcpy(s.partition, "CPX");
  s.nvlRanks = 4;
  snprintf(p.gpu, sizeof p.gpu, "AMD Instinct MI300X");
  int nvl[3] = {2, 4, 4};
  ccl_platform_set_nvl(&p, 8, 1, nvl);
  /* gpu= names whole words of the model (docs/rules.md): mi300 is not an MI300X (issue 41) */
  CHECKN("part of a word is not the model", !ccl_section_matches(&s, &p), "matched");
  strcpy(s.gpu, "instinct mi300x");
  CHECKN("section matches", ccl_section_matches(&s, &p), "no");
  nvl[1] = 3;
  ccl_platform_set_nvl(&p, 8, 1, nvl);
  CHECKN("uneven domains miss nvlranks", !ccl_section_matches(&s, &p), "matched");
  ccl_platform_set_nvl(&p, 16, 4, NULL);
  CHECKN("derived nvlranks", ccl_section_matches(&s, &p) && p.nvlDomains == 4, "no");
  p.partition[0] = '\0';
  CHECKN("unknown fact never matches", !ccl_section_matches(&s, &p), "matched");
  s.keys = 0;
  s.valid = 0;
  CHECKN("rejected section matches nothing", !ccl_section_matches(&s, &p), "matched");

  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  if (system(cmd) != 0) printf("warning: could not remove %s\n", root);
  put(root, "sys/class/drm/card0/device/product_name", "AMD Instinct MI300X\n");
  put(root, "sys/class/drm/card0-DP-1/device/product_name", "monitor\n");
  ccl_platform_detect(&p);
  CHECKN("drm product_name", strcmp(p.gpu, "AMD Instinct MI300X") == 0 && !p.partition[0], "'%s'", p.gpu);
  if (system(cmd) != 0) printf("warning: could not remove %s\n", root);
  unsetenv("CCLTUNE_SYSFS_ROOT");
}

int main(int argc, char** argv) {
  static const check_test TESTS[] = {
      {"parser", test_parser},         {"parser_file_shape", test_parser_file_shape},
      {"matcher", test_matcher},       {"huge_table", test_huge_table},
      {"file_kinds", test_file_kinds}, {"platform", test_platform},
  };
  return check_main(TESTS, CHECK_COUNT(TESTS), argc - 1, argv + 1);
}
