"""What the nccl-tests readers (``table_reader``: the text table; ``json_doc``: -J JSON) share: the run
record (:class:`Parsed`), the checks on every cell (a value nccl-tests never prints refuses the file,
naming it), the ranks a header lists, the collective it names, and the row a cell block becomes. Pure."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ccltune import collectives, datatypes
from ccltune.commconfig import CommConfig
from ccltune.errors import UsageError, unknown_name
from ccltune.files import printable
from ccltune.inputs import MAX_RANKS
from ccltune.status import RowStatus
from ccltune.store import Measurement

UNMEASURED = ("n/a", "nan")  # what nccl-tests prints for a value it has not got
# what a time, bandwidth ('bw') or #wrong must be, for error messages
EXPECT = {"time": "a positive number of microseconds", "bw": "a non-negative number",
          "wrong": "a non-negative integer"}
INT64_MAX = (1 << 63) - 1  # the database's integers
REDOPS = (*datatypes.OPS, "none", "-")  # nccl-tests' test_opnames, "none" for a collective without one


@dataclass
class Parsed:
    """One nccl-tests run: its rows and what its header says (a text file may hold several runs)."""

    path: str
    collective: str
    n_ranks: int
    n_nodes: int
    rows: list[Measurement]
    gpus: list[str] = field(default_factory=list)  # model name per rank, when listed
    hosts: list[str] = field(default_factory=list)
    nccl_version: str | None = None
    line: int = 1  # where the run starts in its file
    # what else the output says about its environment: tool and tool_version, rccl_version,
    # hip_version, rocm_version, hostname, library_path, devices (rank, host, pid, device, bus_id, name)
    env: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # how the file was read (a collective told from the table)


class Bad(Exception):
    """A cell nccl-tests would never print; the message names it, the caller adds file and line."""


def fail(path: str, line: int | None, why: str) -> UsageError:
    return UsageError(f"{path}:{line}: {why}" if line else f"{path}: {why}")


def nccl_version(code: int) -> str:
    """22809 -> '2.28.9' (NCCL_VERSION_CODE = major*10000 + minor*100 + patch)."""
    return f"{code // 10000}.{code // 100 % 100}.{code % 100}"


def _lookup(name: str, where: str) -> str:
    """A collective's registry name. Offers no 'all': a run measures one collective."""
    if name.strip().lower() != "all":
        try:
            return collectives.get(name, where).name
        except UsageError:
            pass
    raise unknown_name("collective", name, collectives.REGISTRY, where)


def collective_of(program: str | None, source: str, where: str, override: str | None, by_name: str | None) -> str:
    """The run's collective: the program that ``source`` (the header, at ``where``) names, else
    ``--collective``, else the file name ``by_name`` (None when the file holds several runs).
    ``--collective`` must agree with a header that names a known collective."""
    forced = _lookup(override, "--collective") if override else None
    if program:
        try:
            named = _lookup(program.rsplit("/", 1)[-1], f"{where} ({source})")
        except UsageError:
            if forced:  # a program ccltune does not know (a renamed binary): --collective says
                return forced
            raise
        if forced and forced != named:
            raise UsageError(f"{where}: --collective {override}, but {source} says {program}")
        return named
    if forced:
        return forced
    if by_name:
        stem = by_name.rsplit("/", 1)[-1].lower()
        for c in sorted(collectives.REGISTRY, key=len, reverse=True):  # reduce_scatter before reduce
            if c in stem:
                return c
        raise UsageError(f"{where}: cannot tell the collective (no 'Collective test starting' line, none in the"
                         " file name); pass --collective")
    raise UsageError(f"{where}: no 'Collective test starting' line, and the file holds several runs, so its name"
                     " cannot tell the collective; pass --collective")


@dataclass
class Shape:
    """What a run's header says about its ranks: the ``#  Rank`` lines (rank -> (host, pid, model)),
    the ``nThread``/``nGpus`` (and rccl-tests' ``nRanks``) line, and whether lines were elided
    (nccl-tests cuts one process's device list at 2048 bytes and ends it with '...'); rccl-tests
    2022-10..2024-02 prints ``nRanks``, its ranks per GPU."""

    ranks: dict[int, tuple[str, int, str]] = field(default_factory=dict)
    threads: int | None = None
    gpus: int | None = None
    per_gpu: int | None = None
    elided: bool = False
    colors: dict[int, int] = field(default_factory=dict)  # rank -> its 'Group' (NCCL_TESTS_SPLIT's color)
    where: dict[int, str] = field(default_factory=dict)  # rank -> where its line is ('f:12', 'f: "config..."')
    shape_at: str = ""  # where the nThread line is

    def group_ranks(self) -> list[int] | None:
        """The ranks of the lowest rank's group when the ranks were split into several groups
        (NCCL_TESTS_SPLIT: the rows' sizes and busbw are that group's); None when not split, or when
        the device list was cut (its groups cannot be counted)."""
        if len(set(self.colors.values())) < 2 or self.elided:
            return None
        first = self.colors[min(self.colors)]
        return [r for r, c in sorted(self.colors.items()) if c == first]

    def implied(self) -> int:
        """The ranks: the N rank lines listed (ranks 0..N-1, :func:`_check_ranks`); when the list was
        cut ('...'), nThread x nGpus (x rccl-tests' ranks per GPU) x processes (one process per
        distinct host and Pid), never fewer than listed. No rank number read sizes anything."""
        if not self.elided:
            return len(self.ranks)
        procs = len({(h, pid) for h, pid, _ in self.ranks.values()})
        per_proc = (self.threads or 1) * (self.gpus or 1) * (self.per_gpu or 1)
        return max(len(self.ranks), per_proc * procs)


