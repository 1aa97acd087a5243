"""The results database: one SQLite file (stdlib ``sqlite3``), default ``./ccltune.db``; its tables, schema
and file checks are :mod:`ccltune.storefile`'s.

Every command that measures opens a *run* (``runs`` row, with its environment), writes
its rows as they are measured (each committed at once, so a crash or Ctrl-C loses nothing
already measured), and closes the run with a final status (a ``status.RunStatus``). Every status written
is a member of its ``ccltune.status`` vocabulary: a word outside it is refused before it is stored.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import socket
import sqlite3
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from ccltune.errors import StoreError, UsageError
from ccltune.files import printable, shown
from ccltune.inputs import MAX_GPUS
from ccltune.processes import alive, process_start
from ccltune.status import STORED_RUN_STATUSES, RowStatus, RunStatus, SampleStatus, Verdict
from ccltune.storefile import SCHEMA, SCHEMA_VERSION, check_file, check_kind, harden, has_table, upgrade

DEFAULT_DB = "ccltune.db"
RUN_KINDS = ("bench", "sweep", "tune", "validate", "replay", "ab", "import", "links", "topo", "doctor", "check")


@dataclass
class Measurement:
    """One measured (or skipped/waived) row. Times in microseconds, bandwidths in GB/s (1e9)."""

    collective: str
    size_bytes: int
    count: int
    dtype: str
    op: str | None
    root: int | None
    in_place: bool
    n_ranks: int
    time_us: float | None = None
    algbw_gbps: float | None = None
    busbw_gbps: float | None = None
    wrong: int | None = None
    status: str = RowStatus.OK  # a RowStatus
    note: str | None = None
    n_nodes: int = 1
    algo: str | None = None
    proto: str | None = None
    channels: int | None = None
    config: str = "default"
    graph: int = 0
    rep: int = 0
    extra: dict[str, Any] | None = None   # what else was measured: bench -C's cpu_time_us, -I's per_iter

    @property
    def busbw(self) -> float | None:
        """``busbw_gbps`` (GB/s): a short name for notebooks; not a field, so records and columns keep one name."""
        return self.busbw_gbps

    @property
    def algbw(self) -> float | None:
        """``algbw_gbps`` (GB/s), as ``busbw``."""
        return self.algbw_gbps

    def to_record(self) -> dict[str, Any]:
        return asdict(self)


_MEAS_COLS = [f.name for f in fields(Measurement)]
# the number columns of each table read back, and the Python types a number there may have
_NUMERIC: dict[str, dict[str, type | tuple[type, ...]]] = {
    "measurements": {**{c: int for c in ("size_bytes", "count", "root", "in_place", "n_ranks", "n_nodes",
                                         "channels", "graph", "rep", "wrong")},
                     **{c: (int, float) for c in ("time_us", "algbw_gbps", "busbw_gbps")}},
    "links": {"src": int, "dst": int, "size_bytes": int, "bandwidth_gbps": (int, float), "latency_us": (int, float)},
    "findings": {"value": (int, float)},
    "ab_samples": {"round": int, "slot": int, "value": (int, float), "exit_code": int, "wall_s": (int, float),
                   "matches": int}}
_RUN_COLUMNS = ("id", "kind", "status", "started_at", "finished_at", "command", "engine", "world_size", "n_nodes",
                "launcher", "host", "platform", "ccltune_version", "nccl_version")  # the runs columns a Run holds
_RUN_REQUIRED = ("id", "kind", "status", "started_at")


def as_record(row: Any) -> Mapping[str, Any]:
    """A row as a mapping: a :class:`Measurement`'s record, or the mapping itself (rows read back as dicts)."""
    return row.to_record() if hasattr(row, "to_record") else row


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


@dataclass
class Run:
    id: int
    kind: str
    status: str
    started_at: str
    finished_at: str | None
    command: str
    engine: str | None
    world_size: int | None
    n_nodes: int | None
    launcher: str | None
    host: str | None
    platform: str | None
    ccltune_version: str | None
    nccl_version: str | None
    args: dict[str, Any] = field(default_factory=dict)
    env: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    note: str = ""  # what the reader should know of the status (a run of another host)


