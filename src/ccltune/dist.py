"""Launcher environment, process-group setup and teardown, timeouts. Nothing else (starting a
job for ``--nproc`` is ``ccltune.launch``).

ccltune runs one process per GPU, started by an existing launcher: torchrun (one node, or
several with its rendezvous), Slurm's srun, or mpirun. This module reads who we are from
that launcher's variables, joins torch.distributed (a gloo group for the host side; the
torch engine adds NCCL), and turns a dead or hung peer into a DistError naming the rank
and host, within the configured timeout.
"""

from __future__ import annotations

import datetime
import os
import socket
import subprocess
import time
import zlib
from dataclasses import dataclass, field
from typing import Any

from ccltune.errors import DistError, UsageError

_ROLLCALL_GRACE_S = 3.0


@dataclass(frozen=True)
class LaunchInfo:
    """Who this process is, as the launcher said."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    launcher: str          # torchrun, slurm, mpirun, single
    master_addr: str | None
    master_port: int | None
    rendezvous: str | None = None  # how ccltune chose master_addr/port when the launcher did not say


    @property
    def n_nodes(self) -> int:
        return max(1, self.world_size // max(1, self.local_world_size))


def _int(env: dict[str, str], key: str) -> int:
    try:
        return int(env[key])
    except ValueError:
        raise UsageError(f"environment variable {key}={env[key]!r} is not an integer") from None


def launch_info(env: dict[str, str] | None = None) -> LaunchInfo:
    """Read rank/world from torchrun, Slurm or Open MPI/PMI variables (in that order)."""
    env = dict(os.environ if env is None else env)
    addr = env.get("MASTER_ADDR")
    port = _int(env, "MASTER_PORT") if "MASTER_PORT" in env else None
    if "RANK" in env and "WORLD_SIZE" in env:  # torchrun (also set by hand)
        return _checked(("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"), LaunchInfo(_int(env, "RANK"), _int(env, "WORLD_SIZE"), _int(env, "LOCAL_RANK") if "LOCAL_RANK" in env else 0,
                          _int(env, "LOCAL_WORLD_SIZE") if "LOCAL_WORLD_SIZE" in env else _int(env, "WORLD_SIZE"),
                          "torchrun" if "TORCHELASTIC_RUN_ID" in env else "env", addr, port))
    if "SLURM_PROCID" in env and "SLURM_NTASKS" in env:
        if addr is None:
            addr = _slurm_first_host(env)
        if port is None:  # every task of a job derives the same port
            port = 20000 + _int(env, "SLURM_JOB_ID") % 20000 if "SLURM_JOB_ID" in env else 29500
        local_n = env.get("SLURM_NTASKS_PER_NODE", "").split("(")[0]
        return _checked(("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"), LaunchInfo(
            _int(env, "SLURM_PROCID"), _int(env, "SLURM_NTASKS"), _int(env, "SLURM_LOCALID") if "SLURM_LOCALID" in env else 0,
            int(local_n) if local_n.isdigit() else _int(env, "SLURM_NTASKS"), "slurm", addr, port))
    for rank_key, size_key, lrank_key, lsize_key in (
        ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"),
        ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
    ):
        if rank_key in env and size_key in env:
            size = _int(env, size_key)
            local = _int(env, lsize_key) if lsize_key in env else None
            note = None
            if (addr is None or port is None) and local == size:
                addr, port, note = _one_node_rendezvous(env, addr, port, size_key, lsize_key, size)
            if addr is None or port is None:
                raise UsageError("under mpirun on several nodes, set MASTER_ADDR and MASTER_PORT (e.g. mpirun -x "
                                 "MASTER_ADDR=node0 -x MASTER_PORT=29500 ...): ccltune joins through "
                                 "torch.distributed's TCP store")
            return _checked((rank_key, size_key, lrank_key, lsize_key), LaunchInfo(
                _int(env, rank_key), size, _int(env, lrank_key) if lrank_key in env else 0,
                local if local is not None else size, "mpirun", addr, port, note))
    return LaunchInfo(0, 1, 0, 1, "single", addr, port)


# What names one mpirun job, the same in every rank: Open MPI 5 (PRRTE), Open MPI 4 (ORTE), MPICH's Hydra
_JOB_KEYS = ("PMIX_NAMESPACE", "OMPI_MCA_orte_hnp_uri", "OMPI_MCA_ess_base_jobid", "PMI_KVSNAME")


def _one_node_rendezvous(env: dict[str, str], addr: str | None, port: int | None, size_key: str, lsize_key: str,
                         size: int) -> tuple[str, int, str]:
    """(address, port, why) when every rank of an mpirun job is on this node: 127.0.0.1 and a port in
    [20000, 40000) every rank derives alike from the job's name (else from their common parent, the
    launcher's daemon), as Slurm's job id gives one. What the user set is kept."""
    key = next((k for k in _JOB_KEYS if env.get(k)), None)
    seed, source = (env[key], key) if key else (str(os.getppid()), "the launcher's process id")
    derived = 20000 + zlib.crc32(seed.encode()) % 20000
    addr = addr or "127.0.0.1"
    port = port if port is not None else derived
    return addr, port, (f"{addr}:{port}: every rank is on this node ({lsize_key} = {size_key} = {size}), so "
                        f"MASTER_ADDR defaults to 127.0.0.1 and MASTER_PORT to a port derived from {source}")


def _checked(names: tuple[str, str, str, str], info: LaunchInfo) -> LaunchInfo:
    """``info`` when its numbers make a job: 0 <= rank < world size, 0 <= local rank < local world size
    (``names``: the launcher's variables for those four, as the error names them)."""
    rank, size, lrank, lsize = names
    if info.world_size < 1:
        raise UsageError(f"environment variable {size}={info.world_size} must be >= 1")
    if not 0 <= info.rank < info.world_size:
        raise UsageError(f"environment variable {rank}={info.rank} is not a rank of a job of "
                         f"{size}={info.world_size} (0 to {info.world_size - 1})")
    if info.local_world_size < 1 or not 0 <= info.local_rank < info.local_world_size:
        raise UsageError(f"environment variables {lrank}={info.local_rank} and {lsize}={info.local_world_size} "
                         "do not make a local rank (0 <= local rank < local size)")
    return info


def _slurm_first_host(env: dict[str, str]) -> str:
    nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
    if not nodelist:
        raise UsageError("under srun, SLURM_JOB_NODELIST is not set; set MASTER_ADDR to the first node")
    try:
        out = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True, timeout=10)
        if out.returncode == 0 and out.stdout.split():
            return out.stdout.split()[0]
    except (OSError, subprocess.SubprocessError):
        pass
    if "[" not in nodelist:
        return nodelist.split(",")[0]
    raise UsageError(f"cannot expand SLURM_JOB_NODELIST={nodelist!r} without scontrol; set MASTER_ADDR")