def _check_ranks(path: str, line: int | None, shape: Shape) -> None:
    """Rank lines name the ranks 0..N-1 of the N listed (any of 0..n-1 of a cut list); at most MAX_RANKS."""
    n = shape.implied()
    if n > MAX_RANKS:
        raise UsageError(f"{shape.shape_at or path}: {n} ranks (nThread x nGpus x processes, the rank list cut): "
                         f"more than the {MAX_RANKS} ccltune reads")
    if bad := [r for r in sorted(shape.ranks) if r >= n]:
        raise UsageError(f"{shape.where[bad[0]]}: rank {bad[0]}, but the file lists {len(shape.ranks)} rank lines"
                         f"{' (cut)' if shape.elided else ''}: ranks are 0..{n - 1}")


def ranks_of(path: str, line: int | None, shape: Shape, nranks: int | None) -> tuple[int, int]:
    _check_ranks(path, line, shape)
    hosts = len({h for h, _, _ in shape.ranks.values()})
    if nranks is not None:
        if shape.ranks and shape.implied() != nranks:
            raise fail(path, line, f"--nranks {nranks} but the file lists {shape.implied()} ranks")
        return nranks, hosts or 1
    if not shape.ranks:
        raise fail(path, line, "no '#  Rank N ...' device lines; pass --nranks")
    if (group := shape.group_ranks()) is not None:  # parallel groups: a row is rank 0's group's
        return len(group), len({shape.ranks[r][0] for r in group if r in shape.ranks}) or 1
    return shape.implied(), hosts or 1


def mark_groups(shape: Shape, env: dict[str, Any]) -> None:
    """Split runs (NCCL_TESTS_SPLIT): every rank's color in the environment, as ``ccltune bench`` stores it."""
    if shape.group_ranks() is not None:
        colors = [shape.colors[r] for r in sorted(shape.colors)]
        env["groups"] = {"colors": colors, "count": len(set(colors))}


def possible(value: float | None, kind: str, size: int) -> bool:
    """Whether nccl-tests could print ``value`` as a time, bandwidth ('bw') or #wrong of a row of
    ``size`` bytes. None (unmeasured) always could."""
    if value is None:
        return True
    if not math.isfinite(value) or value < 0:
        return False
    if kind == "time":
        return value > 0 or size == 0  # only an empty transfer can round to 0.00 us
    return kind != "wrong" or (value == int(value) and value <= INT64_MAX)


def int_cell(cell: str, what: str, low: int = 0, high: int = INT64_MAX) -> int:
    """A size, count or root cell: an integer in low..high."""
    try:
        value: int | None = int(cell)
    except ValueError:
        value = None
    if value is None or not low <= value <= high:
        expect = f"-1 or a rank in 0..{high}" if low == -1 else "a non-negative integer"
        raise Bad(f"bad {what} {cell!r}: must be {expect}")
    return value


def name_cell(cell: str, what: str, names: Any) -> None:
    """A type or redop cell: only what nccl-tests prints (a formula or escape never reaches a database)."""
    if cell not in names:
        raise Bad(f"bad {what} {printable(cell, 40)!r}: must be one of nccl-tests' {what}s ({', '.join(names)})")


def number_cell(cell: str, what: str, kind: str, size: int) -> float | None:
    """A time, bandwidth or #wrong cell: None for N/A or nan (printf may write '-nan')."""
    if cell.lower().lstrip("+-") in UNMEASURED:
        return None
    try:
        value: float | None = float(cell)
    except ValueError:
        value = None
    if kind == "time" and value == 0:
        # the table's 0.00 (%.2f): under 5 ns a call, e.g. one rank's in-place call in a CUDA graph,
        # which NCCL turns into nothing (fixtures/nccl-tests/*inplace_zero.txt); kept as "time 0"
        return value
    if value is None or not possible(value, kind, size):
        raise Bad(f"bad {what} {cell!r}: must be {EXPECT[kind]}")
    return value


def row(collective: str, size: int, count: int, dtype: str, redop: str, root: int, n_ranks: int,
         n_nodes: int, cand: CommConfig, graph: int, in_place: bool, time_us: float | None,
         algbw: float | None, busbw: float | None, wrong: float | None) -> Measurement:
    status, note = RowStatus.OK, None
    if time_us is None:
        status, note = RowStatus.ERROR, "time N/A"
    elif time_us <= 0:  # an empty transfer, rounded
        status, note = RowStatus.ERROR, "time 0"
    elif wrong:
        status, note = RowStatus.ERROR, f"#wrong {wrong:g}"
    return Measurement(
        collective, size, count, dtype, None if redop in ("none", "-") else redop, None if root < 0 else root,
        in_place, n_ranks, time_us=time_us, algbw_gbps=algbw, busbw_gbps=busbw,
        wrong=None if wrong is None else int(wrong), status=status, note=note, n_nodes=n_nodes,
        algo=cand.algo, proto=cand.proto, channels=cand.channels, config=cand.label, graph=graph,
    )

