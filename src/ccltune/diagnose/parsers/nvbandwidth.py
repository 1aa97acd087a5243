"""NVIDIA nvbandwidth output as link rows: the plain matrices and ``-j`` JSON (pure).

Formats (v0.8, ``output.cpp``, ``json_output.cpp``, ``inline_common.h``; fixtures under
``tests/fixtures/nvbandwidth`` name them): each test prints ``Running KEY.``, a description
such as ``memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)``, a matrix with column ids
(``setw(10)``), rows ``setw(2)`` + ``setw(10)`` cells in fixed 2 decimals or ``N/A``, then
``SUM KEY total``. JSON: ``{"nvbandwidth": {"testcases": [{"name", "status",
"bandwidth_description", "bandwidth_matrix" (strings), "sum"}], "version", "GPU Device list"}}``.

Which tests become links: the GPU-to-GPU ones (``device_to_device_*``). Rows and columns are
kept as nvbandwidth prints them (row = ``src``, column = ``dst``); the test key names the
method: ``*_sm`` read/write -> ``sm-read``/``sm-write``, ``*_ce`` -> ``ce-read``/``ce-write``
(ccltune's ``ce`` does not say which side's context runs the copy). Bidirectional tests keep
their one-direction matrices (Read1/Write1, ...) as direction ``bidir``; their Total is a sum
and is skipped. Latency and host tests are listed in ``notes``.
"""

from __future__ import annotations

import re
from typing import Any

from ccltune.diagnose.parsers.linkimport import ImportedLinks, check_square, number, row
from ccltune.errors import UsageError
from ccltune.files import printable
from ccltune.inputs import MAX_GPUS, MAX_LINE_CHARS, load_json

_RUNNING = re.compile(r"^Running (\S+)\.$")
_DESC = re.compile(r"^(memcpy|memory latency|Device to Device Latency) .*\((GB/s|ns)\)$")
_DEVICE = re.compile(r"^Device (\d+): (.+?)(?: \([0-9a-fA-F:]+\))?$")
_JSON_DEVICE = re.compile(r"^(\d+): (.+?)(?: \([0-9a-fA-F:]+\))?(?:: \((.*)\))?$")


def _method(key: str) -> str | None:
    """ccltune's method for a test key; None for tests that are not GPU-to-GPU bandwidth."""
    if not key.startswith("device_to_device_") or "latency" in key:
        return None
    engine = "sm" if key.endswith("_sm") else "ce"
    side = "read" if "_read" in key else "write" if "_write" in key else None
    if side is None:
        return None
    return f"sm-{side}" if engine == "sm" else f"ce-{side}"


def _keep(key: str, description: str) -> tuple[str, str] | None:
    """(method, direction) of one matrix of test ``key``, or None when it is no GPU link matrix."""
    method = _method(key)
    if method is None or "GPU(row)" not in description or "GPU(column)" not in description:
        return None
    if "bidirectional" in key:
        return None if "Total" in description else (method, "bidir")
    return method, "uni"


def cuda_text(value: Any) -> str | None:
    """CUDA's version number as nvbandwidth prints it (cudaRuntimeGetVersion: 1000 x major + 10 x
    minor, 12080) as ccltune records CUDA versions ('12.8'); other text as printed."""
    text = str(value).strip() if value is not None else ""
    if text.isdigit() and int(text) >= 1000:
        return f"{int(text) // 1000}.{int(text) % 1000 // 10}"
    return text or None


def parse(text: str, where: str) -> ImportedLinks:
    """A text or JSON nvbandwidth output (told apart by its first non-blank character)."""
    body = text.lstrip()
    if body.startswith("{"):
        return _parse_json(load_json(body, where), where)
    return _parse_text([line[:MAX_LINE_CHARS] for line in text.splitlines()], where)


