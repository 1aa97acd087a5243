"""The page's first answer: one card per node and run group, from the runs stored.

A *node* is a host and its GPU model. A *run group* is one job shape on that node, as a user
reads it: the rank count and the NCCL (or RCCL) version the runs recorded. Runs that measure
the node itself whatever job runs on it (doctor, links, topo: ``NODE_WIDE``) feed every group
of their node; a tune run, which records no host, joins the group of the runs it was derived
from (its summary's ``source_runs``), so sweep -> tune -> validate -> replay on one node and
one NCCL reads as one card. A node with node-wide runs only gets one card of its own.

Pure: runs, their findings and each run's peak busbw per collective (``peaks``, read by
``report.load`` with one aggregate query) in, ``Card``s out, the worst first. A card says,
from the latest run of each kind in its group:
- healthy or not: the doctor and check findings, worst first;
- how close each ring-bound collective (all_reduce, all_gather, reduce_scatter) comes to what
  the links allow: its highest busbw in the group's measurement runs against the slowest-link
  ceiling of the latest links run that bounds the job (``ring_ceiling_gbps``: slowest link x
  peers, the smallest over the GPUs; see ccltune.diagnose.checks.linkmath), when both are stored;
- what tuning gained: the latest validate run's geometric mean speedup, its largest win and
  whether any size got slower (its own PASS/FAIL);
- for a workload, communication time per step with NCCL's default and with the rules: measured
  by the latest replay run (``ReplayVerdict.to_dict``: ``default_us_per_step`` and
  ``rules_us_per_step``, each a median with its noise, the ratio and the verdict), else
  predicted by the latest ``tune --workload`` run (its summary's ``predictions``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from ccltune import engines
from ccltune.report.axes import ids_text, size_label
from ccltune.report.data import RING_BOUND, NoValue, canonical, gpu_names, host_text, no_value_text, num
from ccltune.report.linkdata import ceiling_basis, ceiling_gbps
from ccltune.report.model import Card
from ccltune.status import Verdict

_SEVERITY: dict[str, int] = {Verdict.FAIL: 0, Verdict.ERROR: 1, Verdict.WARN: 2, Verdict.WAIVED: 3, Verdict.PASS: 4}
_LEVEL: dict[str, str] = {Verdict.FAIL: "bad", Verdict.ERROR: "bad", Verdict.WARN: "warn", Verdict.PASS: "good", Verdict.WAIVED: "info"}
PASS_FAIL_LEVEL: dict[str, str] = {Verdict.PASS: "good", Verdict.FAIL: "bad"}  # a pass's or fail's; other words: the caller's
MEASURES = ("bench", "import", "check", "sweep", "validate")  # kinds whose default rows are measurements
NODE_WIDE = ("doctor", "links", "topo")  # kinds that measure the node itself: they feed each group on it
_MAX_LINES = 5


def node_key(run: Any) -> tuple[str, str] | None:
    """(host, GPU model) a run ran on; None for a run that records neither (tune)."""
    names = gpu_names(run.env.get("gpus"))
    host = host_text(run)
    model = names[0] if names else ""
    if not host and not model:
        return None
    return host or "host not recorded", model or "GPU not recorded"


def node_text(run: Any) -> str:
    """'node-a, 8 x NVIDIA H100' of a run."""
    names = gpu_names(run.env.get("gpus"))
    return ", ".join(p for p in (host_text(run), f"{len(names)} x {names[0]}" if names else "") if p)


def _bus_ids(gpus: Any) -> list[str] | None:
    """PCI bus ids of recorded GPUs; None unless every one has one."""
    ids = [g.get("pci_bus_id") for g in gpus] if isinstance(gpus, list) and gpus \
        and all(isinstance(g, Mapping) for g in gpus) else []
    return [str(i) for i in ids] if ids and all(ids) else None


def _job_bus_ids(job: Any, ranks: int) -> list[str] | None:
    """The GPUs a one-node job's ranks used: rank i drives the visible GPU NCCL_TESTS_DEVICE + i
    (ccltune.engines.base.device_index); None when the bus ids are not recorded."""
    visible = _bus_ids(job.env.get("gpus"))
    first = str((job.env.get("variables") or {}).get("NCCL_TESTS_DEVICE") or "0")
    if visible is None or ranks > len(visible) or not first.isdigit():
        return None
    return [visible[(int(first) + i) % len(visible)] for i in range(ranks)]


def ceiling_why_not(job: Any, links: Any) -> str | None:
    """Why the slowest-link ceiling of ``links`` does not bound ``job`` (None: it does). The ceiling
    is slowest link x peers over the GPUs the links run measured, so it bounds a job on the same
    host, on one node, whose ranks used exactly those GPUs (by PCI bus id where both record them,
    else a rank count equal to the links run's GPU count): an 8-GPU ring ceiling (x 7 peers) does
    not bound a 2-rank job, and one node's links do not bound a 2-node job."""
    if node_key(links) != node_key(job):
        return f"links run {links.id} measured {host_text(links) or 'a host it did not record'}, not this job's host"
    hosts = job.env.get("hosts")
    nodes = max(int(job.n_nodes or job.env.get("n_nodes") or 1),
                len(set(map(str, hosts))) if isinstance(hosts, list) else 1)
    if nodes > 1:
        return f"a {nodes}-node job: the links of one node (links run {links.id}) do not bound it"
    ranks = job.world_size or job.env.get("world_size")
    measured = len(gpu_names(links.env.get("gpus")))
    if not ranks:
        return f"the job's rank count is not recorded, so links run {links.id} ({measured} GPUs) may not bound it"
    used, covered = _job_bus_ids(job, int(ranks)), _bus_ids(links.env.get("gpus"))
    if used is not None and covered is not None:
        if sorted(used) == sorted(covered):
            return None
        return (f"links run {links.id} measured GPUs {', '.join(covered)}; this job's {ranks} ranks used "
                f"{', '.join(used)}")
    if int(ranks) == measured:
        return None
    return (f"links run {links.id} measured {measured} GPUs (slowest link x {measured - 1} peers); "
            f"it does not bound a {ranks}-rank job")


def ceiling_for(job: Any, links: list[Any]) -> tuple[Any | None, str]:
    """(the latest links run whose ceiling bounds ``job``, '') or (None, why none does: the latest
    links run of its node or GPU model, and why not; '' when there is none). ``links``: runs
    with a ceiling."""
    for r in reversed(links):
        if ceiling_why_not(job, r) is None:
            return r, ""
    key = node_key(job)
    near = [r for r in links if node_key(r) == key] or [r for r in links if key and (k := node_key(r))
                                                        and k[1] == key[1]]
    return None, (ceiling_why_not(job, near[-1]) or "") if near else ""


def group_key(run: Any) -> str:
    """The job shape a run ran: '8 ranks, NCCL 2.21.5' ('' for a node-wide run)."""
    if run.kind in NODE_WIDE:
        return ""
    ranks = run.world_size or run.env.get("world_size")
    rccl, nccl = run.env.get("rccl_version"), run.env.get("nccl_version") or run.nccl_version
    engine = engines.KINDS.get(run.engine or run.env.get("engine"))
    cpu = f"{engine.name} (CPU)" if engine and not engine.gpu else None  # gloo: torch.distributed's CPU backend, no NCCL
    lib = f"RCCL {rccl}" if rccl else f"NCCL {nccl}" if nccl else cpu or "library version not recorded"
    return ", ".join(p for p in (f"{ranks} ranks" if ranks else "rank count not recorded", lib) if p)


def _placement(run: Any, by_id: Mapping[int, Any], seen: frozenset[int] = frozenset()) \
        -> tuple[tuple[str, str], str] | None:
    """(node, group) of a run: its own, or for a run recording neither (tune) that of the latest
    of its ``source_runs`` that has one; None when nothing places it."""
    key = node_key(run)
    if key is not None:
        return key, group_key(run)
    sources = run.summary.get("source_runs") if isinstance(run.summary, Mapping) else None
    for i in sorted((i for i in sources or [] if isinstance(i, int) and i in by_id and i not in seen), reverse=True):
        got = _placement(by_id[i], by_id, seen | {run.id})
        if got is not None:
            return got
    return None


def cards(runs: list[Any], findings: Mapping[int, Sequence[Mapping[str, Any]]],
          peaks: Mapping[int, Mapping[str, float]], no_value: Mapping[int, Mapping[str, NoValue]] | None = None
          ) -> list[Card]:
    """One card per node and run group (module docstring), the worst first. ``no_value``: run id ->
    collective -> its rows' statuses, where NCCL's default has no value at any size (``data.no_value``)."""
    by_id = {r.id: r for r in runs}
    nodes: dict[tuple[str, str], dict[str, list[Any]]] = defaultdict(lambda: defaultdict(list))
    for r in runs:
        got = _placement(r, by_id)
        if got is not None:
            nodes[got[0]][got[1]].append(r)
    links = sorted((r for r in runs if r.kind == "links" and link_ceiling(r)), key=lambda r: r.id)
    out = []
    for key, groups in nodes.items():
        wide = groups.pop("", [])
        for group, rs in (groups.items() if groups else [("", [])]):
            out.append(_card(key, group, sorted(rs + wide, key=lambda r: r.id), findings, peaks, links,
                             no_value or {}))
    order = {"bad": 0, "warn": 1, "info": 2, "good": 3}
    return sorted(out, key=lambda c: (order.get(c.level, 2), c.title, c.group))


def _latest(runs: list[Any], *kinds: str) -> Any | None:
    found = [r for r in runs if r.kind in kinds]
    return found[-1] if found else None


def _card(key: tuple[str, str], group: str, runs: list[Any], findings: Mapping[int, Sequence[Mapping[str, Any]]],
          peaks: Mapping[int, Mapping[str, float]], links: list[Any],
          no_value: Mapping[int, Mapping[str, NoValue]]) -> Card:
    host, model = key
    count = max((len(gpu_names(r.env.get("gpus"))) for r in runs), default=0)
    kinds: dict[str, int] = defaultdict(int)
    for r in runs:
        kinds[r.kind] += 1
    card = Card(title=host, subtitle=f"{count} x {model}" if count else model, level="info", headline="",
                group=group or "node-wide runs only")
    card.subtitle += f" · runs {ids_text([r.id for r in runs])} (" + ", ".join(
        f"{n} {k}" for k, n in sorted(kinds.items())) + ")"
    health = _health(runs, findings, card)
    _ceiling(key, runs, peaks, links, card)
    tuned = _tuning(runs, card)
    replayed = _workload(runs, card)
    lost = _lost(runs, peaks, no_value, card)
    levels = [health, tuned, replayed, lost]
    card.level = "bad" if "bad" in levels else "warn" if "warn" in levels else "good" if "good" in levels else "info"
    return card


def _health(runs: list[Any], findings: Mapping[int, Sequence[Mapping[str, Any]]], card: Card) -> str:
    judged = [r for r in (_latest(runs, "doctor"), _latest(runs, "check")) if r is not None]
    if not judged:
        card.headline = "Health not checked: no doctor or check run stored for this node."
        return "info"
    found = [(r, f) for r in judged for f in findings.get(r.id, [])]
    found.sort(key=lambda rf: _SEVERITY.get(str(rf[1].get("status", "")).upper(), 5))
    counts: dict[str, int] = defaultdict(int)
    for _, f in found:
        counts[str(f.get("status", "")).upper()] += 1
    bad = counts.get(Verdict.FAIL, 0) + counts.get(Verdict.ERROR, 0)
    which = " and ".join(f"{r.kind} run {r.id}" for r in judged)
    tally = ", ".join(f"{counts[s]} {s}" for s in sorted(counts, key=lambda s: _SEVERITY.get(s, 5)))
    if bad:
        card.headline = f"Not healthy: {tally} ({which})."
    elif counts.get(Verdict.WARN):
        card.headline = f"Healthy with warnings: {tally} ({which})."
    else:
        card.headline = f"Healthy: {tally or 'no findings'} ({which})."
    for r, f in found:
        status = str(f.get("status", "")).upper()
        if status in (Verdict.PASS, Verdict.WAIVED) or len(card.lines) >= _MAX_LINES:
            break
        evidence = str(f.get("evidence") or "")
        card.lines.append((_LEVEL.get(status, "info"), f"{status} {f.get('name')}: {evidence[:160]}"))
    return "bad" if bad else "warn" if counts.get(Verdict.WARN) else "good"


def achieved(runs: list[Any], peaks: Mapping[int, Mapping[str, float]], collective: str = "all_reduce"
             ) -> tuple[float, int] | None:
    """(highest busbw in GB/s of NCCL's default of ``collective`` in the measurement runs, the run it is from)."""
    best: tuple[float, int] | None = None
    for r in runs:
        if r.kind not in MEASURES:
            continue
        for coll, v in peaks.get(r.id, {}).items():
            if canonical(coll) == collective and v and (best is None or v > best[0]):
                best = (float(v), r.id)
    return best


def link_ceiling(run: Any) -> float | None:
    return ceiling_gbps(run.summary)


def _ceiling_label(links: Any) -> str:
    """'slowest-link ceiling (links run 12: ce-write/uni, 389.26 GB/s x 3 peers; pairwise, an upper bound)'."""
    basis = ceiling_basis(links.summary)
    if basis is None:
        return f"slowest-link ceiling (links run {links.id})"
    bound = "; pairwise, an upper bound" if basis.upper_bound else ""
    return f"slowest-link ceiling (links run {links.id}: {basis.product()}{bound})"


def _bounded(collective: str, jobs: list[Any], peaks: Mapping[int, Mapping[str, float]], own: list[Any]
             ) -> tuple[float, int, Any] | None:
    """(busbw, run id, links run) of the best run of ``collective`` that a links run of ``own`` bounds."""
    reached = sorted(((a, r) for r in jobs if (a := achieved([r], peaks, collective))), key=lambda ar: -ar[0][0])
    for (best, run_id), r in reached:
        links = ceiling_for(r, own)[0]
        if links is not None:
            return best, run_id, links
    return None


def _ceiling(key: tuple[str, str], runs: list[Any], peaks: Mapping[int, Mapping[str, float]], all_links: list[Any],
             card: Card) -> None:
    """Per ring-bound collective the card's measurement runs have (``data.RING_BOUND``, all_reduce
    first): its best busbw and the fraction of the slowest-link ceiling reached by its best run
    that a links run bounds (``ceiling_why_not``: same host, one node, the GPUs it used), naming
    that run when it is not the best one; then the ceiling, once. A card whose jobs no links run
    bounds says why; a card of node-wide runs only shows its node's ceiling. ``key``: the card's
    node; ``all_links``: the links runs with a ceiling."""
    own = [r for r in all_links if node_key(r) == key]  # a card's runs share one node: only its links can bound them
    jobs = [r for r in runs if r.kind not in NODE_WIDE]
    if not jobs:
        if own:
            card.figures.append((_ceiling_label(own[-1]), f"{num(link_ceiling(own[-1]))} GB/s"))
        return
    shown = [(coll, got, _bounded(coll, jobs, peaks, own)) for coll in RING_BOUND
             if (got := achieved(runs, peaks, coll)) is not None]
    ceilings = list({b[2].id: b[2] for _, _, b in shown if b is not None}.values())
    for coll, (best, run_id), bound in shown:
        value = f"{num(best)} GB/s"
        if bound is not None:
            reached, bound_id, links = bound
            of = "the ceiling" if len(ceilings) == 1 else f"the ceiling of links run {links.id}"
            ceiling = link_ceiling(links)
            assert ceiling, "all_links: runs with a ceiling"
            pct = f"{100 * reached / ceiling:.0f}% of {of}"
            value += f", {pct}" if bound_id == run_id else f"; run {bound_id}: {pct}"
        card.figures.append((f"{coll} busbw, best (run {run_id})", value))
    for links in ceilings:
        card.figures.append((_ceiling_label(links), f"{num(link_ceiling(links))} GB/s"))
    if ceilings:
        return
    best_id = shown[0][1][1] if shown else None
    job = next((r for r in jobs if r.id == best_id), jobs[-1])
    why = ceiling_for(job, all_links)[1]
    if why:
        card.lines.append(("info", f"no slowest-link ceiling for this job shape: {why}"))


def _lost(runs: list[Any], peaks: Mapping[int, Mapping[str, float]], no_value: Mapping[int, Mapping[str, NoValue]],
          card: Card) -> str:
    """A line per collective whose latest measurement run in the group has no value of it at any size
    (every size errored, was waived...): 'reduce_scatter: no value at any size (error x3) in run 14'."""
    latest: dict[str, Any] = {}
    for r in runs:
        if r.kind in MEASURES:
            for coll in (*peaks.get(r.id, {}), *no_value.get(r.id, {})):
                latest[coll] = r
    lost = [(coll, r) for coll, r in sorted(latest.items()) if coll in no_value.get(r.id, {})]
    for coll, r in lost:
        card.lines.append(("warn", f"{no_value_text(coll, no_value[r.id][coll])} in {r.kind} run {r.id}"))
    return "warn" if lost else "info"


def _tuning(runs: list[Any], card: Card) -> str:
    v = _latest(runs, "validate")
    if v is None:
        return "info"
    s = v.summary
    status = str(s.get("status") or s.get("verdict") or "").upper()
    sizes = [x for x in s.get("sizes") or [] if isinstance(x, Mapping) and x.get("speedup")]
    geo = s.get("geomean_speedup")
    if geo is None and sizes:
        import math

        geo = math.exp(sum(math.log(float(x["speedup"])) for x in sizes) / len(sizes))
    if geo is not None:
        card.figures.append((f"tuning gain, geometric mean (validate run {v.id})", f"{float(geo):.3f}x"))
    if sizes:
        top = max(sizes, key=lambda x: float(x["speedup"]))
        card.figures.append(("largest win", f"{float(top['speedup']):.2f}x"))
        card.lines.append(("good", f"largest win: {canonical(str(top.get('collective')))} at {size_label(int(top['size_bytes']))}, "
                                   f"{float(top['speedup']):.2f}x faster than NCCL's default"))
    slower = [x for x in s.get("sizes") or [] if isinstance(x, Mapping)
              and (x.get("status") == Verdict.FAIL or (x.get("status") is None and x.get("slower")))]
    if slower or status == Verdict.FAIL:
        what = ", ".join(f"{canonical(str(x.get('collective')))} {size_label(int(x['size_bytes']))}" for x in slower[:4])
        card.lines.insert(0, ("bad", f"tuned rules are slower than the default beyond the noise at "
                                     f"{len(slower)} size(s){': ' + what if what else ''} (validate run {v.id}: FAIL)"))
        return "bad"
    if status == Verdict.PASS or sizes:
        card.lines.append(("good", f"never slower than NCCL's default beyond the noise (validate run {v.id}: PASS)"))
        return "good"
    return "info"


def _workload(runs: list[Any], card: Card) -> str:
    """Communication time per step of the job, NCCL's default against the rules: measured by the
    latest replay run (median and noise of each arm, its verdict), else predicted by the latest
    ``tune --workload`` run. Returns the card level it implies."""
    replay = next((r for r in reversed(runs) if r.kind == "replay" and r.summary.get("default_us_per_step")), None)
    if replay is not None:
        s = replay.summary
        unit = "step" if s.get("steps") else "captured run"
        status = str(s.get("status") or "").upper()
        d, r = s.get("default_us_per_step"), s.get("rules_us_per_step")
        engine = engines.KINDS.get(getattr(replay, "engine", None) or "")
        lib = s.get("library") or (engine.name if engine and not engine.gpu else "NCCL")  # whose default the arm ran
        if isinstance(r, Mapping) and r.get("median_us") is not None:  # both arms replayed
            card.figures.append((f"communication per {unit}, {lib}'s default ± {_pct(d)} -> rules ± {_pct(r)} "
                                 f"(replay run {replay.id}, {d.get('n')} rounds)",
                                 _times(float(d["median_us"]), float(r["median_us"]))))
            if s.get("ratio") is not None:
                iv = s.get("ratio_interval")
                within = (f" [{float(iv['low']):.4f}, {float(iv['high']):.4f}] at {100 * float(iv['confidence']):.1f}%"
                          if isinstance(iv, Mapping) and iv.get("low") is not None else "")
                card.figures.append(("rules / default time (paired rounds: Wilcoxon signed-rank, interval)" if within else
                                     "rules / default time", f"{float(s['ratio']):.4f}x{within}"))
        elif isinstance(d, Mapping):
            card.figures.append((f"communication per {unit}, {lib}'s default ± {_pct(d)} (replay run {replay.id}, "
                                 f"{d.get('n')} rounds)", _time(float(d["median_us"]))))
        level = PASS_FAIL_LEVEL.get(status, "info")
        card.lines.insert(0 if level == "bad" else len(card.lines),
                          (level, f"replay run {replay.id} {status or 'no verdict'}: {s.get('reason') or ''}"))
        return level
    tune = next((r for r in reversed(runs) if r.kind == "tune" and r.summary.get("predictions")), None)
    if tune is None:
        return "info"
    for p in tune.summary["predictions"][:1]:
        if isinstance(p, Mapping) and p.get("default_us_per_step"):
            unit = "step" if p.get("steps") else "captured run"
            card.figures.append((f"predicted communication per {unit} (tune run {tune.id}, not replayed yet): "
                                 "default -> rules", _times(float(p["default_us_per_step"]),
                                                            float(p.get("rules_us_per_step") or 0))))
    return "info"


def _pct(stats: Mapping[str, Any]) -> str:
    """A spread with two significant digits: 0.03%, never a 0.0% that five rounds cannot have."""
    return f"{100 * float(stats.get('noise') or 0):.2g}%"


def _time(us: float) -> str:
    return f"{us / 1e3:.2f} ms" if us >= 1000 else f"{us:.1f} us"


def _times(a_us: float, b_us: float) -> str:
    """'1.31 → 1.24 ms': two times in one unit (the larger's)."""
    if max(a_us, b_us) >= 1000:
        return f"{a_us / 1e3:.2f} → {b_us / 1e3:.2f} ms"
    return f"{a_us:.1f} → {b_us:.1f} us"
