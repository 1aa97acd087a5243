"""Databases for the report tests (TEST DATA): a 12-run mixed one and many small imports.

``mixed_store`` holds what a user's database does after a few days, 13 runs: the synthetic runs
of ``test_report_synthetic.fill_store`` (two benches, a sweep, a tune --workload, validate,
links, doctor on an 8-GPU H100 node), a check run with two measured sizes and findings, four
imports of real-format files (nccl-tests 2.19.0 on 4 H200s, rccl-tests on 8 MI250X GCDs,
TransferBench a2a on 8 MI300X, nvbandwidth on 4 H100), each through ``ccltune import`` as a user
runs it, and a replay of the tuned workload (``add_replay``).
``many_store`` copies small imports into ``n`` runs (the scale benchmark, bench/report_scale.py).
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from ccltune.cli import main
from ccltune.store import Measurement, Store
from test_report_synthetic import fill_store

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
NCCLT_H200 = FIXTURES / "nccl-tests" / "ncclt-2.19.0_all_reduce_h200x4.txt"
RCCLT = FIXTURES / "rccl-tests" / "rccl-tests-2022-10_all_reduce_np8.txt"
TRANSFERBENCH = FIXTURES / "transferbench" / "a2a_mi300x_8gpu.txt"
NVBANDWIDTH = FIXTURES / "nvbandwidth" / "h100_4gpu.json"


def _quiet(argv: list[str]) -> None:
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()):
        assert main(argv) == 0, argv


def mixed_store(db: Path) -> None:
    with Store(db) as store:
        fill_store(store)  # runs 1-7
        env = {"host": "node-a", "gpus": [{"name": "NVIDIA H100 80GB HBM3"}] * 8, "world_size": 8, "n_nodes": 1,
               "platform": "NVIDIA H100 80GB HBM3 x8", "command": "ccltune check --profile h100-8", "nccl_version": "2.21.5",
               "variables": {"NCCL_DEBUG": "WARN", "CCLTUNE_OUTCOME_FILE": "/tmp/ccltune-outcome-1",
                             "CCLTUNE_COMMAND": "ccltune check", "CCLTUNE_ENGINE_NOTE": "x"}}
        rid = store.begin_run("check", command="ccltune check --profile h100-8", env=env)  # run 8
        rows = [Measurement("all_reduce", s, s // 4, "float", "sum", None, False, 8, time_us=t, algbw_gbps=s / t / 1e3,
                            busbw_gbps=1.75 * s / t / 1e3) for s, t in ((1 << 30, 5900.0), (8 << 30, 47000.0))]
        rows.append(Measurement("all_reduce", 1 << 20, 1 << 18, "float", "sum", None, False, 8, status="error",
                                note="timeout"))
        store.add_measurements(rid, rows)
        store.add_findings(rid, [{"name": "gate:all_reduce busbw at 8G", "status": "PASS",
                                  "evidence": "330.4 GB/s >= 300 GB/s"},
                                 {"name": "gate:all_reduce at 1M", "status": "ERROR", "evidence": "timeout"}])
        store.finish_run(rid, "complete")
    _quiet(["import", "nccl-tests", str(NCCLT_H200), "--db", str(db)])  # run 9
    _quiet(["import", "nccl-tests", str(RCCLT), "--db", str(db), "--gpu", "AMD Instinct MI250X"])  # run 10
    _quiet(["import", "transferbench", str(TRANSFERBENCH), "--db", str(db), "--gpu", "AMD Instinct MI300X"])  # 11
    _quiet(["import", "nvbandwidth", str(NVBANDWIDTH), "--db", str(db)])  # run 12
    with Store(db) as store:
        add_replay(store)  # run 13


def add_replay(store: Store, seed: int = 3) -> int:
    """A ``ccltune replay`` run of the synthetic workload on node-a, stored as ReplayRun stores it
    (TEST DATA timings): each entry timed alone per arm as measurement rows ``config=<arm>``, the
    rules artifact, and the summary of the real ``replay_run._summary`` over the real verdict of
    rounds per step (the rules save about 8%, noise about 1%)."""
    import random

    from ccltune.validate import replay as replay_plan
    from ccltune.validate.replay_run import ReplayResult, _summary
    from test_report_synthetic import RULES, _meas, _point, env, workload

    rng = random.Random(seed)
    wl = workload()
    e = {**env("node-a", "550.54.15"), "command": "ccltune replay train.json --rules rules.txt"}
    rid = store.begin_run("replay", command=e["command"], env=e)
    store.add_artifact(rid, "rules", RULES)
    per_entry, per_round = {}, {"default": 0.0, "rules": 0.0}
    for i, entry in enumerate(wl.entries):
        k = entry.key
        rows = []
        for arm, gain in (("default", 1.0), ("rules", 0.8 if k.size_bytes <= (4 << 20) else 1.0)):
            for rep in range(5):
                t, a, b = _point(k.collective, k.size_bytes) if k.collective in ("all_reduce", "all_gather") \
                    else (20.0, 1024 / 20.0 / 1e3, 1024 / 20.0 / 1e3)
                f = gain * (1 + rng.uniform(-0.01, 0.01))
                rows.append(_meas(k.collective, k.size_bytes, t * f, a / f, b / f, rep=rep, config=arm))
            per_round[arm] += entry.calls * t * gain
        per_entry[i] = rows
        store.add_measurements(rid, rows)
    # a round issues the whole captured sequence once (every call of every step): its seconds, then
    # per step as ReplayRun does
    rounds = {arm: replay_plan.per_step([us * (1 + rng.uniform(-0.01, 0.01)) / 1e6 for _ in range(5)], wl.steps)
              for arm, us in per_round.items()}
    v = replay_plan.verdict(rounds, wl.steps, replay_plan.entry_times(wl, per_entry))
    store.finish_run(rid, "complete", _summary(ReplayResult(verdict=v, rounds=rounds)))
    return rid


def many_store(db: Path, n: int) -> None:
    """``n`` runs: two small imports (an nccl-tests result, a TransferBench matrix) made with
    ``ccltune import``, then copied as new runs by SQL (hosts node-0..node-9), so building
    1,000 runs takes a second, not a thousand imports."""
    seed = db.with_suffix(".seed.db")
    seed.unlink(missing_ok=True)
    _quiet(["import", "nccl-tests", str(NCCLT_H200), "--db", str(seed)])
    _quiet(["import", "transferbench", str(TRANSFERBENCH), "--db", str(seed), "--gpu", "AMD Instinct MI300X"])
    shutil.copyfile(seed, db)
    seed.unlink()
    con = sqlite3.connect(db)
    cols = [r[1] for r in con.execute("PRAGMA table_info(runs)") if r[1] != "id"]
    mcols = [r[1] for r in con.execute("PRAGMA table_info(measurements)") if r[1] not in ("id", "run_id")]
    lcols = [r[1] for r in con.execute("PRAGMA table_info(links)") if r[1] not in ("id", "run_id")]
    fcols = [r[1] for r in con.execute("PRAGMA table_info(findings)") if r[1] not in ("id", "run_id")]
    for k in range(n - 2):
        src = 1 + k % 2
        cur = con.execute(f"INSERT INTO runs({', '.join(cols)}) SELECT {', '.join(cols)} FROM runs WHERE id = ?",
                          (src,))
        new = cur.lastrowid
        con.execute("UPDATE runs SET env_json = json_set(env_json, '$.host', ?), host = ? WHERE id = ?",
                    (f"node-{k % 10}", f"node-{k % 10}", new))
        for table, c in (("measurements", mcols), ("links", lcols), ("findings", fcols)):
            con.execute(f"INSERT INTO {table}(run_id, {', '.join(c)}) SELECT ?, {', '.join(c)} FROM {table} "
                        "WHERE run_id = ?", (new, src))
    con.commit()
    con.close()
