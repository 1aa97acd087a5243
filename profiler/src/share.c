/* The arm in force, from the tuner plugin (CONTRACTS.md section 2): ccltune's tuner exports, beside
 * its ncclTuner structs, `const ccltuneArmShare_v1` whose arm_of(commHash) says which of its in-run
 * arms the communicator is on (-1: none). The profiler never loads the tuner: it asks the dynamic
 * linker for the library NCCL_TUNER_PLUGIN names only if it is loaded already (RTLD_NOLOAD), as a
 * path or, for a name, as NCCL spells it (libnccl-tuner-<name>.so). RTLD_NOLOAD still takes a
 * reference, so the tuner stays mapped while a context holds arm_of; cclp_share_release drops it.
 * Not on the hot path: dlopen and dlsym take the loader's lock. */
#include "prof.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void* loaded(const char* value) {
  void* lib = dlopen(value, RTLD_NOW | RTLD_NOLOAD);
  if (!lib && !strchr(value, '/')) {
    char name[320];
    snprintf(name, sizeof name, "libnccl-tuner-%.256s.so", value);
    lib = dlopen(name, RTLD_NOW | RTLD_NOLOAD);
  }
  return lib;
}

/* The value as the file's '# arms' line may show it: printable, one line. */
static const char* shown(const char* value, char* buf, size_t n) {
  size_t i = 0;
  for (; value[i] && i + 1 < n; i++) buf[i] = value[i] > ' ' && value[i] < 127 ? value[i] : '?';
  buf[i] = 0;
  return buf;
}

int cclp_share_find(cclp_share* sh) {
  memset(sh, 0, sizeof *sh);
  const char* raw = getenv("NCCL_TUNER_PLUGIN");
  char value[101];
  if (!raw || !*raw) {
    snprintf(sh->why, sizeof sh->why, "NCCL_TUNER_PLUGIN is unset");
    return CCLP_SHARE_ABSENT;
  }
  shown(raw, value, sizeof value);
  void* lib = loaded(raw);
  if (!lib) {
    snprintf(sh->why, sizeof sh->why, "the tuner NCCL_TUNER_PLUGIN=%s is not loaded in this process", value);
    return CCLP_SHARE_NOT_LOADED;
  }
  const ccltuneArmShare_v1_t* share = dlsym(lib, "ccltuneArmShare_v1");
  if (!share || share->version != 1 || !share->arm_of) {
    if (share)
      snprintf(sh->why, sizeof sh->why, "the tuner's ccltuneArmShare_v1 is version %d (this profiler reads 1)",
               share->version);
    else
      snprintf(sh->why, sizeof sh->why, "the tuner NCCL_TUNER_PLUGIN=%s exports no ccltuneArmShare_v1", value);
    dlclose(lib);
    return CCLP_SHARE_ABSENT;
  }
  sh->arm_of = share->arm_of;
  sh->lib = lib;
  return CCLP_SHARE_FOUND;
}

void cclp_share_release(cclp_share* sh) {
  if (sh->lib) dlclose(sh->lib);
  sh->lib = NULL;
  sh->arm_of = NULL;
}
