"""nccl-tests' ``-J`` JSON (schema version 3, as nccl-tests 2.19.6 src/util.cu writes it: jsonOutputInit,
writeDeviceReport, writeBenchmarkLine*, writeResultFooter, writeErrors, jsonOutputFinalize): its writer and
its reader. Pure.

Writer: built from ccltune's records, a JSON-ready dict, and ``dumps``, which writes it byte for byte as
nccl-tests' own writer does (compact, doubles as ``%lf``, booleans as the strings "true"/"false", '/'
escaped): dashboards that read nccl-tests' files with their own code get the same bytes. ``cli.bench``
writes it.

Reader (:func:`parse_json`): ``args`` (argv, the program name names the collective), ``nccl_version`` (int),
``config`` (``graph``, ``devices`` list with ``rank``/``hostname``/``device_info``), ``results`` (objects with
``size``, ``count``, ``type``, ``redop``, ``root`` and ``out_of_place``/``in_place`` objects holding ``time``
(or ``cpu_time``) µs, ``alg_bw``, ``bus_bw``, ``nwrong`` (null = unchecked)), and ``average_bus_bandwidth`` at
the end (its absence = truncated). Every field read is checked: a missing field or one of the wrong type
refuses the file, naming the field's path; an unmeasured block is null, as nccl-tests writes it, and is not
imported."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from typing import Any

from ccltune import datatypes
from ccltune.commconfig import CommConfig
from ccltune.errors import UsageError
from ccltune.inputs import MAX_CALL_BYTES, MAX_COUNT
from ccltune.ncclt import reading, table
from ccltune.periter import IterStats
from ccltune.status import RowStatus
from ccltune.store import Measurement

SCHEMA_VERSION = 3


def _number(value: float | None) -> float | str:
    """jsonDouble: NaN as the string "nan"."""
    return "nan" if value is None or value != value else value


def _block(m: Measurement, cputime: bool) -> dict[str, Any] | None:
    if m.status != RowStatus.OK or m.time_us is None:
        return None  # writeBenchMarkLineNullBody: a block not measured is null
    return {"cpu_time" if cputime else "time": _number(m.time_us), "alg_bw": _number(m.algbw_gbps),
            "bus_bw": _number(m.busbw_gbps), "nwrong": None if m.wrong is None else float(m.wrong)}


def _iter_block(s: IterStats) -> dict[str, Any]:
    """writePerIterReport's JSON: the summary, every iteration, and per process when several."""
    out: dict[str, Any] = {"skipped_iterations": s.skipped, "min_us": s.min_us, "max_us": s.max_us,
                           "avg_us": s.avg_us, "p50_us": s.p50_us, "p95_us": s.p95_us, "p99_us": s.p99_us,
                           "stdev_us": s.stdev_us, "cv_pct": s.cv_pct, "times_us": [float(t) for t in s.times_us]}
    if len(s.per_process_us) > 1:
        out["per_process_max_times_us"] = [[float(t) for t in r] for r in s.per_process_us]
    return out


PerIter = tuple[IterStats | None, IterStats | None]  # (out-of-place, in-place) statistics of one row


