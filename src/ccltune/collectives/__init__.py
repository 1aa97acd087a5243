"""The registry of collectives: one module each, one line here each."""

from __future__ import annotations

from ccltune.collectives.all_gather import COLLECTIVE as _all_gather
from ccltune.collectives.all_reduce import COLLECTIVE as _all_reduce
from ccltune.collectives.alltoall import COLLECTIVE as _alltoall
from ccltune.collectives.base import Collective, Layout
from ccltune.collectives.broadcast import COLLECTIVE as _broadcast
from ccltune.collectives.gather import COLLECTIVE as _gather
from ccltune.collectives.reduce import COLLECTIVE as _reduce
from ccltune.collectives.reduce_scatter import COLLECTIVE as _reduce_scatter
from ccltune.collectives.scatter import COLLECTIVE as _scatter
from ccltune.collectives.sendrecv import COLLECTIVE as _sendrecv
from ccltune.errors import UsageError, unknown_name

# nccl-tests' order
REGISTRY: dict[str, Collective] = {c.name: c for c in (
    _all_reduce, _all_gather, _broadcast, _reduce_scatter, _reduce, _alltoall, _scatter,
    _gather, _sendrecv,
)}
# The collectives NCCL passes to a tuner plugin (nccl-tests' order): the default of sweep and validate
TUNABLE = [c for c in REGISTRY.values() if c.tuner_func is not None]
# Derived tables: every other spelling of a collective comes from its registry entry
# ours -> the rule file's, in ncclFunc_t order (broadcast, reduce, allgather, reducescatter, allreduce)
PLUGIN_NAMES: dict[str, str] = {c.name: c.plugin_name for c in sorted(TUNABLE, key=lambda c: c.tuner_func or 0)
                                if c.plugin_name}
BY_PLUGIN_NAME: dict[str, Collective] = {p: REGISTRY[n] for n, p in PLUGIN_NAMES.items()}
BY_NCCL_NAME: dict[str, Collective] = {n: c for c in REGISTRY.values() for n in c.nccl_names}  # NCCL's opName
_ALIASES = {**{c.plugin_name: c.name for c in TUNABLE if c.plugin_name},  # allreduce, allgather, ...
            # NCCL's opName of a one-call collective, lower-cased (AllReduce, AlltoAll; not Send/Recv)
            **{n.lower(): c.name for c in REGISTRY.values() if len(c.nccl_names) == 1 for n in c.nccl_names},
            "all_to_all": "alltoall", "a2a": "alltoall", "send_recv": "sendrecv"}


def canonical(name: str) -> str | None:
    """Our name of a collective from any of its spellings (ours, the rule file's, NCCL's opName of a
    one-call collective, nccl-tests' binary ``all_reduce_perf``; case and dashes aside); None when it
    names none."""
    key = str(name).strip().lower().replace("-", "_").removesuffix("_perf")
    key = _ALIASES.get(key, key)
    return key if key in REGISTRY else None


def get(name: str, where: str = "COLLECTIVE") -> Collective:
    key = canonical(name)
    if key is None:
        raise unknown_name("collective", name, [*REGISTRY, "all"], where)
    return REGISTRY[key]


def select(names: list[str] | str, where: str = "COLLECTIVE") -> list[Collective]:
    """'all' -> every collective in nccl-tests' order; else the named ones."""
    items = [names] if isinstance(names, str) else list(names)
    out: list[Collective] = []
    for n in items:
        for part in n.split(","):
            if part.strip().lower() == "all":
                out.extend(c for c in REGISTRY.values() if c not in out)
            elif part.strip():
                c = get(part, where)
                if c not in out:
                    out.append(c)
    if not out:
        raise UsageError(f"{where}: {' '.join(items)!r} names no collective; give one of "
                         + ", ".join(REGISTRY) + ", or all")
    return out


__all__ = ["BY_NCCL_NAME", "BY_PLUGIN_NAME", "PLUGIN_NAMES", "REGISTRY", "TUNABLE", "Collective",
           "Layout", "canonical", "get", "select"]
