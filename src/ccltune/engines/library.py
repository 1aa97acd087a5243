"""Which collective library the nccl engine loaded, NVIDIA NCCL or AMD RCCL, detected once here,
and what that means for a sweep: the algorithms and protocols it may force, and the environment a
forced communicator needs.

RCCL keeps NCCL's API, symbol names and version numbers (its ``ncclGetVersion`` returns the NCCL
version it is based on, e.g. 22105 for RCCL 2.21.5), so the version cannot tell them apart. RCCL
exports MSCCL's ``mscclLoadAlgo`` (declared in RCCL's public ``nccl.h``, ROCm/rccl
``src/nccl.h.in``), which NVIDIA NCCL does not; a library whose file is ``librccl*`` is RCCL too.

RCCL facts used below (ROCm/rocm-systems ``projects/rccl`` @03a89144; the RCCL-shaped plugin
harness ``plugin/tests/test_rccl.c`` acts the same facts out):
- On AMD GPUs RCCL models Tree and Ring (and PAT with ``NCCL_PAT_ENABLE`` and one GPU per node);
  NVLS/NVLSTree have a zero bandwidth ratio in every RCCL tuning model and CollNet needs a collnet
  plugin (``src/graph/tuning.cc``).
- LL128 is off unless RCCL was built with ENABLE_LL128, the node is all-xGMI and the topology
  enables it, which ``RCCL_LL128_FORCE_ENABLE=1`` forces (``src/init.cc``); an explicit
  ``NCCL_PROTO=LL128`` does not bypass that check. So an LL128 candidate's communicator is made
  with ``RCCL_LL128_FORCE_ENABLE=1``.
- RCCL reads its ``RCCL_*`` parameters once per process and caches them (``RCCL_PARAM`` in
  ``src/include/param.h``): the first communicator's value holds for every later one. A
  communicator that needs another value than the one RCCL cached is refused here with that reason
  rather than measured as something it is not. A sweep's first communicator is NCCL's default, made
  under the environment the job was started with, so ``deferred`` says before anything is measured
  which candidates a run started otherwise (``RCCL_LL128_FORCE_ENABLE=1``) must measure instead.
  They are not run in a second job into the same run: in that job NCCL's default itself has LL128
  enabled, so its default and twin differ from this run's and the two cannot be compared as one sweep.
- RCCL before 2.22 differs (ROCm/rccl @0cbce2a7, RCCL 2.21.5, ``src/graph/tuning.cc``
  ncclTopoTuneModel): with NCCL_PROTO unset, LL128 is enabled only on gfx90a (and there only with
  the topology's or RCCL_LL128_FORCE_ENABLE's ``ll128Enabled``), so on any other GPU forcing it
  changes nothing and an LL128 candidate would run another protocol under LL128's name. Such a
  candidate is refused with that reason (``proto_unavailable``), its rows recorded unavailable.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ccltune.errors import EngineUnavailable, UsageError
from ccltune.rules import NCCL_ALGOS, rule_spelling

LL128_FORCE = "RCCL_LL128_FORCE_ENABLE"


@dataclass(frozen=True)
class LibraryFacts:
    """What a sweep needs to know of the loaded library."""

    kind: str                                   # "nccl" or "rccl"
    version: str
    algos: tuple[str, ...] | None = None        # algorithms it can be made to run; None: all of NCCL's
    unavailable: Mapping[str, str] = field(default_factory=dict)  # algorithm -> why not, on this library
    proto_env: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # protocol -> env it needs
    cached_env: tuple[str, ...] = ()            # variables read once per process
    proto_unavailable: Mapping[str, str] = field(default_factory=dict)  # protocol -> why it cannot be forced here

    @property
    def name(self) -> str:
        return f"{'RCCL' if self.kind == 'rccl' else 'NCCL'} {self.version}"


_RCCL_NOT = {
    "nvls": "NVLS needs NVIDIA NVSwitch multicast; RCCL's tuning models give it no bandwidth",
    "nvlstree": "NVLSTree needs NVIDIA NVSwitch multicast; RCCL's tuning models give it no bandwidth",
    "collnetdirect": "CollNet needs a collnet network plugin, which AMD hosts do not have",
    "collnetchain": "CollNet needs a collnet network plugin, which AMD hosts do not have",
}
_RCCL_ALGOS = tuple(a for a in NCCL_ALGOS if a not in _RCCL_NOT)  # tree, ring, pat


def _version(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def detect(path: str, exports: Callable[[str], bool], version: str, arch: str | None = None) -> LibraryFacts:
    """The facts of the library at ``path``; ``exports(symbol)`` says whether it exports a symbol;
    ``arch``: the GPU's gfx architecture (``gcnArchName``), when known."""
    if exports("mscclLoadAlgo") or Path(path).name.startswith("librccl"):
        gfx = (arch or "").split(":")[0]
        if (0,) < _version(version) < (2, 22) and gfx != "gfx90a":
            why = (f"RCCL {version} enables LL128 only on gfx90a (src/graph/tuning.cc), not on "
                   f"{gfx or 'this GPU'}, and RCCL_LL128_FORCE_ENABLE does not change that: forced, it would run "
                   "another protocol under LL128's name (an explicit NCCL_PROTO listing LL128 enables it on any "
                   "GPU, which AMD does not test there)")
            return LibraryFacts("rccl", version, algos=_RCCL_ALGOS, unavailable=_RCCL_NOT,
                                proto_unavailable={"ll128": why})
        return LibraryFacts("rccl", version, algos=_RCCL_ALGOS, unavailable=_RCCL_NOT,
                            proto_env={"ll128": {LL128_FORCE: "1"}}, cached_env=(LL128_FORCE,))
    return LibraryFacts("nccl", version)


