"""A fake training job for ``ccltune ab``'s tests (TEST DATA): prints ``step N  T ms`` lines whose step
time has a known effect and seeded noise.

- base step time: FAKE_BASE_MS (default 100)
- slower by FAKE_SLOW_PCT percent (default 5) when FAKE_SLOW is set to 1 (an --env arm) or when the
  rule file named by CCLTUNE_RULES contains the word 'slow' in a comment (a --rules arm)
- noise: gaussian, FAKE_NOISE_PCT percent of the step time (default 1), seeded by FAKE_SEED and the
  process id, so runs differ as real runs do
- FAKE_FAIL_IF=NAME: exit 3 when the variable NAME is set (a job that fails in one arm)
- FAKE_SLEEP_S: sleep this long in total (a job that can be interrupted)
- FAKE_PROFILE_FROM=DIR: with CCLTUNE_PROFILE set, copy DIR's real profiler files there instead of writing one
"""

import os
import random
import sys
import time

base = float(os.environ.get("FAKE_BASE_MS", "100"))
slow = os.environ.get("FAKE_SLOW") == "1"
rules = os.environ.get("CCLTUNE_RULES")
if rules and "slow" in open(rules).read():
    slow = True
if slow:
    base *= 1 + float(os.environ.get("FAKE_SLOW_PCT", "5")) / 100
fail_if = os.environ.get("FAKE_FAIL_IF")
if fail_if and fail_if in os.environ:
    print("fake job: failing on purpose", flush=True)
    sys.exit(3)
rng = random.Random(f"{os.environ.get('FAKE_SEED', '0')}-{os.getpid()}-{time.time_ns()}")
noise = float(os.environ.get("FAKE_NOISE_PCT", "1")) / 100
steps = int(os.environ.get("FAKE_STEPS", "10"))
sleep_s = float(os.environ.get("FAKE_SLEEP_S", "0"))
for i in range(steps):
    print(f"step {i:3d}  {base * (1 + rng.gauss(0, noise)):9.3f} ms  loss 1.0", flush=True)
    if sleep_s:
        time.sleep(sleep_s / steps)
profile = os.environ.get("CCLTUNE_PROFILE")
if profile and os.environ.get("FAKE_PROFILE_FROM"):  # a real job's files (tests/fixtures/workload)
    import shutil

    src = os.environ["FAKE_PROFILE_FROM"]
    for name in os.listdir(src):
        if name.startswith("ccltune-profile."):
            shutil.copy(os.path.join(src, name), profile)
elif profile:  # as ccltune's profiler plugin writes (format version 1, /work/notes/profile-format.md)
    sum_us = base * 10 * (1 + rng.gauss(0, noise))
    with open(os.path.join(profile, f"ccltune-profile.fakehost.{os.getpid()}.00000000000000ab.0.txt"), "w") as fh:
        fh.write("# ccltune-profile 1\n"
                 f"# host fakehost pid {os.getpid()} comm 00000000000000ab rank 0 nranks 2 nnodes 1 abi 5 every 2\n"
                 "# timing gpu-kernel-channels\n"
                 "# columns kind op count datatype algo proto nchannels nwarps peer calls timed sum_us p10_us "
                 "p50_us p90_us max_us\n"
                 f"coll AllReduce 65536 ncclBfloat16 RING LL 24 16 - 20 10 {sum_us:.3f} 9.0 10.0 11.0 12.0\n"
                 "p2p Send 1048576 ncclInt8 - - 2 - 1 4 0 - - - - -\n"
                 "# dropped entries 0 calls 0\n# end\n")
