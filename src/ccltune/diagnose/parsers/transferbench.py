"""TransferBench output (ROCm/TransferBench) as link rows: the ``a2a`` and ``p2p`` presets (pure).

Formats, from the tool's print statements (fixtures under ``tests/fixtures/transferbench`` name
file and version):

- a2a (v1.59 ``src/client/Presets/AllToAll.hpp``, ``src/client/Client.cpp``): per executor
  `` Executor: GPU 00 | 336.217 GB/s | ...`` then one line per transfer
  ``     Transfer 00  |   48.031 GB/s |    5.589 ms |    268435456 bytes | F0 -> G000:008 -> F1``
  (source memory, executor type and index, ``:`` CU count, destination memory; memory ``F`` is
  fine-grained GPU memory, ``G`` coarse-grained; executor ``G`` is the GFX kernel, ``D`` DMA);
  then ``Summary: [N bytes per Transfer]``, a ``SRC\\DST GPU 00 ... STotal Actual`` matrix
  (``%8.3f``), where STotal is the row's sum and Actual is the row's slowest link x its
  transfer count. All transfers of a2a run at once: rows are stored as direction ``all2all``.
- p2p (v1.67 ``src/client/Presets/PeerToPeer.hpp``): ``Unidirectional copy peak bandwidth GB/s
  [...] (GPU-Executor: GFX)`` and ``Bidirectional ...`` tables, ``%10.2f`` cells, rows
  ``  GPU 00  ->`` (and ``<- `` / ``<->`` in the bidirectional table). CPU rows and columns are
  not links between GPUs and are skipped.
- ``OUTPUT_TO_CSV=1`` prints the same lines with ``,`` for the separators; both are read.
"""

from __future__ import annotations

import re
from typing import Any

from ccltune.diagnose.parsers.linkimport import ImportedLinks, check_square, number, row
from ccltune.errors import UsageError
from ccltune.inputs import MAX_LINE_CHARS

_VERSION = re.compile(r"^TransferBench (?:Client v(\S+) Backend v(\S+)|v(\S+))")
_ENV = re.compile(r"^([A-Z][A-Z0-9_]+)\s*(?:=|,)\s*(-?\d+)\s*[:,]")
_COPYING = re.compile(r"^- Copying (\d+) bytes between (.+?) pairs of GPUs using (\d+) CUs \((\d+) Transfers\)")
_TRANSFER = re.compile(r"^\s*Transfer\s+(\d+)\s*[|,]\s*(\S+) GB/s\s*[|,]\s*(\S+) ms\s*[|,]\s*(\d+) bytes\s*[|,]\s*"
                       r"(\S+) -> ([A-Z])(\d+)(?:\.\d+)?:(\d+) -> (\S+)")
_SUMMARY = re.compile(r"^Summary:(?: \[(\d+) bytes per Transfer\])?")
_P2P_TITLE = re.compile(r"^(Uni|Bi)directional copy peak bandwidth GB/s \[(\w+) read / (\w+) write\] "
                        r"\(GPU-Executor: (\w+)\)")
_MEM = re.compile(r"^([A-Z])(\d+)$")
_EXECUTORS = {"G": "GFX", "D": "DMA"}


def parse(text: str, where: str) -> ImportedLinks:
    """Every a2a and p2p result in ``text`` (``where`` names it in errors)."""
    lines = [line[:MAX_LINE_CHARS] for line in text.splitlines()]  # a regex reads at most this much of a line
    out = ImportedLinks("TransferBench", None, [])
    env: dict[str, int] = {}
    for n, line in enumerate(lines, 1):
        if line.startswith("[ERROR]"):
            raise UsageError(f"{where}:{n}: TransferBench reported an error: {line[8:].strip()}")
        if out.version is None and (m := _VERSION.match(line)):
            out.version = m.group(2) or m.group(3)
        if m := _ENV.match(line):
            env[m.group(1)] = int(m.group(2))
    i = 0
    while i < len(lines):
        line = lines[i]
        if _COPYING.match(line):
            i = _a2a(lines, i, where, env, out)
        elif m := _P2P_TITLE.match(line):
            i = _p2p(lines, i, m, where, env, out)
        else:
            i += 1
    if not out.rows:
        raise UsageError(f"{where}: no TransferBench a2a or p2p results (no '- Copying ... bytes between' or "
                         "'...directional copy peak bandwidth' section)")
    out.n_gpus = check_square(out.rows, where)
    return out


