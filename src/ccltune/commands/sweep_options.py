"""``ccltune sweep``'s options, a frozen dataclass beneath both front ends (the CLI's parser takes its
defaults from it; the API builds it from keywords; a job's workers get its ``to_argv``)."""

from __future__ import annotations

from dataclasses import dataclass

from ccltune import collectives
from ccltune.commands.launching import LaunchOptions
from ccltune.commands.options import OmittedStr, option, to_argv

MODES = ("exhaustive", "model")
GRIDS = ("axes", "full")


@dataclass(frozen=True, kw_only=True)
class SweepOptions(LaunchOptions):
    """``ccltune sweep``'s options (``ccltune sweep --help``). ``datatype`` and ``op`` left out are
    ``OmittedStr``: with ``--workload`` each point is then swept in the job's own datatype and op."""

    collective: tuple[str, ...] = option(tuple(c.name for c in collectives.TUNABLE), positional=True)
    minbytes: str = option("8", flag="--minbytes", keyword="min_bytes")
    maxbytes: str = option("1G", flag="--maxbytes", keyword="max_bytes")
    stepfactor: float = option(2, flag="--stepfactor", keyword="step_factor")
    datatype: str = option(OmittedStr("float"), flag="--datatype")
    op: str = option(OmittedStr("sum"), flag="--op")
    algos: str = option("tree,ring,pat", flag="--algos", comma=True)
    protos: str = option("ll,ll128,simple", flag="--protos", comma=True)
    channels: str = option("4,8,16,32", flag="--channels", comma=True)
    grid: str = option("full", flag="--grid", choices=GRIDS)
    reps: int = option(5, flag="--reps")
    target_us: float = option(1000.0, flag="--target-us")
    max_iters: int = option(100, flag="--max-iters")
    warmup_iters: int = option(2, flag="--warmup_iters")
    no_graph: bool = option(False, flag="--no-graph")
    mode: str = option("exhaustive", flag="--mode", choices=MODES)
    no_twin: bool = option(False, flag="--no-twin")
    workload: str | None = option(None, flag="--workload")
    under_load: int | None = option(None, flag="--under-load")
    idle: bool = option(False, flag="--idle")
    virtual_nodes: int = option(1, flag="--virtual-nodes")
    resume: int | None = option(None, flag="--resume")

    def to_argv(self) -> list[str]:
        """The command line of these options (a job's workers parse it back with the CLI's parser)."""
        return to_argv(self, "sweep")
