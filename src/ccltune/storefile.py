"""The results database's file (the layer beneath :mod:`ccltune.store`'s queries): its schema, how an older
file is brought up to it, and the checks made before SQLite opens a path (SQLite itself would wait forever
on a FIFO, read a device as garbage, or write its tables into another program's database).

Tables (units in column names):
- ``runs``: one row per command invocation: kind (bench, sweep, validate, links, doctor,
  check), status (a ``status.RunStatus``: running, complete, interrupted, failed), the environment as JSON.
- ``measurements``: one row per (size, placement, configuration, repetition) timing.
  ``algo``/``proto``/``channels`` are NULL for NCCL's own choice ("default"). ``status``: a
  ``status.RowStatus``. ``extra``: JSON of what else a row measured (bench ``-C``: ``cpu_time_us``; ``-I``:
  ``per_iter``, its statistics and every iteration's time), NULL otherwise (schema version 2; version 1
  had no such column).
- ``links``: per GPU pair bandwidth/latency (``ccltune links``).
- ``findings``: the ``status.Verdict`` results of ``doctor`` and ``check``.
- ``artifacts``: named text blobs attached to a run (rule files, verdict JSON, logs).
- ``ab_arms``, ``ab_samples`` (schema version 3): ``ccltune ab``'s arms (name, what it sets, as
  JSON) and one row per run of the user's job (arm, round, its value or why it failed);
  ``Store.add_ab_arms``, ``add_ab_sample`` and ``ab_samples`` write and read them. A version-2 file gains
  them when opened to write (opened read-only, it has none: ``has_table``).
"""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

from ccltune.errors import UsageError
from ccltune.files import check_name, shown

