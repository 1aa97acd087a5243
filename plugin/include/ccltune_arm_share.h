/* What the ccltune tuner plugin exports for the ccltune profiler plugin (docs/plugin.md, "In-run
 * arms"): the arm in force per communicator. Find it with
 *   dlsym(dlopen(<the tuner's path>, RTLD_NOW | RTLD_NOLOAD), "ccltuneArmShare_v1")
 * A NULL result (no tuner loaded, or an older one) means no arms anywhere.
 * arm_of(commHash): the arm in force on that communicator in this process (0 = NCCL's default, also
 * before the period is known and after max_blocks), or -1 when the communicator has no arms, is not
 * known (ABI v2..v4 pass no commHash), or is finalized. Lock-free and allocation-free: callable from
 * any thread, at any time. When one process holds several ranks of a communicator (one commHash),
 * it is the arm of the first of them initialized; all ranks run the same arm at the same call count. */
#ifndef CCLTUNE_ARM_SHARE_H
#define CCLTUNE_ARM_SHARE_H

#include <stdint.h>

typedef struct ccltuneArmShare_v1 {
  int version; /* 1 */
  int (*arm_of)(uint64_t commHash);
} ccltuneArmShare_v1_t;

#endif
