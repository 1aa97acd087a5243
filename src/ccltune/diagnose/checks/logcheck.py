"""Findings from a parsed NCCL/RCCL log (pure): version, init, transports, channels, rings,
tuner plugin, process layout, warnings and harmful variables.

The transport rule: between GPUs of one node NCCL should use P2P. SHM means data goes
through host memory; NET between GPUs of one node means neither P2P nor SHM was allowed.
When the caller knows which device pairs could use P2P (``p2p_capable``), SHM on such a
pair is a FAIL; from a log alone it is a WARN.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable

from ccltune.diagnose.checks.envrules import check_env
from ccltune.diagnose.findings import Finding
from ccltune.diagnose.parsers.ncclog import Edge, NcclLog
from ccltune.status import Verdict

P2P_FIX = ("export NCCL_P2P_LEVEL=SYS to let NCCL use P2P across the CPU interconnect "
           "(check with `ccltune topo` that these GPUs can reach each other)")
P2P_DISABLED_FIX = "unset NCCL_P2P_DISABLE (the log says it was set to 1): it makes NCCL use SHM between all GPUs"
DEBUG_FIX = "run with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH,TUNING,ENV"


def check_log(log: NcclLog, *, p2p_capable: Callable[[int, int], bool] | None = None) -> list[Finding]:
    """All log findings. ``p2p_capable(src_dev, dst_dev)`` says whether two local GPUs could use P2P."""
    if log.nccl_lines == 0:
        what = "empty" if log.lines == 0 else f"{log.lines} lines, none from NCCL"
        return [Finding("log", Verdict.WAIVED, f"nothing to analyse: the log is {what}", DEBUG_FIX)]
    return [
        _version(log),
        _init(log),
        check_transports(log, p2p_capable=p2p_capable),
        _channels(log),
        _tuner(log),
        _processes(log),
        _warnings(log),
        *(check_env(log.env, source="the log") if log.env else []),
    ]


def _version(log: NcclLog) -> Finding:
    if len(log.versions) > 1:  # one job, two libraries: a rank loaded another build (issue 41)
        seen = "; ".join(f"{ver} ({where})" for ver, where in log.versions.items())
        return Finding("log:version", Verdict.FAIL, f"the ranks run different {log.library} versions: {seen}",
                       "load one NCCL build on every rank (LD_LIBRARY_PATH, the container image, the wheel's "
                       "nvidia-nccl package)", data={"library": log.library, "versions": list(log.versions)})
    if log.version:
        return Finding("log:version", Verdict.PASS, f"{log.library} {log.version}", data={"library": log.library})
    return Finding("log:version", Verdict.WARN, "no version line: the log starts late or NCCL_DEBUG was not INFO", DEBUG_FIX)


def _init(log: NcclLog) -> Finding:
    if not log.nranks:
        if log.choices or log.plugin_loads:  # collectives ran, so init finished: INIT was not logged
            return Finding("log:init", Verdict.WAIVED, "no INIT lines, though collectives ran (TUNING lines): "
                           "NCCL_DEBUG_SUBSYS left INIT out", DEBUG_FIX)
        return Finding("log:init", Verdict.WARN, "no communicator line (comm ... rank ... nRanks ...): "
                       "the log is truncated or init never began", DEBUG_FIX)
    # a log written per process (NCCL_DEBUG_FILE=...%p) holds its own rank's lines only: judge the ranks it holds
    held = log.ranks_seen or set(range(log.nranks))
    missing = sorted(held - log.init_complete)
    if not missing and len(held) < log.nranks:
        return Finding("log:init", Verdict.PASS, f"{len(held)}/{len(held)} ranks in this log completed init (it holds "
                       f"rank{'s' if len(held) > 1 else ''} {_short(sorted(held))} of {log.nranks}: one process's "
                       "log)", value=len(held))
    if not missing:
        return Finding("log:init", Verdict.PASS, f"{log.nranks}/{log.nranks} ranks completed init", value=log.nranks)
    return Finding("log:init", Verdict.WARN, f"{len(missing)} of {log.nranks} ranks never logged 'Init COMPLETE' "
                   f"(ranks {_short(missing)}): the log is truncated or init failed",
                   "look for NCCL WARN lines; rerun and keep the whole log", value=log.nranks - len(missing))


def check_transports(log: NcclLog, *, p2p_capable: Callable[[int, int], bool] | None = None) -> Finding:
    """PASS when every edge between GPUs of a node uses P2P (network edges between nodes are fine)."""
    if not log.edges:
        return Finding("log:transport", Verdict.WAIVED, "no 'Channel NN/N : a[x] -> b[y] via ...' lines", DEBUG_FIX)
    counts = Counter(e.transport for e in log.edges)
    summary = ", ".join(f"{t} x{n}" for t, n in counts.most_common())
    data = {"transports": dict(counts), "edges": len(log.edges)}
    single_node = log.nnodes == 1
    net_local = _pairs(e for e in log.edges if e.family == "NET" and single_node)
    shm = _pairs(e for e in log.edges if e.family == "SHM")
    if net_local:
        return Finding("log:transport", Verdict.FAIL, f"one node, yet rank pairs {_pair_list(net_local)} use the network: "
                       f"{summary}", "unset NCCL_P2P_DISABLE / NCCL_SHM_DISABLE", data=data | {"net_pairs": net_local})
    if not shm:
        return Finding("log:transport", Verdict.PASS, f"no SHM edges: {summary}", data=data)
    data["shm_pairs"] = shm
    # NCCL_P2P_DISABLE=1 in the log's environment turns P2P off for every pair: that, not the P2P level, is why
    fix = P2P_DISABLED_FIX if log.env.get("NCCL_P2P_DISABLE", "").strip() in ("1", "true", "yes") else P2P_FIX
    if p2p_capable is None:
        return Finding("log:transport", Verdict.WARN, f"rank pairs {_pair_list(shm)} use SHM (host memory), not P2P: "
                       f"{summary}", fix, data=data)
    devs = {(e.src_rank, e.dst_rank): (_dev(e.src_dev, e.src_rank), _dev(e.dst_dev, e.dst_rank))
            for e in log.edges if e.family == "SHM"}
    could = [p for p in shm if p2p_capable(*devs[p])]
    data["shm_pairs_p2p_capable"] = could
    if could:
        return Finding("log:transport", Verdict.FAIL, f"rank pairs {_pair_list(could)} use SHM although their GPUs can "
                       f"reach each other peer-to-peer: {summary}", fix, data=data)
    return Finding("log:transport", Verdict.PASS, f"SHM only between GPUs without peer access "
                   f"({_pair_list(shm)}): {summary}", data=data)


def _channels(log: NcclLog) -> Finding:
    data = {"coll_channels": log.coll_channels, "p2p_channels": log.p2p_channels, "nvls_channels": log.nvls_channels,
            "rings": {str(k): v for k, v in sorted(log.rings.items())}, "trees": log.trees[:8]}
    if log.coll_channels is None and not log.rings:
        return Finding("log:channels", Verdict.WAIVED, "no 'coll channels' or ring lines", DEBUG_FIX, data=data)
    parts = []
    if log.coll_channels is not None:
        parts.append(f"{log.coll_channels} coll channels, {log.p2p_channels} p2p channels")
    if log.rings:
        first = min(log.rings)
        parts.append(f"{len(log.rings)} rings (channel {first}: {' '.join(map(str, log.rings[first]))})")
    if log.trees:
        parts.append(f"{len(log.trees)} tree lines")
    return Finding("log:channels", Verdict.PASS, "; ".join(parts), value=log.coll_channels, data=data)


def _tuner(log: NcclLog) -> Finding:
    wanted = log.env.get("NCCL_TUNER_PLUGIN")
    if log.tuner_plugin:
        return Finding("log:tuner", Verdict.PASS, f"external tuner plugin loaded: {log.tuner_plugin}",
                       data={"plugin": log.tuner_plugin})
    if wanted:
        return Finding("log:tuner", Verdict.WARN, f"NCCL_TUNER_PLUGIN={wanted} is set but no plugin loaded",
                       "check the library path and its NCCL_DEBUG_SUBSYS=TUNING lines", data={"wanted": wanted})
    return Finding("log:tuner", Verdict.PASS, "no external tuner plugin: NCCL's internal tuning")


def _processes(log: NcclLog) -> Finding:
    if not log.rank_process:
        return Finding("log:processes", Verdict.WAIVED, "no 'comm ... rank ... nRanks' lines with a host:pid prefix")
    by_proc: dict[tuple[str, int], list[int]] = {}
    for rank, proc in sorted(log.rank_process.items()):
        by_proc.setdefault((proc.host, proc.pid), []).append(rank)
    n_ranks, n_procs = len(log.rank_process), len(by_proc)
    data = {"ranks": n_ranks, "processes": n_procs, "layout": "process-per-gpu"}
    if n_procs == n_ranks:
        return Finding("log:processes", Verdict.PASS, f"{n_ranks} ranks in {n_procs} processes (one process per GPU)",
                       data=data)
    threads = len({log.rank_threads[r] for r in log.rank_process})
    data["layout"] = "threads" if threads > n_procs else "one-thread-many-gpus"
    how = f"{threads} threads" if threads > n_procs else "one thread driving several GPUs"
    return Finding("log:processes", Verdict.PASS, f"{n_ranks} ranks in {n_procs} process{'es' if n_procs > 1 else ''}, {how}: figures are not "
                   "comparable with one process per GPU (NCCL uses P2P/direct pointer inside a process)", data=data)


def _warnings(log: NcclLog) -> Finding:
    if not log.warnings:
        return Finding("log:warnings", Verdict.PASS, "no NCCL WARN lines")
    return Finding("log:warnings", Verdict.WARN, f"{len(log.warnings)} NCCL WARN lines, first: {log.warnings[0]}",
                   "read the NCCL WARN lines of the log", value=len(log.warnings), data={"warnings": log.warnings[:20]})


def _pairs(edges: Iterable[Edge]) -> list[tuple[int, int]]:
    return sorted({(e.src_rank, e.dst_rank) for e in edges})


def _pair_list(pairs: list[tuple[int, int]]) -> str:
    shown = ", ".join(f"{a}->{b}" for a, b in pairs[:8])
    return shown + (f" and {len(pairs) - 8} more" if len(pairs) > 8 else "")


def _dev(text: str, rank: int) -> int:
    """The CUDA device in an edge's brackets (NCCL >= 2.19); older logs put a busId there, then the rank."""
    return int(text) if text.isdigit() and len(text) <= 2 else rank


def _short(ranks: list[int]) -> str:
    return ", ".join(map(str, ranks[:16])) + (" ..." if len(ranks) > 16 else "")

