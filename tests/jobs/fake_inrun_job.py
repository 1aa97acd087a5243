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
- FAKE_GRAPH_AFTER=N: no tuner call after step N (the collectives replayed from CUDA graphs)
- FAKE_NO_LOGS=1: write no arm log (a job whose NCCL did not load the plugin)
- FAKE_NCCL_VERSION=2.28.9: print NCCL's version line first
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
period = int(env.get("FAKE_PERIOD", "3"))
block_calls = period * int(spec["block_periods"])
max_blocks = int(spec["max_blocks"])
found_at = 2 * period
steps = int(env.get("FAKE_STEPS", "200"))
step_s = float(env.get("FAKE_STEP_S", "0.003"))
graph_after = int(env.get("FAKE_GRAPH_AFTER", str(1 << 30)))
ranks = int(env.get("FAKE_RANKS", "2"))
base = float(env.get("FAKE_BASE_MS", "100"))
noise = float(env.get("FAKE_NOISE_PCT", "0.3")) / 100
drift = float(env.get("FAKE_DRIFT_PCT", "0")) / 100
rng = random.Random(f"{env.get('FAKE_SEED', '0')}-{os.getpid()}")
blocks: list[list[tuple[int, int, int, int]]] = [[] for _ in range(ranks)]
call, arm = 0, 0
for i in range(steps):
    if i < graph_after:
        for _ in range(period):
            if call >= found_at and (call - found_at) % block_calls == 0:
                b = (call - found_at) // block_calls
                arm = arm_at(b, n_arms, seed, warmup) if b < max_blocks else 0
                if b < max_blocks:
                    now = time.time_ns()
                    for r in range(ranks):  # each rank tunes the call a little apart
                        blocks[r].append((b, arm, call, now + rng.randrange(0, 200_000)))
            call += 1
    time.sleep(step_s)
    ms = base * factor[arm] * (1 + drift * i / steps) * (1 + rng.gauss(0, noise))
    if env.get("FAKE_TPS") == "1":
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
            f"nranks={ranks}", f"seed={seed}", f"period={period}", f"found_at={found_at}".replace("found_at", "period_found_at"),
            f"block_calls={block_calls}", f"arms={names}", f"calls={call}",
            "# block,arm,first_call,t_ns          (t_ns: CLOCK_REALTIME ns when the block's first call was tuned)",
            *(f"{b},{a},{c},{t}" for b, a, c, t in blocks[r]), "# end", ""]
        final = os.path.join(spec["log"], f"ccltune-arms.fakehost.{pid}.00000000000000ab.0.txt")
        with open(final + ".tmp", "w") as fh:
            fh.write("\n".join(body))
        os.rename(final + ".tmp", final)
