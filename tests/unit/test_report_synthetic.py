"""Synthetic results database for the report tests (TEST DATA, not measurements).

``fill_store`` writes one run of each kind the report reads, shaped like what
``bench``/``sweep``/``tune --workload``/``validate``/``links``/``doctor`` record: an 8-GPU H100 node,
NCCL-like curves (latency + bytes / bandwidth), a driver update that slows 1M-16M by 10%,
one slow NVLink pair, and a finding whose text holds markup (it must be escaped).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from ccltune.store import Measurement, Store
from ccltune.tune import weighted
from ccltune.tune.derive import derive
from ccltune.tune.source import source_rows
from ccltune.workload.model import Entry, Key, Workload

N_RANKS = 8
BENCH_SIZES = [1 << e for e in range(3, 31)]  # 8B .. 1G
SWEEP_SIZES = [1 << e for e in range(10, 29, 2)]  # 1K .. 256M
# busbw factor, small-message latency (us), peak busbw (GB/s)
COLLECTIVES = {"all_reduce": (2 * (N_RANKS - 1) / N_RANKS, 12.0, 360.0),
               "all_gather": ((N_RANKS - 1) / N_RANKS, 9.0, 330.0)}
CANDIDATES = [(a, p, c) for a in ("ring", "tree") for p in ("ll", "ll128", "simple") for c in (16, 32)]
RULES = """# ccltune tuned rules (TEST DATA)
platform,gpu=H100
allreduce,0,64K,tree,ll,16,1,8
allreduce,32K,8M,ring,ll128,32,1,8
allreduce,8M,16G,ring,simple,32,1,8
allgather,0,1M,ring,ll,16,1,8
allgather,1M,16G,ring,simple,32,1,8
allgather,oops,1M,ring,ll,16
"""
SLOW_LINK = (3, 5)
MARKUP = "<script>alert('x')</script> & <b>bold</b>"


def workload() -> Workload:
    """A training job's collectives (TEST DATA): gradient buckets, a few small all_reduces, an
    all_gather and a broadcast of one size nobody swept; 50 steps."""
    return Workload([Entry(Key("all_reduce", 16 << 20, N_RANKS, "float", 4 << 20), 10),
                     Entry(Key("all_reduce", 1 << 20, N_RANKS, "float", 1 << 18), 4),
                     Entry(Key("all_reduce", 4 << 10, N_RANKS, "float", 1 << 10), 20),
                     Entry(Key("all_gather", 4 << 20, N_RANKS, "float", 1 << 20), 2),
                     Entry(Key("broadcast", 1 << 10, N_RANKS, "float", 1 << 8), 1)], [], steps=50)


def env(host: str, driver: str) -> dict:
    return {
        "host": host, "gpus": [{"name": "NVIDIA H100 80GB HBM3"}] * N_RANKS, "driver_version": driver,
        "cuda_version": "12.4", "nccl_version": "2.21.5", "nccl_library": "/usr/lib/libnccl.so.2",
        "torch_version": "2.4.0", "world_size": N_RANKS, "n_nodes": 1, "launcher": "torchrun",
        "platform": f"NVIDIA H100 80GB HBM3 x{N_RANKS}",
        "variables": {"NCCL_DEBUG": "WARN", "NCCL_IB_DISABLE": "1" if host == "node-a" else "0"},
    }


def _point(coll: str, size: int, scale: float = 1.0, lat_scale: float = 1.0) -> tuple[float, float, float]:
    factor, lat, peak = COLLECTIVES[coll]
    t = lat * lat_scale + size * factor / (peak * scale * 1e3)
    algbw = size / t / 1e3
    return t, algbw, algbw * factor


def _meas(coll: str, size: int, t: float, algbw: float, busbw: float, **kw) -> Measurement:
    return Measurement(collective=coll, size_bytes=size, count=size // 4, dtype="float", op="sum",
                       root=None, in_place=False, n_ranks=N_RANKS, time_us=t, algbw_gbps=algbw,
                       busbw_gbps=busbw, wrong=0, **kw)


@dataclass
class SyntheticRuns:
    bench_a: int
    bench_b: int
    sweep: int
    tune: int
    validate: int
    links: int
    doctor: int


def fill_store(store: Store, seed: int = 7) -> SyntheticRuns:
    rng = random.Random(seed)
    ids = {}
    for name, host, driver in (("bench_a", "node-a", "550.54.15"), ("bench_b", "node-b", "560.28.03")):
        rid = store.begin_run("bench", command="ccltune bench all_reduce all_gather -b 8 -e 1G", env=env(host, driver))
        rows = []
        for coll in COLLECTIVES:
            for size in BENCH_SIZES:
                slow = name == "bench_b" and (1 << 20) <= size <= (16 << 20)
                t, a, b = _point(coll, size, 0.9 if slow else 1.0, 1.11 if slow else 1.0)
                rows.append(_meas(coll, size, t, a, b))
        store.add_measurements(rid, rows)
        store.finish_run(rid, "complete")
        ids[name] = rid

    rid = store.begin_run("sweep", command="ccltune sweep all_reduce all_gather -b 1K -e 256M -f 4", env=env("node-a", "550.54.15"))
    rows = []
    for coll in COLLECTIVES:
        for size in SWEEP_SIZES:
            for rep in range(3):
                jitter = 1 + rng.uniform(-0.02, 0.02)
                t, a, b = _point(coll, size, jitter)
                rows.append(_meas(coll, size, t, a, b, rep=rep))
                for algo, proto, ch in CANDIDATES:
                    small = {"ll": 0.7, "ll128": 0.85, "simple": 1.3}[proto] * (0.9 if algo == "tree" else 1.0)
                    big = {"ll": 0.45, "ll128": 0.9, "simple": 1.05}[proto] * (1 if ch == 32 else 0.8)
                    t, a, b = _point(coll, size, big * jitter, small)
                    rows.append(_meas(coll, size, t, a, b, rep=rep, algo=algo, proto=proto, channels=ch,
                                      config=f"{algo}/{proto}/{ch}"))
    store.add_measurements(rid, rows)
    store.finish_run(rid, "complete")
    ids["sweep"] = rid

    # as `ccltune tune --workload` records it: no host or GPUs of its own, the runs it derived from and
    # its prediction (the real derive and weighted.plan over the sweep just stored) in its summary;
    # the rule file is RULES, with faults the report must show
    _, sweep_rows = source_rows(store, [ids["sweep"]])
    plans = weighted.plan(workload(), derive(sweep_rows))
    rid = store.begin_run("tune", command="ccltune tune --out rules.txt --workload train.json",
                          env={"ccltune_version": "0.1", "platform": "H100"})
    store.add_artifact(rid, "rules", RULES)
    store.finish_run(rid, "complete", {"source_runs": [ids["sweep"]], "workload": "train.json",
                                       "predictions": [weighted.summary(p) for p in plans]})
    ids["tune"] = rid

    rid = store.begin_run("validate", command="ccltune validate --rules rules.txt", env=env("node-a", "550.54.15"))
    sizes = []
    for coll in COLLECTIVES:
        for size in SWEEP_SIZES:
            speed = 1.25 if size < (64 << 10) else (0.93 if size == (4 << 20) and coll == "all_gather" else 1.02)
            noise = 1.5 + 2.0 * rng.random()
            sizes.append({"collective": coll, "size_bytes": size, "speedup": speed, "noise_pct": noise,
                          "slower": speed < 1 - noise / 100})
    store.finish_run(rid, "complete", {"verdict": "FAIL", "sizes": sizes})
    ids["validate"] = rid

    rid = store.begin_run("links", command="ccltune links", env=env("node-a", "550.54.15"))
    links = []
    for method in ("ce", "sm"):
        for src in range(N_RANKS):
            for dst in range(N_RANKS):
                if src != dst:
                    bw = (375.0 if method == "ce" else 330.0) * (1 + rng.uniform(-0.01, 0.01))
                    if (src, dst) == SLOW_LINK:
                        bw = 120.0 if method == "ce" else 110.0
                    links.append({"src": src, "dst": dst, "method": method, "direction": "uni",
                                  "size_bytes": 1 << 28, "bandwidth_gbps": bw, "latency_us": 2.1})
    store.add_links(rid, links)
    store.finish_run(rid, "complete", {"slowest": {"src": SLOW_LINK[0], "dst": SLOW_LINK[1], "method": "sm",
                                                   "direction": "uni", "bandwidth_gbps": 110.0,
                                                   "latency_us": 2.1}, "ceiling_gbps": 400})
    ids["links"] = rid

    rid = store.begin_run("doctor", command="ccltune doctor", env=env("node-a", "550.54.15"))
    store.add_findings(rid, [
        {"name": "driver", "status": "PASS", "evidence": "550.54.15 supports CUDA 12.4"},
        {"name": "nvlink", "status": "FAIL", "evidence": "GPU 3 -> 5 at 110 GB/s, 29% of the others",
         "fix": "reseat or replace the NVLink bridge between GPU 3 and 5"},
        {"name": "acs", "status": "WARN", "evidence": MARKUP, "fix": "disable ACS in the BIOS"},
        {"name": "infiniband", "status": "WAIVED", "evidence": "single node: not needed"},
    ])
    store.finish_run(rid, "complete")
    ids["doctor"] = rid
    return SyntheticRuns(**ids)


def test_fill_store_writes_every_kind(tmp_path):
    with Store(tmp_path / "t.db") as store:
        runs = fill_store(store)
        kinds = [r.kind for r in store.runs()]
        assert kinds == ["bench", "bench", "sweep", "tune", "validate", "links", "doctor"]
        assert store.artifacts(runs.tune)["rules"] == RULES
        assert len(store.links(runs.links)) == 2 * N_RANKS * (N_RANKS - 1)
