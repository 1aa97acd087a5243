"""A/B a job by hand, without `ccltune ab`: the cross-check of ab's verdict (issue 28).

Runs the command N times per arm, arms interleaved in shuffled pairs (a fresh order per pair,
fixed seed), takes each run's median of the numbers a regular expression matches in its output,
and prints every run, then each arm's median and the default/arm comparison: the count of pairs
where the arm was slower, and the Hodges-Lehmann ratio with its 95% Moses interval (the same
statistic `ccltune ab` uses, so that only the harness differs: arm environments, the plugin's
loading, the order of runs).

    python3 bench/hand_ab.py --runs 10 --metric 'step +[0-9]+ +([0-9.]+) ms' \
        --arm rules:NCCL_TUNER_PLUGIN=plugin/build/libnccl-tuner-ccltune.so,CCLTUNE_RULES=cand.conf \
        -- torchrun --standalone --nproc-per-node 2 examples/train_transformer.py --mode fsdp2

The arm `default` (the environment as given) is always run. A benchmark script: it prints a table.
"""
from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import subprocess
import sys
import time


def parse_arm(text: str) -> tuple[str, dict[str, str]]:
    name, _, spec = text.partition(":")
    env = {}
    for item in filter(None, spec.split(",")):
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"hand_ab: --arm {text!r}: {item!r} is not NAME=VALUE")
        env[key] = value
    if not name or name == "default":
        raise SystemExit(f"hand_ab: --arm {text!r}: give the arm a name other than 'default'")
    return name, env


def one_run(cmd: list[str], env: dict[str, str], pattern: re.Pattern[str], timeout_s: float) -> float | None:
    full = dict(os.environ, **env)
    try:
        out = subprocess.run(cmd, env=full, capture_output=True, text=True, timeout=timeout_s).stdout
    except subprocess.TimeoutExpired:
        return None
    values = [float(m.group(1)) for m in pattern.finditer(out)]
    return statistics.median(values) if values else None


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=10, help="runs per arm")
    p.add_argument("--metric", required=True, help="regex with one group: a number per match")
    p.add_argument("--arm", action="append", default=[], help="NAME:VAR=VALUE,VAR=VALUE")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per run")
    p.add_argument("command", nargs=argparse.REMAINDER)
    a = p.parse_args()
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not cmd or not a.arm:
        p.error("give --arm and a command after --")
    arms = [("default", {})] + [parse_arm(t) for t in a.arm]
    pattern = re.compile(a.metric)
    rng = random.Random(a.seed)
    values: dict[str, list[float]] = {name: [] for name, _ in arms}
    print(f"# hand A/B: {len(arms)} arms x {a.runs} runs, shuffled per round (seed {a.seed}): {' '.join(cmd)}")
    for name, env in arms:
        print(f"#   arm {name}: {' '.join(f'{k}={v}' for k, v in env.items()) or 'the environment as given'}")
    print(f"# {'round':>5} {'arm':<12} {'value':>10} {'wall_s':>7}")
    for r in range(1, a.runs + 1):
        order = list(arms)
        rng.shuffle(order)
        for name, env in order:
            t0 = time.monotonic()
            v = one_run(cmd, env, pattern, a.timeout)
            print(f"  {r:>5} {name:<12} {'failed' if v is None else f'{v:.3f}':>10} {time.monotonic() - t0:7.1f}", flush=True)
            if v is not None:
                values[name].append(v)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))
    from ccltune.ab import judge

    base = values["default"]
    print(f"# {'arm':<12} {'runs':>4} {'median':>10} {'ratio':>7} {'95% interval':>18} {'slower/pairs':>13}  verdict")
    print(f"  {'default':<12} {len(base):>4} {statistics.median(base) if base else float('nan'):>10.3f}")
    for name, _ in arms[1:]:
        vals = values[name]
        if len(vals) < 2 or len(base) < 2:
            print(f"  {name:<12} {len(vals):>4}  too few runs")
            continue
        e = judge.effect(vals, base)
        pairs = list(zip(vals, base))
        slower = sum(1 for x, y in pairs if x > y)
        print(f"  {name:<12} {len(vals):>4} {statistics.median(vals):>10.3f} {e.ratio:>7.4f} "
              f"[{e.ratio_lo:.4f}, {e.ratio_hi:.4f}] {slower:>6}/{len(pairs):<6}  {judge.judge(e).value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