@dataclass(frozen=True)
class AbSample:
    """One run of the user's job under ``ccltune ab``: ``value`` in ``unit`` (None when the run failed:
    ``note`` says why). Stored as it ends, so a Ctrl-C keeps every finished run."""

    arm: str
    round: int
    slot: int            # its place in the round (0 = first)
    value: float | None
    unit: str
    status: str          # a SampleStatus
    exit_code: int | None
    wall_s: float
    matches: int = 0     # numbers the metric pattern matched in its output
    note: str = ""


def own_processes() -> dict[str, Any]:
    """What every run records to be judged later when its env does not already say it
    (``launch.job_processes`` does for a job's ranks): this host, and this process's pid and start time.
    A command killed (kill -9, out of memory) or stopped by a full disk before it finished its run leaves
    the run stored as running: :func:`_liveness` reads it as abandoned once this process is gone."""
    return {"host": socket.gethostname(), "pids": {str(os.getpid()): process_start(os.getpid())}}


_MAX_PID_DIGITS = 10  # Linux pids are below 2^22; a recorded pid longer than this was edited by hand


def _liveness(processes: Any) -> tuple[str, str]:
    """(status, note) of a run stored as running, from the host and processes it recorded
    (:func:`own_processes`, ``launch.job_processes``): abandoned when they are all gone from this host,
    or when the pid now names a process started at another time (the pid was reused)."""
    if not isinstance(processes, dict) or not isinstance(processes.get("pids"), dict):
        return RunStatus.RUNNING, ""  # recorded by an older ccltune: nothing to judge by
    host = processes.get("host")
    if host != socket.gethostname():
        return RunStatus.RUNNING, (f"running on host {printable(str(host), 80)}: whether its processes live "
                                   "cannot be judged from here")
    pids = {str(p): start for p, start in processes["pids"].items()}
    judged = {p: start for p, start in pids.items()
              if p.isascii() and p.isdigit() and len(p) <= _MAX_PID_DIGITS
              and (start is None or (isinstance(start, int) and not isinstance(start, bool)))}
    if any(alive(int(pid), start) for pid, start in judged.items()):
        return RunStatus.RUNNING, ""
    shown_pids = printable(", ".join(pids), 80)
    if not judged:
        return RunStatus.ABANDONED, f"its recorded processes ({shown_pids}) are not pids: the run never finished"
    return RunStatus.ABANDONED, f"its processes ({shown_pids}) are gone; it never finished"


def check_path(path: str | os.PathLike[str], flag: str = "--db") -> None:
    """Before a command does any work: ``path`` can be a results database (a name the file system
    holds, a regular file in a folder that exists) and, when it holds anything, is a ccltune
    database of a schema this version reads. Creates nothing."""
    p = Path(path)
    check_file(p, flag, must_exist=False, write=False)
    if p.exists() and p.stat().st_size:
        Store(p, readonly=True, flag=flag).close()