def document(h: table.Header, pairs: Sequence[tuple[Measurement | None, Measurement]], *, argv: Sequence[str],
             environ: Sequence[str], start_time: str, end_time: str, iters: int, min_bw: float | None = None,
             cputime: bool = False, errors: Sequence[str] = ("",),
             per_iter: Sequence[PerIter] | None = None) -> dict[str, Any]:
    """One run of one collective: ``pairs`` are its (out-of-place, in-place) rows in order; with
    -I, ``per_iter`` holds each pair's statistics. ``errors``: ncclGetLastError's text ('' when none,
    as nccl-tests writes it)."""
    config: dict[str, Any] = {"nthreads": h.threads, "ngpus": h.gpus, "minimum_bytes": h.min_bytes,
                              "maximum_bytes": h.max_bytes}
    config.update({"step_factor": h.step_factor} if h.step_factor > 1 else {"step_bytes": h.step_bytes})
    config.update({"warmup_iters": h.warmup, "iterations": h.iters, "aggregated_iterations": h.agg_iters,
                   "validation": h.check, "graph": h.graph, "blocking_collectives": bool(h.blocking),
                   "per_iter_timing": h.per_iter, "per_iter_skip": h.per_iter_skip,
                   "parallel_init": h.parallel_init,
                   "devices": [{"rank": d.rank, "group": d.group, "pid": d.pid, "hostname": d.host,
                                "device": d.device, "device_hex": d.bus_id, "device_info": d.name}
                               for d in h.devices]})
    results = []
    for k, (oop, ip) in enumerate(pairs):
        m = oop or ip
        res: dict[str, Any] = {"size": m.size_bytes, "count": m.count, "type": m.dtype, "redop": m.op or "none",
                               "root": "%6i" % (m.root if m.root is not None else -1),
                               "out_of_place": _block(oop, cputime) if oop is not None else None}
        stats = per_iter[k] if per_iter is not None else (None, None)
        if stats[0] is not None and oop is not None:
            res["out_of_place_per_iter"] = _iter_block(stats[0])
        res["in_place"] = _block(ip, cputime)
        if stats[1] is not None:
            res["in_place_per_iter"] = _iter_block(stats[1])
        results.append({**res, "actual_iterations": iters, "experiment_name": ""})
    rows = [m for pair in pairs for m in pair if m is not None]
    wrong = sum(m.wrong or 0 for m in rows if m.status == RowStatus.OK)
    avg = table.avg_busbw(rows)
    ok = table.min_bw_ok(avg, min_bw)
    return {"version": SCHEMA_VERSION, "start_time": start_time, "args": list(argv), "env": list(environ),
            "nccl_version": h.nccl_code, "config": config, "results": results,
            "out_of_bounds": {"count": int(wrong), "okay": wrong == 0},
            "average_bus_bandwidth": {"bandwidth": _number(float(avg)), "okay": "unchecked" if ok is None else ok},
            "errors": list(errors), "end_time": end_time}


_ESCAPES = {'"': '\\"', "\\": "\\\\", "/": "\\/", "\t": "\\t", "\n": "\\n"}
_STR_MAX = 2047  # jsonStr's buffer (2048 bytes with its terminator)


def _string(text: str) -> str:
    """sanitizeJson: escape " \\ / tab newline; the string ends at any other control or non-ASCII
    character, and at the buffer's end, as nccl-tests' writer cuts it."""
    out: list[str] = []
    used = 0
    for ch in text:
        esc = _ESCAPES.get(ch)
        if esc is None and not 0x1F < ord(ch) < 0x7F:
            break
        piece = esc or ch
        if used + len(piece) > _STR_MAX:
            break
        out.append(piece)
        used += len(piece)
    return '"' + "".join(out) + '"'