def facts_of(lib: Any, arch: str | None = None) -> LibraryFacts:
    """``detect`` for a loaded ``NcclLib`` on a GPU of ``arch``."""
    return detect(lib.path, lib.exports, lib.version, arch)


def sweep_candidates(facts: LibraryFacts | None, cands: Sequence[Any]) -> list[Any]:
    """``cands`` (``ccltune.commconfig.CommConfig``) checked against the library: an algorithm it cannot run
    is a usage error naming the library and the reason, not a row measured as something else."""
    if facts is None or facts.algos is None:
        return list(cands)
    bad = sorted({c.algo for c in cands if c.algo and c.algo not in facts.algos})
    if bad:
        why = "; ".join(f"{rule_spelling(a)}: {facts.unavailable.get(a, 'not an algorithm of this library')}"
                        for a in bad)
        raise UsageError(f"--algos {','.join(map(rule_spelling, bad))}: {facts.name} cannot run "
                         f"{'it' if len(bad) == 1 else 'them'} ({why}); "
                         f"sweep {','.join(map(rule_spelling, facts.algos))}")
    return list(cands)


@dataclass(frozen=True)
class Deferred:
    """Candidates this process cannot measure: each needs a once-per-process variable (``env``) set
    otherwise than the process's first communicator, NCCL's default, reads it."""

    candidates: tuple[Any, ...]
    env: Mapping[str, str]          # the variables the run that can measure them is started with
    library: str                    # 'RCCL 2.21.5'
    first: Mapping[str, str | None] = field(default_factory=dict)  # those variables as this process has them


def deferred(facts: LibraryFacts | None, cands: Sequence[Any],
             environ: Mapping[str, str] | None = None) -> Deferred | None:
    """The candidates of a sweep (``CommConfig``, NCCL's default first) that its process cannot measure
    on this library, or None: a candidate whose protocol needs a cached variable (RCCL: LL128 needs
    RCCL_LL128_FORCE_ENABLE=1) other than the value in ``environ`` (default: this process's), which the
    default's communicator, made first, caches. CommEnv refuses exactly these when they come."""
    if facts is None or not facts.cached_env:
        return None
    environ = os.environ if environ is None else environ
    first = {k: environ.get(k) for k in facts.cached_env}
    out, env = [], {}
    for c in cands:
        differ = {k: v for k, v in facts.proto_env.get((c.proto or "").lower(), {}).items() if first.get(k) != v}
        if differ:
            out.append(c)
            env.update(differ)
    return Deferred(tuple(out), env, facts.name, {k: first.get(k) for k in env}) if out else None


class CommEnv:
    """The environment each communicator is made under, beyond NCCL_ALGO/NCCL_PROTO: what its
    protocol needs on this library, checked against what the library cached at its first
    communicator in this process."""

    def __init__(self, facts: LibraryFacts):
        self.facts = facts
        self.cached: dict[str, str | None] | None = None  # values at the first communicator

    def for_comm(self, proto: str | None, label: str) -> dict[str, str | None]:
        """Variables to set around this communicator's init (None: unset). Raises
        EngineUnavailable when the library would ignore them (cached from an earlier communicator)."""
        why = self.facts.proto_unavailable.get((proto or "").lower())
        if why:
            raise EngineUnavailable(f"{label}: {why}")
        want: dict[str, str | None] = {k: os.environ.get(k) for k in self.facts.cached_env}
        want.update(self.facts.proto_env.get((proto or "").lower(), {}))
        if self.cached is None:
            self.cached = dict(want)
            return want
        for key, value in want.items():
            if self.cached.get(key) != value:
                first = self.cached.get(key)
                raise EngineUnavailable(
                    f"{label} needs {key}={value or '(unset)'}, but {self.facts.name} read {key} once, at this "
                    f"process's first communicator ({key}={first or '(unset)'}), and keeps that value: sweep "
                    f"{proto or 'these'} candidates in a run of their own started with {key}={value or ''} "
                    f"(its every communicator, the default included, then has it)")
        return want