SCHEMA_VERSION = 3   # 2: measurements.extra (bench -C/-I figures); 3: ab_arms, ab_samples (ccltune ab).
                     # An older file gains what it lacks when opened to write

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    status TEXT NOT NULL,
    started_at TEXT NOT NULL,
    finished_at TEXT,
    command TEXT NOT NULL,
    engine TEXT,
    world_size INTEGER,
    n_nodes INTEGER,
    launcher TEXT,
    host TEXT,
    platform TEXT,
    ccltune_version TEXT,
    nccl_version TEXT,
    args_json TEXT NOT NULL DEFAULT '{}',
    env_json TEXT NOT NULL DEFAULT '{}',
    summary_json TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE IF NOT EXISTS measurements (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id INTEGER NOT NULL REFERENCES runs(id),
    collective TEXT NOT NULL,
    size_bytes INTEGER NOT NULL,
    count INTEGER NOT NULL,
    dtype TEXT NOT NULL,
    op TEXT,
    root INTEGER,
    in_place INTEGER NOT NULL,
    n_ranks INTEGER NOT NULL,
    n_nodes INTEGER NOT NULL DEFAULT 1,
    algo TEXT,
    proto TEXT,
    channels INTEGER,
    config TEXT NOT NULL DEFAULT 'default',
    graph INTEGER NOT NULL DEFAULT 0,
    rep INTEGER NOT NULL DEFAULT 0,
    time_us REAL,
    algbw_gbps REAL,
    busbw_gbps REAL,
    wrong INTEGER,
    status TEXT NOT NULL DEFAULT 'ok',
    note TEXT,
    extra TEXT
);
CREATE INDEX IF NOT EXISTS measurements_run ON measurements(run_id, collective, size_bytes);
CREATE TABLE IF NOT EXISTS links (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id INTEGER NOT NULL REFERENCES runs(id),
    src INTEGER NOT NULL,
    dst INTEGER NOT NULL,
    method TEXT NOT NULL,
    direction TEXT NOT NULL,
    size_bytes INTEGER,
    bandwidth_gbps REAL,
    latency_us REAL,
    note TEXT
);
CREATE TABLE IF NOT EXISTS findings (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id INTEGER NOT NULL REFERENCES runs(id),
    name TEXT NOT NULL,
    status TEXT NOT NULL,
    evidence TEXT,
    fix TEXT,
    value REAL,
    data_json TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE IF NOT EXISTS ab_arms (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id INTEGER NOT NULL REFERENCES runs(id),
    name TEXT NOT NULL,
    spec_json TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE IF NOT EXISTS ab_samples (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id INTEGER NOT NULL REFERENCES runs(id),
    arm TEXT NOT NULL,
    round INTEGER NOT NULL,
    slot INTEGER NOT NULL,
    value REAL,
    unit TEXT,
    status TEXT NOT NULL,
    exit_code INTEGER,
    wall_s REAL,
    matches INTEGER,
    note TEXT
);
CREATE TABLE IF NOT EXISTS artifacts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id INTEGER NOT NULL REFERENCES runs(id),
    name TEXT NOT NULL,
    content TEXT NOT NULL
);
"""


def check_file(path: Path, flag: str, *, must_exist: bool, write: bool) -> None:
    """Before SQLite opens ``path``: a name the file system can hold, a regular file (SQLite would
    wait forever on a FIFO and read a device as garbage), in a folder that exists, that this user
    may read (and write, for commands that write)."""
    check_name(path, flag)
    try:
        st = path.stat()
    except FileNotFoundError:
        st = None
    except PermissionError:
        raise UsageError(f"{flag} {shown(path)}: no permission to reach it (a folder on its path is closed "
                         "to this user)") from None
    except OSError as exc:
        raise UsageError(f"{flag} {shown(path)}: {exc.strerror}") from None
    if st is None:
        if must_exist:
            raise UsageError(f"database {shown(path)} does not exist ({flag})")
        folder = path.parent if str(path.parent) else Path(".")
        if not folder.is_dir():
            raise UsageError(f"folder of database {shown(path)} does not exist ({flag})")
        if write and not os.access(folder, os.W_OK | os.X_OK):
            raise UsageError(f"{flag} {shown(path)}: no permission to create a file in {shown(folder)}")
        return
    if stat.S_ISDIR(st.st_mode):
        raise UsageError(f"{flag} {shown(path)} is a folder, not a database file")
    if not stat.S_ISREG(st.st_mode):
        kind = "a FIFO" if stat.S_ISFIFO(st.st_mode) else "a device or socket"
        raise UsageError(f"{flag} {shown(path)} is {kind}, not a database file")
    if not os.access(path, os.R_OK | (os.W_OK if write else 0)):
        raise UsageError(f"{flag} {shown(path)}: no permission to {'write' if write else 'read'} it")


def check_kind(conn: sqlite3.Connection, where: str, *, empty_ok: bool) -> None:
    """Refuse, before anything is written, a file that is not a ccltune database of a schema this version reads."""
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if not tables:
        if empty_ok:
            return
        raise UsageError(f"{where} holds no ccltune data (an empty database)")
    version = None
    if "meta" in tables:
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        version = row[0] if row else None
    if version is None or "runs" not in tables:
        names = ", ".join(sorted(t for t in tables if not t.startswith("sqlite_"))[:6])
        raise UsageError(f"{where} is an SQLite database of another program (tables: {names}), "
                         "not a ccltune database; it was left as it is")
    if not str(version).isdigit() or int(version) > SCHEMA_VERSION:
        raise UsageError(f"{where} has schema version {version!r}, which this ccltune ({SCHEMA_VERSION}) "
                         "does not read: it was written by a newer ccltune")


def has_table(conn: sqlite3.Connection, name: str) -> bool:
    """Whether the file has table ``name`` (an older file opened read-only lacks the newer tables)."""
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)).fetchone() is not None


def upgrade(conn: sqlite3.Connection) -> None:
    """An older file opened to write: add what this version has (every row of it stays as it was;
    version 3's ab tables come from the schema's CREATE TABLE IF NOT EXISTS)."""
    cols = {r[1] for r in conn.execute("PRAGMA table_info(measurements)")}
    if "extra" not in cols:
        conn.execute("ALTER TABLE measurements ADD COLUMN extra TEXT")
    conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))