def _a2a(lines: list[str], start: int, where: str, env: dict[str, int], out: ImportedLinks) -> int:
    m = _COPYING.match(lines[start])
    assert m is not None
    size, cus, count = int(m.group(1)), int(m.group(3)), int(m.group(4))
    transfers: dict[tuple[int, int], float] = {}
    kinds: set[tuple[str, str, str, int]] = set()
    i = start + 1
    while i < len(lines) and not _SUMMARY.match(lines[i]) and not _COPYING.match(lines[i]):
        if t := _TRANSFER.match(lines[i]):
            src, dst = _mem(t.group(5), where, i + 1), _mem(t.group(9), where, i + 1)
            if src[0] not in "FG" or dst[0] not in "FG":  # a NIC or CPU leg: not a GPU link
                i += 1
                continue
            transfers[(src[1], dst[1])] = number(t.group(2), f"{where}:{i + 1}")
            kinds.add((src[0] + dst[0], t.group(6), t.group(7), int(t.group(8))))
        i += 1
    matrix, figures, i = _a2a_summary(lines, i, where) if i < len(lines) and _SUMMARY.match(lines[i]) else ({}, {}, i)
    if not matrix and not transfers:
        raise UsageError(f"{where}:{start + 1}: a2a section without results (no Transfer lines, no Summary matrix)")
    for pair, v in transfers.items():
        if pair in matrix and abs(matrix[pair] - v) > 5e-4:
            raise UsageError(f"{where}: a2a GPU {pair[0]} -> {pair[1]}: Transfer line says {v:.3f} GB/s, "
                             f"the Summary matrix {matrix[pair]:.3f}: the file mixes two runs")
    cells = matrix or transfers
    if count and len(cells) != count:
        out.notes.append(f"a2a announced {count} transfers, the file holds {len(cells)}")
    method, info = _method(kinds, env, cus, where, start + 1)
    info["size_bytes"] = size
    info["pairs"] = m.group(2)
    out.method_info.setdefault(method, {}).update({"a2a": info})
    note = _note(info)
    out.rows += [row(s, d, method, "all2all", size, v, note) for (s, d), v in sorted(cells.items())]
    if figures:
        out.tool_figures.setdefault(f"{method}/all2all", {}).update(figures)
    out.tests.append("a2a")
    out.decimals[f"{method}/all2all"] = 3  # %8.3f
    return i


def _a2a_summary(lines: list[str], i: int, where: str) -> tuple[dict[tuple[int, int], float], dict[str, Any], int]:
    """The SRC\\DST matrix after ``Summary:``: cells, per-GPU STotal/Actual as printed, next line."""
    header_at = next((k for k in range(i + 1, min(i + 4, len(lines))) if lines[k].startswith("SRC\\DST")), None)
    if header_at is None:
        raise UsageError(f"{where}:{i + 1}: 'Summary:' without its 'SRC\\DST' header line")
    head = lines[header_at].replace(",", " ")
    gpus = [int(g) for g in re.findall(r"GPU (\d+)", head)]
    if gpus != list(range(len(gpus))):
        raise UsageError(f"{where}:{header_at + 1}: a2a summary columns are not GPU 00..N ({gpus})")
    nic = "NIC(" in head
    cells: dict[tuple[int, int], float] = {}
    stotal: dict[str, float] = {}
    actual: dict[str, float] = {}
    k = header_at + 1
    for src in range(len(gpus)):
        if k >= len(lines) or not lines[k].startswith(f"GPU {src:02d}"):
            got = lines[k] if k < len(lines) else "end of file"
            raise UsageError(f"{where}:{k + 1}: a2a summary row 'GPU {src:02d}' expected, got {got!r} "
                             f"(the matrix stops after {src} of {len(gpus)} rows)")
        vals = lines[k].replace(",", " ").split()[2:]
        if len(vals) != len(gpus) + nic + 2:
            raise UsageError(f"{where}:{k + 1}: a2a summary row GPU {src:02d} has {len(vals)} values, "
                             f"expected {len(gpus) + nic + 2} ({len(gpus)} GPUs{' + NIC' if nic else ''} + STotal + Actual)")
        for dst, v in enumerate(vals[:len(gpus)]):
            if v != "N/A":
                cells[(src, dst)] = number(v, f"{where}:{k + 1}")
        stotal[str(src)] = number(vals[-2], f"{where}:{k + 1}")
        actual[str(src)] = number(vals[-1], f"{where}:{k + 1}")
        k += 1
    return cells, {"stotal_gbps": stotal, "actual_gbps": actual, "nic_column": nic}, k