@dataclass
class DistContext:
    """A joined process group (host side, gloo) plus facts about the job."""

    info: LaunchInfo
    timeout_s: float
    hosts: list[str] = field(default_factory=list)
    dist: Any = None
    group: Any = None          # gloo group for host-side barriers and result exchange
    _gen: int = 0
    virtual_nodes: int = 0     # > 1: this host's ranks split into that many nodes for NCCL (NCCL_HOSTID)
    # nccl-tests' parallel groups (NCCL_TESTS_SPLIT, ``split``): this rank's color, the world ranks of its
    # group in order (None: every rank), its torch process group, and the smallest group's size
    color: int = 0
    members: tuple[int, ...] | None = None
    comm_group: Any = None
    smallest_group: int = 0

    @property
    def rank(self) -> int:
        return self.info.rank

    @property
    def world_size(self) -> int:
        return self.info.world_size

    @property
    def is_root(self) -> bool:
        return self.info.rank == 0

    @property
    def n_nodes(self) -> int:
        """Nodes as NCCL counts them: the hosts, or the simulated nodes of ``virtual_nodes``."""
        if self.virtual_nodes > 1:
            return self.virtual_nodes
        return len(set(self.hosts)) if self.hosts else self.info.n_nodes

    # -- the group this rank's collectives run in (the world unless split) -------------
    @property
    def comm_rank(self) -> int:
        """This rank's rank in its group (what the collectives' layouts and data use)."""
        return self.rank if self.members is None else self.members.index(self.rank)

    @property
    def comm_size(self) -> int:
        return self.world_size if self.members is None else len(self.members)

    @property
    def min_comm_size(self) -> int:
        """The smallest group's size, the same on every rank (for decisions every rank must share)."""
        return self.smallest_group or self.comm_size

    @property
    def comm_nodes(self) -> int:
        """The nodes this rank's group spans, as NCCL counts them (``n_nodes`` when not split)."""
        if self.members is None:
            return self.n_nodes
        if self.virtual_nodes > 1:
            return len({r * self.virtual_nodes // self.world_size for r in self.members})
        return len({self.host_of(r) for r in self.members})

    @property
    def calls(self) -> Any:
        """torch.distributed as this rank's group sees it (the module itself when not split)."""
        if self.members is None or self.dist is None:
            return self.dist
        return GroupCalls(self.dist, self.comm_group, self.members)

    def gather_bytes(self, data: bytes | None, what: str) -> list[bytes | None]:
        """Every rank's ``data``, in rank order (over the world, on the host)."""
        if self.world_size == 1:
            return [data]
        out: list[Any] = [None] * self.world_size
        self._guard(what, lambda: self.dist.all_gather_object(out, data, group=self.group))
        return out

    def host_of(self, rank: int) -> str:
        return self.hosts[rank] if rank < len(self.hosts) else "?"

    # -- host-side collectives, each bounded by the timeout -------------------------
    def barrier(self, what: str = "barrier") -> None:
        if self.world_size > 1:
            self._guard(what, lambda: self.dist.barrier(group=self.group))

    def allreduce_floats(self, values: list[float], op: str, what: str) -> list[float]:
        """Element-wise sum/min/max of a few floats across ranks (on the host)."""
        if self.world_size == 1:
            return list(values)
        import torch

        t = torch.tensor(values, dtype=torch.float64)
        red = {"sum": self.dist.ReduceOp.SUM, "min": self.dist.ReduceOp.MIN, "max": self.dist.ReduceOp.MAX}[op]
        self._guard(what, lambda: self.dist.all_reduce(t, op=red, group=self.group))
        return t.tolist()

    def broadcast_bytes(self, data: bytes | None, what: str) -> bytes:
        if self.world_size == 1:
            assert data is not None
            return data
        obj = [data]
        self._guard(what, lambda: self.dist.broadcast_object_list(obj, src=0, group=self.group))
        got = obj[0]
        assert got is not None, f"{what}: rank 0 broadcasts bytes"
        return got

    def _guard(self, what: str, fn: Any) -> Any:
        try:
            return fn()
        except (RuntimeError, ValueError) as exc:  # gloo: peer closed, or timed out
            raise self.peer_failure(what, str(exc)) from None

    def peer_failure(self, what: str, detail: str) -> DistError:
        """Find which ranks are gone (a roll call through the store) and say so."""
        missing = self.rollcall()
        me = f"rank {self.rank} on {self.host_of(self.rank)}"
        if missing:
            who = ", ".join(f"rank {r} on host {self.host_of(r)}" for r in missing)
            return DistError(f"{who} stopped answering (dead or hung) during {what}; "
                             f"{me} gives up after {self.timeout_s:g}s (--timeout). Detail: {detail.splitlines()[0] if detail else ''}")
        return DistError(f"{me}: {what} failed: {detail.splitlines()[0] if detail else 'unknown error'}")

    def rollcall(self) -> list[int]:
        """Ranks that do not check in within a short grace period; [] if the store is gone."""
        if self.world_size == 1 or self.dist is None:
            return []
        try:
            store = self.dist.distributed_c10d._get_default_store()
            self._gen += 1
            prefix = f"ccltune/rollcall/{self._gen}/"
            store.set(prefix + str(self.rank), self.host_of(self.rank))
            keys = [prefix + str(r) for r in range(self.world_size)]
            deadline = time.monotonic() + _ROLLCALL_GRACE_S
            while time.monotonic() < deadline:
                missing = [r for r, k in enumerate(keys) if not store.check([k])]
                if not missing:
                    return []
                time.sleep(0.1)
            return missing
        except Exception:  # noqa: BLE001 - the store may have died with rank 0
            return []

    def close(self, together: bool = True) -> None:
        """Leave: after a clean run together (no rank tears gloo down under another's feet); after an
        interrupt at once (the others may be gone or stopping)."""
        if self.dist is not None and self.dist.is_initialized():
            try:
                if together:
                    self.barrier("teardown")
                self.dist.destroy_process_group()
            except Exception:  # noqa: BLE001 - teardown after a failure
                pass


def split(ctx: DistContext, colors: tuple[int, ...]) -> None:
    """nccl-tests' MPI_Comm_split: ranks of one color (``colors[rank]``) form a group, in world order;
    each rank gets a torch process group of its own group (every rank creates every group, colors in
    ascending order, as torch.distributed requires). Before any engine: the engines run their
    collectives there (``ctx.calls``, the nccl engine's communicators)."""
    if len(colors) != ctx.world_size:
        raise UsageError(f"{len(colors)} colors for a job of {ctx.world_size} ranks")
    by_color = {c: tuple(r for r, k in enumerate(colors) if k == c) for c in sorted(set(colors))}
    ctx.color = colors[ctx.rank]
    if len(by_color) == 1:  # one group: the world, under its color
        return
    ctx.members = by_color[ctx.color]
    ctx.smallest_group = min(len(m) for m in by_color.values())
    for members in by_color.values():  # the default group's backends (the torch engine's: gloo and NCCL)
        pg = ctx._guard("creating the groups (NCCL_TESTS_SPLIT)", lambda m=members: ctx.dist.new_group(
            list(m), timeout=datetime.timedelta(seconds=ctx.timeout_s)))
        if ctx.rank in members:
            ctx.comm_group = pg


class GroupCalls:
    """torch.distributed as one group sees it: every collective runs on ``group``; roots and peers
    (``src``, ``dst``, a P2POp's peer) are given as group ranks and passed on as world ranks."""

    def __init__(self, dist: Any, group: Any, members: tuple[int, ...]):
        self._dist, self._group, self._members = dist, group, members

    def __getattr__(self, name: str) -> Any:
        fn = getattr(self._dist, name)
        if name == "P2POp":  # its op is torch's isend/irecv itself, which it checks by identity
            return lambda op, tensor, peer, **kw: fn(getattr(op, "torch_fn", op), tensor, self._members[peer],
                                                     group=self._group, **kw)
        sig = _signature(fn) if callable(fn) and not isinstance(fn, type) else None
        if sig is None or "group" not in sig.parameters:
            return fn

        def call(*args: Any, **kwargs: Any) -> Any:
            bound = sig.bind_partial(*args, **kwargs)
            for key in ("src", "dst"):
                if bound.arguments.get(key) is not None:
                    bound.arguments[key] = self._members[bound.arguments[key]]
            bound.arguments["group"] = self._group
            return fn(*bound.args, **bound.kwargs)
        call.torch_fn = fn  # type: ignore[attr-defined]
        return call


def _signature(fn: Any) -> Any:
    import inspect

    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


_JOINED: LaunchInfo | None = None  # what init read, before it set MASTER_ADDR/MASTER_PORT from it


def joined_info() -> LaunchInfo:
    """The launch this process joined (``init``), else what the environment says now. After ``init``
    the environment holds the address ccltune chose, so only this keeps how it was chosen
    (``LaunchInfo.rendezvous``)."""
    return _JOINED if _JOINED is not None else launch_info()


def init(timeout_s: float, *, with_nccl: bool = False, device: Any = None) -> DistContext:
    """Join the job: gloo on the host (and NCCL too for the torch engine)."""
    global _JOINED
    info = launch_info()
    _JOINED = info
    ctx = DistContext(info=info, timeout_s=timeout_s)
    if info.world_size == 1:
        ctx.hosts = [socket.gethostname()]
        return ctx
    if info.master_addr is None or info.master_port is None:
        raise UsageError("MASTER_ADDR/MASTER_PORT are not set: start ccltune with torchrun, srun or mpirun, "
                         "or use --nproc N")
    import torch.distributed as dist

    os.environ.setdefault("MASTER_ADDR", info.master_addr)
    os.environ.setdefault("MASTER_PORT", str(info.master_port))
    backend = "cpu:gloo,cuda:nccl" if with_nccl else "gloo"
    kwargs: dict[str, Any] = {}
    if with_nccl and device is not None:
        kwargs["device_id"] = device
    try:
        dist.init_process_group(backend=backend, init_method="env://", rank=info.rank,
                                world_size=info.world_size,
                                timeout=datetime.timedelta(seconds=timeout_s), **kwargs)
    except (RuntimeError, ValueError) as exc:
        raise DistError(f"rank {info.rank} on {socket.gethostname()} could not join the job at "
                        f"{info.master_addr}:{info.master_port} within {timeout_s:g}s: {str(exc).splitlines()[0]}") from None
    ctx.dist = dist
    ctx.group = dist.new_group(backend="gloo", timeout=datetime.timedelta(seconds=timeout_s)) if with_nccl else None
    hosts: list[Any] = [None] * info.world_size
    ctx._guard("host exchange", lambda: dist.all_gather_object(hosts, socket.gethostname(), group=ctx.group))
    ctx.hosts = [str(h) for h in hosts]
    return ctx


def lost_local_ranks(info: LaunchInfo) -> list[int]:
    """Under torchrun: the ranks of this node whose worker process is gone. torchrun stops
    the survivors with SIGTERM when one worker exits, so this tells a dead peer from a
    cancel. [] when it cannot be told (no /proc, not torchrun's child)."""
    if info.launcher != "torchrun":
        return []
    parent, alive = os.getppid(), set[int]()
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
                state, ppid = fh.read().rsplit(")", 1)[1].split()[:2]
            if int(ppid) != parent or state == "Z":
                continue
            with open(f"/proc/{pid}/environ", "rb") as fh:
                alive.update(int(kv[5:]) for kv in fh.read().split(b"\0") if kv.startswith(b"RANK="))
        except (OSError, ValueError):
            continue
    if info.rank not in alive:
        return []
    base = info.rank - info.local_rank
    return [r for r in range(base, base + info.local_world_size) if r not in alive]


def under_launcher() -> bool:
    return launch_info().launcher != "single"
