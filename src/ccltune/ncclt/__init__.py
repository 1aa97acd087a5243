"""nccl-tests and rccl-tests, the reference benchmarks' files: each format's writer beside its reader.

- the text table ``*_perf`` prints: :mod:`ccltune.ncclt.table` writes it byte for byte as nccl-tests 2.19.6
  does, :mod:`ccltune.ncclt.table_reader` reads nccl-tests 2.13-2.19's and rccl-tests' (several runs to a file);
- the ``-J`` JSON: :mod:`ccltune.ncclt.json_doc` writes and reads it;
- :mod:`ccltune.ncclt.reading`: what the two readers share (the run record, the checks on every cell);
  :mod:`ccltune.ncclt.infer`: which collective a table without its name measured.

Reading (``ccltune import nccl-tests``) turns a file into measurement rows, pure: text in, records out.
The collective comes from ``# Collective test starting: all_reduce_perf`` (or the JSON argv), else
``--collective``, else the file name (a file of one run only); ``--collective`` that contradicts the header
is refused. nRanks from the ``#  Rank N ...`` device lines (nNodes = distinct host names). ``N/A`` in
``#wrong`` means unchecked; ``#wrong`` > 0 stores the row with status 'error' so it never feeds a rule. A
time of ``nan`` (or ``N/A``) is stored the same way, as unmeasured, and so is a time of 0 on a 0-byte row
(rounded). A value nccl-tests never prints (a negative size or count, a time of ``inf``, below 0 or 0 on a
row with bytes, a negative or infinite bandwidth or #wrong, a root outside the ranks) and, in JSON, a field
of the wrong type refuse the whole file, naming the file and the line or the field's path: nothing is
stored. In-place rows get ``in_place=True``.
"""

from __future__ import annotations

from typing import Any

from ccltune.ncclt.json_doc import parse_json
from ccltune.ncclt.reading import Parsed
from ccltune.ncclt.table_reader import parse_text

__all__ = ["Parsed", "number_reps", "parse", "parse_json", "parse_text"]


def parse(text: str, path: str, **kw: Any) -> list[Parsed]:
    """Text or JSON, by content (JSON starts with '{'): the runs in the file, in order."""
    if text.lstrip().startswith("{"):
        return [parse_json(text, path, **kw)]
    return parse_text(text, path, **kw)


def number_reps(parsed: list[Parsed]) -> None:
    """Give repeated (collective, size, placement, config) points rep 0, 1, 2... across runs and files."""
    seen: dict[tuple[Any, ...], int] = {}
    for p in parsed:
        for m in p.rows:
            key = (m.collective, m.size_bytes, m.in_place, m.config, m.n_ranks)
            m.rep = seen.get(key, 0)
            seen[key] = m.rep + 1
