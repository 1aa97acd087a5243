/* A stand-in for ccltune's tuner plugin as the profiler sees it (test_profiler's `arms` and
 * `arms_steps` cases): it exports `const ccltuneArmShare_v1` (CONTRACTS.md section 2) and, for the
 * test, stub_set_arm(commHash, arm), which sets the arm arm_of(commHash) then answers: a
 * communicator never set has no arms (-1). Built as libnccl-tuner-stub.so with that soname, so
 * NCCL_TUNER_PLUGIN=stub finds it by name as NCCL's libnccl-tuner-<name>.so. No tuner structs:
 * the profiler looks for nothing else. */
#include <stdatomic.h>
#include <stdint.h>

#define EXPORT __attribute__((visibility("default")))
#define COMMS 16

typedef struct {
  int version;
  int (*arm_of)(uint64_t commHash);
} ccltuneArmShare_v1_t;

static _Atomic uint64_t comm_of[COMMS];
static _Atomic int arm_at[COMMS];

static int arm_of(uint64_t comm) {
  for (int i = 0; i < COMMS; i++)
    if (atomic_load(&comm_of[i]) == comm) return atomic_load(&arm_at[i]);
  return -1;
}

EXPORT void stub_set_arm(uint64_t comm, int arm) {
  for (int i = 0; i < COMMS; i++) {
    uint64_t c = atomic_load(&comm_of[i]);
    if (c == comm || (c == 0 && atomic_compare_exchange_strong(&comm_of[i], &c, comm))) {
      atomic_store(&arm_at[i], arm);
      return;
    }
  }
}

EXPORT const ccltuneArmShare_v1_t ccltuneArmShare_v1 = {.version = 1, .arm_of = arm_of};