def _parse_text(lines: list[str], where: str) -> ImportedLinks:
    out = ImportedLinks("nvbandwidth", None, [])
    key = None
    i = 0
    begun: int | None = None  # the line of the run's "nvbandwidth Version:" (one run per file, issue 41)
    running: dict[str, int] = {}  # each test's "Running KEY." line
    while i < len(lines):
        line = lines[i].rstrip()
        if line.startswith("nvbandwidth Version:"):
            if begun is not None:
                raise UsageError(f"{where}:{i + 1}: a second nvbandwidth run begins here (the first at line {begun}"
                                 f"{', host ' + out.host if out.host else ''}): two outputs in one file; import each "
                                 "run's output on its own")
            begun = i + 1
            out.version = line.split(":", 1)[1].strip()
        elif line.startswith("CUDA Runtime Version:"):
            out.cuda_version = cuda_text(line.split(":", 1)[1].strip())
        elif line.startswith("Driver Version:"):
            out.driver_version = line.split(":", 1)[1].strip() or None
        elif m := _DEVICE.match(line):
            if m.group(1) == "0" and out.gpu_names:
                raise UsageError(f"{where}:{i + 1}: a second device list (Device 0 again{', host ' + lines[i - 1].strip() if i else ''}"
                                 f"{' after host ' + out.host if out.host else ''}): two runs in one file; import each "
                                 "run's output on its own")
            if m.group(1) == "0" and i:
                out.host = lines[i - 1].strip() or None  # printGPUs: the host name, then the devices
            out.gpu_names.append(m.group(2).strip())
        elif m := _RUNNING.match(line):
            key = m.group(1)
            if key in running:
                raise UsageError(f"{where}:{i + 1}: {key} runs a second time (first at line {running[key]}): two "
                                 "values for each pair; keep one run of each test")
            running[key] = i + 1
            out.tests.append(key)
        elif key and _DESC.match(line):
            i = _text_matrix(lines, i, key, where, out)
            continue
        elif line.startswith(("ERROR", "Error")) or line.startswith("CUDA_ERROR"):
            out.notes.append(f"{where}:{i + 1}: {line}")
        i += 1
    return _finish(out, where)


def _text_matrix(lines: list[str], i: int, key: str, where: str, out: ImportedLinks) -> int:
    desc = lines[i].strip()
    head = lines[i + 1].split() if i + 1 < len(lines) else []
    if not head or not all(c.isdigit() for c in head):
        raise UsageError(f"{where}:{i + 2}: matrix of {key} without its column ids")
    cols = [int(c) for c in head]
    if cols != list(range(len(cols))) or len(cols) > MAX_GPUS:  # indices are the matrix's own: 0..n-1
        raise UsageError(f"{where}:{i + 2}: matrix of {key}: column ids {printable(' '.join(head), 60)} are not "
                         f"0..{len(cols) - 1}")
    cells: list[list[str]] = []
    k = i + 2
    while k < len(lines) and lines[k].strip():
        parts = lines[k].split()
        if len(parts) != len(cols) + 1 or not parts[0].isdigit():
            raise UsageError(f"{where}:{k + 1}: row of {key} has {len(parts) - 1} cells, the header "
                             f"{len(cols)} columns")
        cells.append(parts)
        k += 1
    if k >= len(lines):
        raise UsageError(f"{where}:{k}: matrix of {key} ends with the file (its 'SUM {key}' line is missing)")
    if [int(r[0]) for r in cells] != list(range(len(cells))) or len(cells) > len(cols):
        raise UsageError(f"{where}:{i + 3}: matrix of {key}: row ids {printable(' '.join(r[0] for r in cells), 60)} "
                         f"are not 0..{len(cells) - 1} of the {len(cols)} columns")
    _store(key, desc, [[c for c in r[1:]] for r in cells], [int(r[0]) for r in cells], cols, f"{where}:{i + 3}",
           out)
    return k