def _mem(text: str, where: str, n: int) -> tuple[str, int]:
    m = _MEM.match(text)
    if not m:
        raise UsageError(f"{where}:{n}: transfer memory {text!r} is not one memory location (type letter + index)")
    return m.group(1), int(m.group(2))


def _method(kinds: set[tuple[str, str, str, int]], env: dict[str, int], cus: int, where: str, n: int
            ) -> tuple[str, dict[str, Any]]:
    """ccltune's method name and what TransferBench said about it (executor, CUs, memory, who runs it)."""
    if len({(k[0], k[1], k[3]) for k in kinds}) > 1:
        raise UsageError(f"{where}:{n}: a2a transfers of several kinds {sorted(kinds)}; expected one preset run")
    if kinds:
        mems, exe, _, cus = next(iter(kinds))
        fine = mems == "FF"
    else:  # only the matrix: the env block says it
        exe = "D" if env.get("USE_DMA_EXEC") else "G"
        fine = bool(env.get("USE_FINE_GRAIN", 1))
    remote_read = bool(env.get("USE_REMOTE_READ", 0))
    executor = _EXECUTORS.get(exe, exe)
    method = "ce" if executor == "DMA" else "sm-read" if remote_read else "sm-write"
    info: dict[str, Any] = {"executor": executor, "cus": cus if executor == "GFX" else None, "fine_grained": fine,
                            "executor_side": "DST" if remote_read else "SRC"}
    return method, info


def _note(info: dict[str, Any]) -> str:
    what = "GFX kernel" if info["executor"] == "GFX" else "DMA engine" if info["executor"] == "DMA" else info["executor"]
    cus = f", {info['cus']} CUs" if info.get("cus") else ""
    return (f"TransferBench {what}{cus}, {'fine' if info['fine_grained'] else 'coarse'}-grained memory, "
            f"executor on {info['executor_side']}")


def _p2p(lines: list[str], start: int, title: re.Match[str], where: str, env: dict[str, int],
         out: ImportedLinks) -> int:
    bidir = title.group(1) == "Bi"
    executor = title.group(4)
    remote_read = title.group(2) == "Remote"
    k = start + 1
    head = lines[k].replace(",", " ") if k < len(lines) else ""
    cols = re.findall(r"(CPU|GPU) (\d+)", head)
    if not cols:
        raise UsageError(f"{where}:{k + 1}: p2p table without its CPU/GPU column header")
    size = next((int(m.group(1)) for line in lines[:start] if (m := re.match(r"Bytes Per Direction[ ,](\d+)", line))),
                None)
    fine = env.get("GPU_MEM_TYPE", env.get("USE_FINE_GRAIN", 0)) == 1
    info = {"executor": executor, "cus": env.get("NUM_GPU_SE") if executor == "GFX" else None, "fine_grained": fine,
            "executor_side": "DST" if remote_read else "SRC", "size_bytes": size}
    method = "ce" if executor == "DMA" else "sm-read" if remote_read else "sm-write"
    direction = "bidir" if bidir else "uni"
    k += 1
    while k < len(lines):
        text = lines[k].replace(",", " ")
        m = re.match(r"^\s*(CPU|GPU) (\d+)\s*(->|<-|<->)\s+(.*)$", text)
        if not m:
            if text.strip():  # the averages line, or the next section
                break
            k += 1
            continue
        vals = m.group(4).split()
        if len(vals) != len(cols):
            raise UsageError(f"{where}:{k + 1}: p2p row {m.group(1)} {m.group(2)} has {len(vals)} values, "
                             f"the header {len(cols)} columns")
        if m.group(1) == "GPU" and m.group(3) != "<->":
            s = int(m.group(2))
            for (kind, idx), v in zip(cols, vals):
                d = int(idx)
                if kind != "GPU" or d == s or v == "N/A":
                    continue
                gbps = number(v, f"{where}:{k + 1}")
                pair = (s, d) if m.group(3) == "->" else (d, s)
                out.rows.append(row(*pair, method, direction, size, gbps, _note(info)))
        k += 1
    out.method_info.setdefault(method, {})[f"p2p/{direction}"] = info
    out.tests.append(f"p2p/{direction}")
    out.decimals[f"{method}/{direction}"] = 2  # %10.2f
    return k