class Store:
    """A connection to the results database. Every write commits immediately."""

    def __init__(self, path: str | os.PathLike[str] = DEFAULT_DB, *, create: bool = True, readonly: bool = False,
                 flag: str = "--db"):
        """Open the database at ``path``; ``create``: make it when missing; ``readonly``: open it read-only
        (commands that only read: nothing is written, and a read-only file can be read). A file that is
        not a ccltune database (another program's SQLite file, or one of a newer schema) is refused
        untouched. ``flag`` names where the path came from in errors."""
        self.path, self.flag = Path(path), flag
        check_file(self.path, flag, must_exist=readonly or not create, write=not readonly)
        try:
            if readonly:
                self.conn = sqlite3.connect(self.path.resolve().as_uri() + "?mode=ro", uri=True, timeout=30.0)
            else:
                self.conn = sqlite3.connect(os.fsencode(self.path), timeout=30.0)
            self.conn.row_factory = sqlite3.Row
            harden(self.conn)
            check_kind(self.conn, f"{flag} {shown(self.path)}", empty_ok=create and not readonly)
            if not readonly:
                self.conn.executescript(SCHEMA)
                self.conn.execute(
                    "INSERT OR IGNORE INTO meta(key, value) VALUES ('schema_version', ?)",
                    (str(SCHEMA_VERSION),),
                )
                upgrade(self.conn)
                self.conn.commit()
        except sqlite3.DatabaseError as exc:
            raise UsageError(f"{shown(self.path)} is not a usable ccltune database ({flag}): {exc}") from None

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.conn.close()

    # -- runs ------------------------------------------------------------------------
    def begin_run(
        self,
        kind: str,
        *,
        command: str,
        env: Mapping[str, Any] | None = None,
        args: Mapping[str, Any] | None = None,
        engine: str | None = None,
    ) -> int:
        env = dict(env or {})
        env.setdefault("processes", own_processes())  # to tell a run left running from a live one
        with self._writing(None):
            cur = self.conn.execute(
                "INSERT INTO runs(kind, status, started_at, command, engine, world_size, n_nodes,"
                " launcher, host, platform, ccltune_version, nccl_version, args_json, env_json)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    kind,
                    RunStatus.RUNNING,
                    _now(),
                    command,
                    engine,
                    env.get("world_size"),
                    env.get("n_nodes"),
                    env.get("launcher"),
                    env.get("host"),
                    env.get("platform"),
                    env.get("ccltune_version"),
                    env.get("nccl_version"),
                    json.dumps(dict(args or {}), default=str),
                    json.dumps(env, default=str),
                ),
            )
            self.conn.commit()
        if cur.lastrowid is None:  # SQLite gives every inserted row an id: a driver without one is no use here
            raise StoreError(f"{shown(self.path)}: SQLite returned no id for the new run")
        return cur.lastrowid

    def finish_run(self, run_id: int, status: str, summary: Mapping[str, Any] | None = None) -> None:
        if status not in STORED_RUN_STATUSES[1:]:  # how a run ends
            raise ValueError(f"run status must be one of {STORED_RUN_STATUSES[1:]}, got {status!r}")
        with self._writing(run_id):
            self.conn.execute(
                "UPDATE runs SET status = ?, finished_at = ?, summary_json = ? WHERE id = ?",
                (status, _now(), json.dumps(dict(summary or {}), default=str), run_id),
            )
            self.conn.commit()

    def finish_if_running(self, run_id: int, status: str, summary: Mapping[str, Any]) -> int | None:
        """Finish a run its own processes left running (the launcher's last word): ``summary`` with
        its row count. Returns that count, or None when the run was finished already."""
        if status not in STORED_RUN_STATUSES[1:]:
            raise ValueError(f"run status must be one of {STORED_RUN_STATUSES[1:]}, got {status!r}")
        rows = self.conn.execute("SELECT COUNT(*) FROM measurements WHERE run_id = ?", (run_id,)).fetchone()[0]
        cur = self.conn.execute(
            "UPDATE runs SET status = ?, finished_at = ?, summary_json = ? WHERE id = ? AND status = ?",
            (status, _now(), json.dumps({"rows": rows, **summary}, default=str), run_id, RunStatus.RUNNING))
        self.conn.commit()
        return rows if cur.rowcount else None

    def reopen_run(self, run_id: int, processes: Mapping[str, Any] | None = None) -> None:
        """Mark a run running again (``sweep --resume`` continues it), by ``processes`` now."""
        self.conn.execute("UPDATE runs SET status = ?, finished_at = NULL WHERE id = ?", (RunStatus.RUNNING, run_id))
        if processes is not None:
            env = self.run(run_id).env
            self.conn.execute("UPDATE runs SET env_json = ? WHERE id = ?",
                              (json.dumps({**env, "processes": dict(processes)}, default=str), run_id))
        self.conn.commit()

    def runs(self, kind: str | None = None) -> list[Run]:
        q = "SELECT * FROM runs" + (" WHERE kind = ?" if kind else "") + " ORDER BY id"
        return [self._run(r) for r in self.conn.execute(q, (kind,) if kind else ())]

    def run(self, run_id: int) -> Run:
        in_range = -(1 << 63) <= run_id < 1 << 63  # SQLite's INTEGER; a larger id names no run
        row = self.conn.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone() if in_range else None
        if row is None:
            known = [r["id"] for r in self.conn.execute("SELECT id FROM runs ORDER BY id")]
            hint = f"; runs in {str(self.path)!r}: {_ranges(known)}" if known else f"; {str(self.path)!r} has no runs"
            raise UsageError(f"no run {run_id}{hint}")
        return self._run(row)

    def runs_in(self, ranges: Iterable[tuple[int, int]], flag: str = "--runs") -> list[int]:
        """The run ids of ``ranges`` (inclusive (first, last) pairs, as :func:`ccltune.cli._common.parse_run_ids`
        reads them), in order, without repeats; every id of every range must name a run."""
        out: dict[int, None] = {}
        for lo, hi in ranges:
            if lo == hi:
                out[self.run(lo).id] = None
                continue
            ids = [r[0] for r in self.conn.execute("SELECT id FROM runs WHERE id BETWEEN ? AND ? ORDER BY id",
                                                   (max(lo, -(1 << 63)), min(hi, (1 << 63) - 1)))]
            if len(ids) != hi - lo + 1:
                have = set(ids)
                missing = next(i for i in range(lo, hi + 1) if i not in have)
                self.run(missing)  # raises, naming the runs there are
            out.update(dict.fromkeys(ids))
        return list(out)

    def _run(self, row: sqlite3.Row) -> Run:
        d = dict(row)

        def column(name: str) -> dict[str, Any]:
            return self.json_object(d.pop(name), f"run {d['id']}'s {name}")

        for name in ("args_json", "env_json", "summary_json"):
            d.setdefault(name, None)
        args, env, summary = column("args_json"), column("env_json"), column("summary_json")
        # named columns only: a column another version added is ignored, a missing optional one is None
        missing = [c for c in _RUN_REQUIRED if d.get(c) is None]
        if missing:
            raise UsageError(f"{self.flag} {shown(self.path)}: a run has no {', '.join(missing)}: the database was "
                             "damaged or edited by hand")
        columns: dict[str, Any] = {c: d.get(c) for c in _RUN_COLUMNS}
        run = Run(args=args, env=env, summary=summary, **columns)
        if run.status == RunStatus.RUNNING:
            run.status, run.note = _liveness(run.env.get("processes"))
        return run

    # -- measurements ----------------------------------------------------------------
    def add_measurements(self, run_id: int, rows: Iterable[Measurement]) -> None:
        cols = ", ".join(["run_id", *_MEAS_COLS])
        marks = ", ".join("?" * (len(_MEAS_COLS) + 1))
        rows = list(rows)
        for m in rows:  # a status outside the vocabulary would be read back by no one
            RowStatus.parse(m.status, f"measurement {m.collective} {m.size_bytes} B")
        data = [(run_id, *(_sql(getattr(m, c)) for c in _MEAS_COLS)) for m in rows]
        with self._writing(run_id):
            self.conn.executemany(f"INSERT INTO measurements({cols}) VALUES ({marks})", data)
            self.conn.commit()

    @contextlib.contextmanager
    def _writing(self, run_id: int | None) -> Iterator[None]:
        """A write during a run: SQLite's failure (disk full, a lock held past the 30 s wait, an I/O
        error) becomes one StoreError naming the file, the cause and the rows of the run kept."""
        try:
            yield
        except sqlite3.OperationalError as exc:
            text = str(exc)
            if not any(w in text for w in ("full", "locked", "disk I/O")):
                raise  # a write on a read-only Store is ccltune's own mistake, not the machine's
            self.conn.rollback()
            why = ("disk full" if "full" in text else "locked by another process for more than 30 s"
                   if "locked" in text else text)
            kept = ""
            if run_id is not None:
                try:
                    n = self.conn.execute("SELECT COUNT(*) FROM measurements WHERE run_id = ?", (run_id,)).fetchone()[0]
                    kept = f"; {n} rows of run {run_id} kept"
                except sqlite3.Error:
                    kept = f"; the rows of run {run_id} stored before are kept"
            raise StoreError(f"cannot store rows in {shown(self.path)}: {why}{kept}") from None

    def measurements(self, run_ids: int | Iterable[int] | None = None, **where: Any) -> list[Measurement]:
        clauses, params = [], []
        if run_ids is not None:
            ids = [run_ids] if isinstance(run_ids, int) else list(run_ids)
            clauses.append(f"run_id IN ({', '.join('?' * len(ids))})")
            params.extend(ids)
        for key, value in where.items():
            if key not in _MEAS_COLS:
                raise ValueError(f"unknown measurement column {key!r}")
            clauses.append(f"{key} IS ?")
            params.append(_sql(value))
        q = "SELECT * FROM measurements" + (" WHERE " + " AND ".join(clauses) if clauses else "") + " ORDER BY id"
        out = []
        for r in self.conn.execute(q, params):
            d = self._measurement_dict(r)
            d["in_place"] = bool(d["in_place"])
            out.append(Measurement(**d))
        return out

    def count_measurements(self, run_id: int) -> int:
        """How many rows run ``run_id`` holds."""
        return self.conn.execute("SELECT COUNT(*) FROM measurements WHERE run_id = ?", (run_id,)).fetchone()[0]

    def measurement_rows(self, run_ids: Iterable[int]) -> list[dict[str, Any]]:
        """Measurements with their run id, as plain dicts (for analyses spanning runs)."""
        ids = list(run_ids)
        q = f"SELECT * FROM measurements WHERE run_id IN ({', '.join('?' * len(ids))}) ORDER BY id"
        return [{"id": r["id"], "run_id": r["run_id"], **self._measurement_dict(r)} for r in self.conn.execute(q, ids)]

    def _measurement_dict(self, r: sqlite3.Row) -> dict[str, Any]:
        """A stored row's columns, checked; ``extra`` read from its JSON (None in a version-1 file)."""
        self.check_row(r, "measurements")
        d = {c: (r[c] if c in r.keys() else None) for c in _MEAS_COLS}
        if d["extra"] is not None:
            try:
                d["extra"] = json.loads(d["extra"])
                if not isinstance(d["extra"], dict):
                    raise ValueError("not a JSON object")
            except (TypeError, ValueError, RecursionError) as exc:
                raise UsageError(f"{self.flag} {shown(self.path)}: measurements row {r['id']} (run {r['run_id']}) "
                                 f"has extra = {printable(repr(r['extra']), 60)}, not a JSON object ({exc})") from None
        for c in ("time_us", "algbw_gbps", "busbw_gbps"):  # an infinity or NaN stored by hand: not a figure
            value = d[c]
            if isinstance(value, float) and not math.isfinite(value):
                d[c] = None
        return d

    def json_object(self, text: Any, where: str) -> dict[str, Any]:
        """A JSON column's object (``where``: the row and column, for the error): invalid JSON, nesting past
        the parser's guard, a value that is not text or not an object is a UsageError naming the file and
        ``where``; NULL or empty reads as {}."""
        value: Any = None
        if text is None or text == "":
            return {}
        if isinstance(text, str):
            try:
                value = json.loads(text)
            except (ValueError, RecursionError):  # RecursionError: nested deeper than the parser's guard
                value = None
        if not isinstance(value, dict):
            raise UsageError(f"{self.flag} {shown(self.path)}: {where} is not a JSON object "
                             f"({printable(repr(text), 40)}): the database was damaged or edited by hand")
        return value

    def check_row(self, row: sqlite3.Row, table: str) -> sqlite3.Row:
        """``row`` when each number column holds a number (SQLite stores any value in any column: a
        database edited by hand or by another program can hold text there); else a UsageError naming
        the row, column and value."""
        for col, kinds in _NUMERIC[table].items():
            value = row[col]
            if value is not None and not isinstance(value, kinds):
                raise UsageError(f"{self.flag} {shown(self.path)}: {table} row {row['id']} (run {row['run_id']}) "
                                 f"has {col} = {printable(repr(value), 60)}, not a number")
        return row

    # -- links, findings, artifacts ---------------------------------------------------
    def add_links(self, run_id: int, rows: Iterable[Mapping[str, Any]]) -> None:
        cols = ("src", "dst", "method", "direction", "size_bytes", "bandwidth_gbps", "latency_us", "note")
        with self._writing(run_id):
            self.conn.executemany(
                f"INSERT INTO links(run_id, {', '.join(cols)}) VALUES (?, {', '.join('?' * len(cols))})",
                [(run_id, *(r.get(c) for c in cols)) for r in rows],
            )
            self.conn.commit()

    def links(self, run_id: int) -> list[dict[str, Any]]:
        """A run's link rows, checked as measurement rows are (a number column holding text is refused,
        a non-finite figure read as none)."""
        out = []
        for r in self.conn.execute("SELECT * FROM links WHERE run_id = ? ORDER BY id", (run_id,)):
            d = dict(self.check_row(r, "links"))
            for c in ("src", "dst"):  # a GPU index sizes the matrices shown: bounded as every link reader bounds it
                if not isinstance(d.get(c), int) or not 0 <= d[c] < MAX_GPUS:
                    raise UsageError(f"{self.flag} {shown(self.path)}: links row {d['id']} (run {run_id}) has {c} = "
                                     f"{printable(repr(d.get(c)), 40)}, not a GPU index in 0..{MAX_GPUS - 1}")
            for c in ("bandwidth_gbps", "latency_us"):
                if isinstance(d.get(c), float) and not math.isfinite(d[c]):
                    d[c] = None
            out.append(d)
        return out

    def add_findings(self, run_id: int, rows: Iterable[Mapping[str, Any]]) -> None:
        rows = list(rows)
        for r in rows:
            Verdict.parse(r["status"], f"finding {r['name']!r}")
        self.conn.executemany(
            "INSERT INTO findings(run_id, name, status, evidence, fix, value, data_json) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                (run_id, r["name"], r["status"], r.get("evidence"), r.get("fix"), r.get("value"),
                 json.dumps(r.get("data") or {}, default=str))
                for r in rows
            ],
        )
        self.conn.commit()

    def row_counts(self) -> dict[int, int]:
        """Run id -> its measurement rows (``runs``' table)."""
        return {int(r): int(n) for r, n in self.conn.execute("SELECT run_id, COUNT(*) FROM measurements GROUP BY run_id")}

    def latest_with_rows(self) -> int | None:
        """The newest run with measurements or links (what ``export latest`` exports), None when there is none."""
        row = self.conn.execute("SELECT MAX(run_id) FROM (SELECT run_id FROM measurements UNION "
                                "SELECT run_id FROM links)").fetchone()
        return None if row is None or row[0] is None else int(row[0])

    def default_summary(self) -> list[tuple[int, str, str, int, float | None, str | None]]:
        """Per (run, collective, row status) of NCCL's default rows: (run id, collective as stored, status, distinct
        sizes, highest busbw above 0 or None, a note): the report's peaks from one aggregate query."""
        q = ("SELECT run_id, collective, status, COUNT(DISTINCT size_bytes), "
             "MAX(CASE WHEN busbw_gbps > 0 THEN busbw_gbps END), MIN(note) FROM measurements "
             "WHERE config = 'default' GROUP BY run_id, collective, status")
        return [(int(r), str(c), str(st), int(n), best if isinstance(best, (int, float)) else None,
                 None if note is None else str(note)) for r, c, st, n, best, note in self.conn.execute(q)]

    def all_findings(self) -> dict[int, list[dict[str, Any]]]:
        """Run id -> its findings (name, status, evidence, fix, value), in the order they were stored."""
        out: dict[int, list[dict[str, Any]]] = {}
        q = "SELECT run_id, name, status, evidence, fix, value FROM findings ORDER BY id"
        for run_id, name, status, evidence, fix, value in self.conn.execute(q):
            out.setdefault(int(run_id), []).append(
                {"name": name, "status": status, "evidence": evidence, "fix": fix, "value": value})
        return out

    def findings(self, run_id: int) -> list[dict[str, Any]]:
        out = []
        for r in self.conn.execute("SELECT * FROM findings WHERE run_id = ? ORDER BY id", (run_id,)):
            d = dict(self.check_row(r, "findings"))
            d["data"] = self.json_object(d.pop("data_json"), f"findings row {r['id']} (run {run_id})'s data_json")
            if isinstance(d.get("value"), float) and not math.isfinite(d["value"]):
                d["value"] = None  # an infinity or NaN stored by hand: not a figure
            out.append(d)
        return out

    # -- ccltune ab: its arms and one sample per run of the job ------------------------
    def add_ab_arms(self, run_id: int, arms: Mapping[str, Mapping[str, Any]]) -> None:
        """``ccltune ab``'s arms: name -> what it sets (stored as JSON)."""
        self.conn.executemany("INSERT INTO ab_arms(run_id, name, spec_json) VALUES (?, ?, ?)",
                              [(run_id, name, json.dumps(dict(spec), default=str)) for name, spec in arms.items()])
        self.conn.commit()

    def add_ab_sample(self, run_id: int, s: AbSample) -> None:
        SampleStatus.parse(s.status, f"ab run {run_id}, arm {s.arm!r} round {s.round}")
        self.conn.execute(
            "INSERT INTO ab_samples(run_id, arm, round, slot, value, unit, status, exit_code, wall_s, matches, note)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (run_id, s.arm, s.round, s.slot, s.value, s.unit, s.status, s.exit_code, s.wall_s, s.matches, s.note))
        self.conn.commit()

    def ab_samples(self, run_id: int) -> list[AbSample]:
        """An ab run's samples in the order they were stored (none from an older file without the table); a
        number column holding something else reads as none (value) or 0."""
        if not has_table(self.conn, "ab_samples"):
            return []

        def whole(v: Any) -> int:
            return v if isinstance(v, int) else 0

        out = []
        for r in self.conn.execute("SELECT * FROM ab_samples WHERE run_id = ? ORDER BY id", (run_id,)):
            self.check_row(r, "ab_samples")  # a number column holding text: an error naming the row
            value = r["value"] if isinstance(r["value"], (int, float)) and math.isfinite(r["value"]) else None
            out.append(AbSample(str(r["arm"]), whole(r["round"]), whole(r["slot"]), value, r["unit"] or "",
                                str(r["status"]), r["exit_code"], float(r["wall_s"] or 0.0), whole(r["matches"]),
                                r["note"] or ""))
        return out

    def add_artifact(self, run_id: int, name: str, content: str) -> None:
        self.conn.execute("INSERT INTO artifacts(run_id, name, content) VALUES (?, ?, ?)", (run_id, name, content))
        self.conn.commit()

    def artifacts(self, run_id: int) -> dict[str, str]:
        return {r["name"]: r["content"] for r in self.conn.execute(
            "SELECT name, content FROM artifacts WHERE run_id = ? ORDER BY id", (run_id,))}


def _sql(value: Any) -> Any:
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True)
    return int(value) if isinstance(value, bool) else value


def _ranges(ids: list[int]) -> str:
    """'1-3, 7' for [1, 2, 3, 7]."""
    parts: list[str] = []
    first = 0
    while first < len(ids):
        last = first
        while last + 1 < len(ids) and ids[last + 1] == ids[last] + 1:
            last += 1
        parts.append(str(ids[first]) if first == last else f"{ids[first]}-{ids[last]}")
        first = last + 1
    return ", ".join(parts)
