"""``ccltune sweep``'s options, a frozen dataclass beneath both front ends (the CLI's parser takes its
defaults from it; the API builds it from keywords; a job's workers get its ``to_argv``)."""

from __future__ import annotations

from dataclasses import dataclass

from ccltune import collectives, rules
from ccltune.commands.launching import LaunchOptions
from ccltune.commands.options import OmittedStr, option, to_argv

MODES = ("exhaustive", "model")
GRIDS = ("axes", "full")

DEFAULT_LOAD_M = 8192  # the matrix of --under-load when the job's times call for a load and nothing sizes it (issue 28)


@dataclass(frozen=True, kw_only=True)
class SweepOptions(LaunchOptions):
    """``ccltune sweep``'s options (``ccltune sweep --help``). ``datatype`` and ``op`` left out are
    ``OmittedStr``: with ``--workload`` each point is then swept in the job's own datatype and op."""

    collective: tuple[str, ...] = option(tuple(c.name for c in collectives.TUNABLE), positional=True,
                                         help=f"tunable collectives ({', '.join(c.name for c in collectives.TUNABLE)})")
    minbytes: str = option("8", flag="--minbytes", keyword="min_bytes", help="smallest size (whole buffer, as bench)")
    maxbytes: str = option("1G", flag="--maxbytes", keyword="max_bytes", help="largest size")
    stepfactor: float = option(2, flag="--stepfactor", keyword="step_factor", help="multiply the size by this")
    datatype: str = option(OmittedStr("float"), flag="--datatype",
                           help="datatype (with --workload, left out: each point in the job's own)")
    op: str = option(OmittedStr("sum"), flag="--op", help="reduction op (with --workload, left out: the job's own)")
    algos: str = option("tree,ring,pat", flag="--algos", comma=True,
                        help=f"algorithms to force, comma-separated ({', '.join(rules.ALGORITHMS)}; "
                             "NCCL_ALGO's spelling, CollNetDirect, is taken too)")
    protos: str = option("ll,ll128,simple", flag="--protos", comma=True,
                         help=f"protocols to force, comma-separated ({', '.join(rules.PROTOCOLS)})")
    channels: str = option("4,8,16,32", flag="--channels", comma=True,
                           help="channel counts to try with NCCL's algorithm/protocol, comma-separated ('' for none)")
    grid: str = option("full", flag="--grid", choices=GRIDS,
                       help="full: every algorithm x protocol x channel count, besides each pair with NCCL's channel "
                            "count and each count with NCCL's pair; axes: only those two (about a third of the points "
                            "and half the time; rules like ring/LL128 at 32 channels need the full grid)")
    reps: int = option(5, flag="--reps", help="timed rounds per point (noise is estimated from them)")
    target_us: float = option(1000.0, flag="--target-us", help="length of one timed replay")
    max_iters: int = option(100, flag="--max-iters", help="most calls in one replay")
    warmup_iters: int = option(2, flag="--warmup_iters", help="untimed replays before each configuration is timed")
    no_graph: bool = option(False, flag="--no-graph", help="time eager calls instead of CUDA graphs")
    mode: str = option("exhaustive", flag="--mode", choices=MODES,
                       help="exhaustive: every size x candidate; model: NCCL's default at every size, every candidate "
                            "at a few sizes, then candidates only where their alpha-beta lines predict a win "
                            "(docs/tuning.md)")
    no_twin: bool = option(False, flag="--no-twin",
                           help="do not measure NCCL's default a second time on another communicator (the A/A control "
                                "whose gap every candidate must beat; see docs/tuning.md)")
    workload: str | None = option(None, flag="--workload",
                                  help="sweep exactly this workload's (collective, size) points (`ccltune workload import`) that "
                                       "this launch can reproduce, instead of -b/-e/-f; the others are listed with the reason. "
                                       "Collectives named restrict it (docs/workload.md)")
    under_load: int | None = option(None, flag="--under-load",
                                    help="while collectives are timed, run an M x M bf16 matrix multiply back to back on a second "
                                         "stream of each rank's GPU, so configurations compete for SMs as in training (recorded "
                                         "with the run; `ccltune tune --under-load M` derives from such runs). Not on gloo")
    idle: bool = option(False, flag="--idle",
                        help="with --workload: sweep on an idle GPU even when the job's own times (profiler files, "
                             "trace kernels) show its calls at least 2x slower than NCCL's default idle in --db, where "
                             "the sweep otherwise runs under a load sized from the job's traces (--under-load "
                             f"{DEFAULT_LOAD_M} when nothing sizes it; docs/workload.md)")
    virtual_nodes: int = option(1, flag="--virtual-nodes",
                                help="SIMULATION AID: split this host's ranks into K groups NCCL treats as nodes (NCCL_HOSTID); "
                                     "rows and rules then carry nNodes=K; never real multi-node figures")
    resume: int | None = option(None, flag="--resume", help="continue an interrupted sweep run")

    def to_argv(self) -> list[str]:
        """The command line of these options (a job's workers parse it back with the CLI's parser)."""
        return to_argv(self, "sweep")