def dumps(value: Any) -> str:
    """``value`` as nccl-tests' JSON writer prints it (util.cu jsonInt/jsonDouble/jsonStr/jsonBool)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return '"true"' if value else '"false"'
    if isinstance(value, int):
        return "%d" % value
    if isinstance(value, float):
        return '"nan"' if value != value else "%f" % value
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{_string(k)}:{dumps(v)}" for k, v in value.items()) + "}"
    return "[" + ",".join(dumps(v) for v in value) + "]"


def _show(value: Any) -> str:
    """A JSON value as the file spells it, cut short."""
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class _Json:
    """Checked reads from one -J document: a missing field or a value of the wrong type raises
    UsageError naming the file and the field's path (``config.devices[0].rank``)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def fail(self, field: str, expect: str, value: Any) -> UsageError:
        return UsageError(f'{self.path}: "{field}" must be {expect}, got {_show(value)}')

    def get(self, obj: dict[str, Any], key: str, at: str, expect: str, ok: Callable[[Any], bool],
            required: bool = False) -> Any:
        """``obj[key]`` (``at`` is obj's path) when ``ok`` says it is ``expect``; None when absent
        (or null) and not ``required``."""
        field = f"{at}.{key}" if at else key
        if key not in obj or (obj[key] is None and not required):
            if required:
                raise UsageError(f'{self.path}: "{field}" is missing')
            return None
        if not ok(obj[key]):
            raise self.fail(field, expect, obj[key])
        return obj[key]

    def integer(self, obj: dict[str, Any], key: str, at: str, required: bool = False,
                low: int | None = None, high: int = reading.INT64_MAX) -> int | None:
        """An integer (``low`` or more: the database's 64-bit range)."""
        value = self.get(obj, key, at, "an integer", _is_int, required)
        if value is not None and low is not None and not low <= value <= high:
            raise self.fail(f"{at}.{key}" if at else key, "a non-negative integer" + (f" up to {high}" if value > high
                                                                     else ""), value)
        return value

    def required(self, obj: dict[str, Any], key: str, at: str, low: int = 0, high: int = reading.INT64_MAX) -> int:
        """An integer that must be there (in ``low``..``high``)."""
        value = self.integer(obj, key, at, True, low, high)
        if value is None:  # integer() raised already: a required field is never None
            raise UsageError(f'{self.path}: "{at}.{key}" is missing')
        return value

    def number(self, obj: dict[str, Any], key: str, at: str, kind: str, size: int,
               required: bool = False) -> float | None:
        """A time, bandwidth ('bw') or #wrong of a ``size``-byte row: None for null, and for a time
        or bandwidth of "nan" (how nccl-tests writes NaN)."""
        field = f"{at}.{key}"
        if key not in obj:
            if required:
                raise UsageError(f'{self.path}: "{field}" is missing')
            return None
        value = obj[key]
        if kind != "wrong" and (isinstance(value, str) and value.lower() == "nan"
                                or isinstance(value, float) and math.isnan(value)):
            return None
        if value is None:
            return None
        try:
            number = float(value) if _is_number(value) else None
        except OverflowError:  # an integer beyond any float
            number = None
        if number is None or not reading.possible(number, kind, size):
            raise self.fail(field, reading.EXPECT[kind] + (" or null" if kind == "wrong" else ', "nan" or null'), value)
        return number


def _document(text: str, path: str) -> dict[str, Any]:
    """The -J file's top-level object, with its 'results' list and the 'average_bus_bandwidth' written
    after them (a file cut short has none)."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        hint = "several -J files joined? import each file" if exc.msg == "Extra data" else "a truncated -J file?"
        raise reading.fail(path, exc.lineno, f"not valid JSON ({exc.msg}); {hint}") from None
    except RecursionError:
        raise reading.fail(path, None, "not nccl-tests -J output (nested too deeply)") from None
    except ValueError as exc:  # an integer of more than 4,300 digits
        raise reading.fail(path, None, f"not nccl-tests -J output ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), list):
        raise reading.fail(path, None, "not nccl-tests -J output (no 'results' list)")
    if "average_bus_bandwidth" not in doc:
        raise reading.fail(path, None, "truncated: no 'average_bus_bandwidth' after the results")
    return doc


def _devices(js: _Json, cfg: dict[str, Any], shape: reading.Shape, env: dict[str, Any]) -> None:
    """``config.devices``: each rank's host, pid, GPU and group into ``shape``, and the list into ``env``."""
    for i, dev in enumerate(js.get(cfg, "devices", "config", "a list", lambda v: isinstance(v, list)) or []):
        at = f"config.devices[{i}]"
        if not isinstance(dev, dict):
            raise js.fail(at, "an object", dev)
        rank = js.required(dev, "rank", at)
        host = js.get(dev, "hostname", at, "a string", lambda v: isinstance(v, str), required=True)
        info = (js.get(dev, "device_info", at, "a string", lambda v: isinstance(v, str)) or "").strip()
        pid = js.integer(dev, "pid", at) or 0
        shape.ranks[rank] = (host, pid, info)
        shape.where[rank] = f'{js.path}: "{at}.rank"'
        shape.colors[rank] = js.integer(dev, "group", at) or 0
        env.setdefault("devices", []).append({"rank": rank, "host": host, "pid": pid,
                                              "device": js.integer(dev, "device", at),
                                              "bus_id": js.get(dev, "device_hex", at, "a string",
                                                               lambda v: isinstance(v, str)),
                                              "name": info})