def _store(key: str, desc: str, cells: list[list[str]], row_ids: list[int], cols: list[int], where: str,
           out: ImportedLinks) -> None:
    kept = _keep(key, desc)
    if kept is None:
        note = f"{key}: '{desc}' is not a GPU-to-GPU bandwidth matrix; not imported"
        if note not in out.notes:
            out.notes.append(note)
        return
    method, direction = kept
    if direction == "bidir" and any(r["method"] == method and r["direction"] == "bidir" for r in out.rows):
        return  # Read2/Write2: the other direction of the same pairs, as Read1/Write1 holds it
    for s, values in zip(row_ids, cells):
        for d, v in zip(cols, values):
            if v == "N/A" or s == d:
                continue
            out.rows.append(row(s, d, method, direction, None, number(v, where), f"nvbandwidth {key}"))
    out.decimals[f"{method}/{direction}"] = 2


def _parse_json(doc: Any, where: str) -> ImportedLinks:
    root = doc.get("nvbandwidth") if isinstance(doc, dict) else None
    if not isinstance(root, dict):
        raise UsageError(f"{where}: JSON without the 'nvbandwidth' object nvbandwidth -j writes")
    out = ImportedLinks("nvbandwidth", str(root.get("version")) if root.get("version") else None, [])
    out.cuda_version = cuda_text(root.get("CUDA Runtime Version"))
    out.driver_version = (str(root["Driver Version"]).strip() or None) if root.get("Driver Version") else None
    devices = root.get("GPU Device list") or []
    if not isinstance(devices, list):
        raise UsageError(f"{where}: 'GPU Device list' is {type(devices).__name__}, not a list")
    for entry in devices:
        if isinstance(entry, str) and (m := _JSON_DEVICE.match(entry)):
            out.gpu_names.append(m.group(2).strip())
            out.host = out.host or m.group(3)
    tests = root.get("testcases") or []
    if not isinstance(tests, list):
        raise UsageError(f"{where}: 'testcases' is {type(tests).__name__}, not a list")
    for n, t in enumerate(tests):
        if not isinstance(t, dict) or not isinstance(t.get("name"), str):
            raise UsageError(f"{where}: testcases[{n}] has no name")
        if t["name"] in out.tests:
            raise UsageError(f"{where}: testcases[{n}] ({t['name']}) is listed a second time (first testcases["
                             f"{out.tests.index(t['name'])}]): two values for each pair; keep one")
        out.tests.append(t["name"])
        if t.get("status") != "Passed":
            out.notes.append(f"{t['name']}: {t.get('status')}" + (f" ({t['error']})" if t.get("error") else ""))
            continue
        matrix = t.get("bandwidth_matrix")
        if not isinstance(matrix, list) or not all(isinstance(r, list) for r in matrix):
            raise UsageError(f"{where}: testcases[{n}] ({t['name']}): bandwidth_matrix is not a list of rows")
        cells = [[str(c) for c in r] for r in matrix]
        if len(cells) > MAX_GPUS or any(len(r) > MAX_GPUS for r in cells):
            raise UsageError(f"{where}: testcases[{n}] ({t['name']}): a matrix larger than {MAX_GPUS} GPUs")
        _store(t["name"], str(t.get("bandwidth_description", "")), cells, list(range(len(cells))),
               list(range(max((len(r) for r in cells), default=0))), f"{where}: testcases[{n}]", out)
    # JSON cells are written with 6 significant digits, not a fixed precision
    out.decimals = {}
    return _finish(out, where)


def _finish(out: ImportedLinks, where: str) -> ImportedLinks:
    if not out.rows:
        raise UsageError(f"{where}: no GPU-to-GPU bandwidth matrix (device_to_device_* test) in this nvbandwidth "
                         f"output; tests found: {', '.join(out.tests) or 'none'}")
    out.n_gpus = max(check_square(out.rows, where), len(out.gpu_names))
    out.method_info = {m: {"tool_tests": sorted({r["note"].split()[-1] for r in out.rows if r["method"] == m})}
                       for m in sorted({r["method"] for r in out.rows})}
    return out
