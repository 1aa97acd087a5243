"""A fake training job for ``ccltune ab --in-run`` and ``ccltune search`` (TEST DATA): it plays ccltune's tuner
plugin with in-run arms (CONTRACTS.md section 2): reads the arms file CCLTUNE_ARMS, counts FAKE_PERIOD tuner
calls per step, finds its period after two steps, switches arms in blocks by ccltune's Python twin of the
plugin's schedule, writes an arm log per simulated rank at exit (temp + rename), and prints a step line per step
whose value depends on the arm in force.

- FAKE_EFFECTS: JSON {regex: percent}: an arm whose rule file's text matches regex is that many percent slower
  (negative: faster); default {"slow": 5}
- FAKE_BASE_MS (100), FAKE_NOISE_PCT (0.3), FAKE_DRIFT_PCT (0: step time grows linearly by this over the run)
- FAKE_STEPS (200), FAKE_STEP_S (0.003: the step's wall time), FAKE_PERIOD (3), FAKE_RANKS (2 arm logs)
- FAKE_TPS=1: print torchtitan's 'step: N  loss: 1.0  tps: 12,345' (tokens/s, higher is better) instead of
  'step N  T ms'
- FAKE_BUFFERED=1: stdout block-buffered (as a non-Python job's through a pipe)
- FAKE_QUIET=1: no step line at all
- FAKE_GRAPH_AFTER=N: no tuner call after step N (the collectives replayed from CUDA graphs)
- FAKE_NO_LOGS=1: write no arm log (a job whose NCCL did not load the plugin)
- FAKE_NCCL_VERSION=2.28.9: print NCCL's version line first
- FAKE_ENV_EFFECTS: JSON {"NAME=VALUE": percent}: a whole run (no CCLTUNE_ARMS) with that variable set is that
  many percent slower (negative: faster); FAKE_WHOLE_STEPS: the steps of such a run (default FAKE_STEPS)
- CCLTUNE_PROFILE set (ccltune's profiler plugin loaded): a profiler file per simulated rank (format 2, arms from
  the tuner, GPU timestamps: each step's FAKE_PERIOD calls, the step lasting its printed time on the GPU too)
"""

import importlib.util  # noqa: E402 - ccltune's twin of the plugin's schedule, from this checkout whatever is installed
import json
import os
import random
import re
import sys
import time

_twin = importlib.util.spec_from_file_location("schedule", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                               "..", "src", "ccltune", "ab", "schedule.py"))
schedule = importlib.util.module_from_spec(_twin)
_twin.loader.exec_module(schedule)
arm_at = schedule.arm_at

env = os.environ
if env.get("FAKE_BUFFERED") == "1":
    sys.stdout = open(1, "w", buffering=1 << 16, closefd=False)  # noqa: SIM115
if env.get("FAKE_NCCL_VERSION"):
    print(f"host:1:1 [0] NCCL INFO NCCL version {env['FAKE_NCCL_VERSION']}+cuda12.9", flush=True)
spec: dict = {"arms": [], "seed": "0", "warmup_blocks": "0", "block_periods": "1", "max_blocks": "0", "log": ""}
if not env.get("CCLTUNE_ARMS"):  # a whole run (ccltune ab without --in-run): NCCL's default, no arm log
    spec["arms"] = [("default", None)]
for line in open(env["CCLTUNE_ARMS"]) if env.get("CCLTUNE_ARMS") else []:
    line = line.strip()
    if not line or line.startswith("#"):
        continue
    key, _, value = line.partition("=")
    if key == "arm":
        name, _, rules = value.partition(" rules=")
        spec["arms"].append((name, rules or None))
    else:
        spec[key] = value
effects = json.loads(env.get("FAKE_EFFECTS", '{"slow": 5}'))
factor = []
for _, rules in spec["arms"]:
    text = open(rules).read() if rules else ""
    f = 1.0
    for pattern, pct in effects.items():
        if rules and re.search(pattern, text, re.M):
            f *= 1 + pct / 100
    factor.append(f)
n_arms, seed, warmup = len(spec["arms"]), int(spec["seed"]), int(spec["warmup_blocks"])
period = int(env.get("FAKE_PERIOD", "3"))  # tuner calls a step
found = int(env.get("FAKE_FOUND_PERIOD", str(period)))  # the period the "plugin" found (1: a decode loop's one key)
step_calls = int(spec.get("step_calls", "0"))
repeat = found
found = schedule.step_period(found, step_calls)  # the arms file's step_calls, as the plugin rounds to it
if spec.get("period", "auto") != "auto":
    found = repeat = int(spec["period"])
block_calls = found * int(spec["block_periods"])
max_blocks = int(spec["max_blocks"])
found_at = 2 * period
steps = int(env.get("FAKE_STEPS", "200"))
if not env.get("CCLTUNE_ARMS"):
    steps = int(env.get("FAKE_WHOLE_STEPS", str(steps)))
    for setting, pct in json.loads(env.get("FAKE_ENV_EFFECTS", "{}")).items():
        name, _, value = setting.partition("=")
        if env.get(name) == value:
            factor[0] *= 1 + pct / 100