def parse_json(text: str, path: str, *, candidate: CommConfig = CommConfig(), collective: str | None = None,
               nranks: int | None = None) -> reading.Parsed:
    """Parse nccl-tests' ``-J`` JSON (one run). Raises UsageError naming ``path`` (and line, or the
    field's path) on bad content."""
    doc = _document(text, path)
    js = _Json(path)
    args = js.get(doc, "args", "", "a list of strings", lambda v: isinstance(v, list)) or []
    program = args[0] if args else None  # only the program name is read
    if program is not None and not isinstance(program, str):
        raise js.fail("args[0]", "a string", program)
    cfg = js.get(doc, "config", "", "an object", lambda v: isinstance(v, dict)) or {}
    graph = 1 if (js.integer(cfg, "graph", "config") or 0) > 0 else 0
    shape = reading.Shape(threads=js.integer(cfg, "nthreads", "config"), gpus=js.integer(cfg, "ngpus", "config"))
    env: dict[str, Any] = {}
    _devices(js, cfg, shape, env)
    version = js.integer(doc, "nccl_version", "", low=0) or None
    coll = reading.collective_of(program, '"args[0]"', path, collective, path)
    n_ranks, n_nodes = reading.ranks_of(path, None, shape, nranks)
    reading.mark_groups(shape, env)
    env["tool"] = "nccl-tests"
    rows = []
    for i, res in enumerate(doc["results"]):
        at = f"results[{i}]"
        if not isinstance(res, dict):
            raise js.fail(at, "an object", res)
        size = js.required(res, "size", at, high=MAX_CALL_BYTES)
        count = js.required(res, "count", at, high=MAX_COUNT)
        dtype = js.get(res, "type", at, "a string", lambda v: isinstance(v, str), required=True)
        redop = js.get(res, "redop", at, "a string", lambda v: isinstance(v, str), required=True)
        for key, value, names in (("type", dtype, datatypes.DTYPES), ("redop", redop, reading.REDOPS)):
            if value not in names:  # only what nccl-tests prints: no formula or escape reaches a database
                raise js.fail(f"{at}.{key}", f"one of nccl-tests' {key}s ({', '.join(names)})", value)
        root = _json_root(js, res, at, n_ranks)
        for key, in_place in (("out_of_place", False), ("in_place", True)):
            blk = js.get(res, key, at, "an object or null", lambda v: isinstance(v, dict))
            if blk is None:
                continue
            where = f"{at}.{key}"
            tkey = "cpu_time" if "time" not in blk and "cpu_time" in blk else "time"  # -C: CPU time
            t = js.number(blk, tkey, where, "time", size, required=True)
            alg, bus = js.number(blk, "alg_bw", where, "bw", size), js.number(blk, "bus_bw", where, "bw", size)
            rows.append(reading.row(coll, size, count, dtype, redop, root, n_ranks, n_nodes, candidate, graph,
                                    in_place, t, alg, bus, js.number(blk, "nwrong", where, "wrong", size)))
    if not rows:
        raise reading.fail(path, None, "no result rows")
    return reading.Parsed(path, coll, n_ranks, n_nodes, rows, [g for _, (_, _, g) in sorted(shape.ranks.items()) if g],
                          sorted({h for h, _, _ in shape.ranks.values()}),
                          None if version is None else reading.nccl_version(version), 1, env)


def _json_root(js: _Json, res: dict[str, Any], at: str, n_ranks: int) -> int:
    """``root``: nccl-tests writes it as a string ("    -1"); an integer is taken too."""
    value = js.get(res, "root", at, "", lambda v: True, required=True)
    root = value if _is_int(value) else None
    if isinstance(value, str):
        try:
            root = int(value)  # int() skips the padding
        except ValueError:
            pass
    if root is None or not -1 <= root < n_ranks:
        raise js.fail(f"{at}.root", f"-1 or a rank in 0..{n_ranks - 1}", value)
    return root