step_s = float(env.get("FAKE_STEP_S", "0.003"))
graph_after = int(env.get("FAKE_GRAPH_AFTER", str(1 << 30)))
ranks = int(env.get("FAKE_RANKS", "2"))
base = float(env.get("FAKE_BASE_MS", "100"))
noise = float(env.get("FAKE_NOISE_PCT", "0.3")) / 100
drift = float(env.get("FAKE_DRIFT_PCT", "0")) / 100
rng = random.Random(f"{env.get('FAKE_SEED', '0')}-{os.getpid()}")
blocks: list[list[tuple[int, int, int, int]]] = [[] for _ in range(ranks)]
call, arm = 0, 0
gpu_t = 1_764_000_000_000_000_000
gpu_calls: list[tuple[int, int, int, int]] = []   # (seq, position in the step, arm, start_ns)
for i in range(steps):
    if i < graph_after:
        for k in range(period):
            if call >= found_at and (call - found_at) % block_calls == 0:
                b = (call - found_at) // block_calls
                arm = arm_at(b, n_arms, seed, warmup) if b < max_blocks else 0
                if b < max_blocks:
                    now = time.time_ns()
                    for r in range(ranks):  # each rank tunes the call a little apart
                        blocks[r].append((b, arm, call, now + rng.randrange(0, 200_000)))
            gpu_calls.append((call, k, arm, gpu_t + k * 100_000))
            call += 1
    time.sleep(step_s)
    ms = base * factor[arm] * (1 + drift * i / steps) * (1 + rng.gauss(0, noise))
    gpu_t += int(ms * 1e6)
    if env.get("FAKE_QUIET") == "1":   # a job that prints no step line (ab --in-run --metric gpu needs none)
        pass
    elif env.get("FAKE_TPS") == "1":
        print(f"step: {i:4d}  loss: 1.0  tps: {8192 * 1000 / ms * 100:,.0f}", flush=env.get("FAKE_BUFFERED") != "1")
    else:
        print(f"step {i:3d}  {ms:9.3f} ms  loss 1.0", flush=env.get("FAKE_BUFFERED") != "1")
sys.stdout.flush()
if env.get("FAKE_NO_LOGS") != "1" and env.get("CCLTUNE_ARMS"):
    names = ",".join(n for n, _ in spec["arms"])
    for r in range(ranks):
        pid = os.getpid() * 10 + r
        body = [
            "# ccltune-arms 1", "host=fakehost", f"pid={pid}", "comm_id=0x00000000000000ab", "comm_seq=0",
            f"nranks={ranks}", f"seed={seed}", f"period={found}", f"found_at={found_at}".replace("found_at", "period_found_at"),
            f"block_calls={block_calls}", *([f"sequence_period={repeat}", f"step_calls={step_calls}"]
                                            if spec.get("period", "auto") == "auto" else []),
            f"arms={names}", f"calls={call}",
            "# block,arm,first_call,t_ns          (t_ns: CLOCK_REALTIME ns when the block's first call was tuned)",
            *(f"{b},{a},{c},{t}" for b, a, c, t in blocks[r]), "# end", ""]
        final = os.path.join(spec["log"], f"ccltune-arms.fakehost.{pid}.00000000000000ab.0.txt")
        with open(final + ".tmp", "w") as fh:
            fh.write("\n".join(body))
        os.rename(final + ".tmp", final)
if env.get("CCLTUNE_PROFILE") and gpu_calls:
    own_us = 50.0
    per_entry = [sum(1 for c in gpu_calls if c[1] == k) for k in range(period)]
    arms_seen = sorted({c[2] for c in gpu_calls})
    for r in range(ranks):
        pid = os.getpid() * 10 + r
        body = ["# ccltune-profile 2", f"# host fakehost pid {pid} comm 00000000000000ab rank {r} nranks {ranks} "
                "nnodes 1 abi 5 every 1", "# timing gpu-kernel-channels", "# arms tuner",
                "# columns kind op count datatype algo proto nchannels nwarps peer calls timed sum_us p10_us p50_us "
                "p90_us max_us",
                *(f"coll AllReduce {1024 * (k + 1)} ncclBfloat16 RING SIMPLE 8 16 - {n} {n} {n * own_us:.3f} "
                  f"{own_us:.3f} {own_us:.3f} {own_us:.3f} {own_us:.3f}" for k, n in enumerate(per_entry)),
                "# sums arm calls timed sum_us no_entry",
                *(f"arm {a} {m} {m} {m * own_us:.3f} 0" for a in arms_seen
                  for m in [sum(1 for c in gpu_calls if c[2] == a)]),
                "# calls seq entry arm start_ns end_ns",
                *(f"call {seq} {k} {a} {t + 1000 * r} {t + 1000 * r + int(own_us * 1000)}" for seq, k, a, t in gpu_calls),
                "# dropped entries 0 calls 0 arms 0", "# end", ""]
        final = os.path.join(env["CCLTUNE_PROFILE"], f"ccltune-profile.fakehost.{pid}.00000000000000ab.{r}.txt")
        with open(final + ".tmp", "w") as fh:
            fh.write("\n".join(body))
        os.rename(final + ".tmp", final)
