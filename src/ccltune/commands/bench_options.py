"""nccl-tests' options of ``ccltune bench`` checked and mapped (the flags themselves, each with its
short and long spelling: ``ccltune.cli.bench_options``), and the environment variables nccl-tests
reads (NCCL_TESTS_SPLIT: ``ccltune.groups``). A value ccltune's engine cannot honour is refused naming
the engine; nothing is silently ignored.

Where a flag's meaning needs a mapping (``-g N``: N processes per node, since ccltune runs one
process per GPU), ``check`` returns the options mapped and a note row that the table prints."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ccltune import dist, engines, groups
from ccltune.commands.launching import BUFFERS, MAX_TIMEOUT_S, LaunchOptions, buffers_help
from ccltune.commands.options import OmittedInt, OmittedStr, option, to_argv
from ccltune.errors import UsageError
from ccltune.measure.bench import WARMUP_MODES
from ccltune.measure.point import AVERAGES

NCCL_TESTS_VERSION = "2.19.6"
_AVERAGE_CODES = {"0": "rank0", "1": "avg", "2": "min", "3": "max"}  # -a 0..3 (nccl-tests' codes)


def strtol(flag: str) -> Callable[[str], int]:
    """An integer as strtol(optarg, NULL, 0) reads it (0x.. and 0.. prefixes); a ValueError naming
    ``flag`` and the text otherwise."""
    def parse(text: str) -> int:
        try:
            octal = text.strip().lstrip("+-")[:1] == "0" and text.strip().lstrip("+-")[1:2].isdigit()
            return int(text, 8) if octal else int(text, 0)  # strtol base 0: '010' is 8
        except ValueError:
            raise ValueError(f"{flag}: {text!r} is not an integer") from None
    return parse


# The options whose default differs from nccl-tests 2.19.6's (src/common.cu: minBytes, maxBytes,
# stepFactor, warmup_iters): dest -> (flag, ccltune's default, nccl-tests'). ccltune's defaults visit
# a whole series; nccl-tests' one size, 32 MB.
NCCLT_DEFAULTS = {"minbytes": ("-b", OmittedStr("8"), "32M"), "maxbytes": ("-e", OmittedStr("32M"), "32M"),
                  "stepfactor": ("-f", OmittedInt(2), 1), "warmup_iters": ("-w", OmittedInt(5), 1)}
NCCLT_DEFAULTS_ENV = "CCLTUNE_NCCLT_DEFAULTS"


def ncclt_defaults(o: BenchOptions) -> tuple[BenchOptions, str | None]:
    """--ncclt-defaults (or CCLTUNE_NCCLT_DEFAULTS=1): every option of NCCLT_DEFAULTS the command line
    omitted takes nccl-tests' default, so a command line taken from nccl-tests runs the sizes nccl-tests
    runs. Returns the options so mapped and the note row (None when off)."""
    env = os.environ.get(NCCLT_DEFAULTS_ENV, "").strip()
    if env not in ("", "0", "1"):
        raise UsageError(f"{NCCLT_DEFAULTS_ENV} must be 1 (on) or 0 (off), got {env!r}")
    if not (o.ncclt_defaults or env == "1"):
        return o, None
    theirs: dict[str, Any] = {dest: value for dest, (_, _, value) in NCCLT_DEFAULTS.items()
              if isinstance(getattr(o, dest), (OmittedStr, OmittedInt))}
    taken = [f"{NCCLT_DEFAULTS[dest][0]} {value}" for dest, value in theirs.items()]
    return (dataclasses.replace(o, **theirs),
            "nccl-tests' defaults: " + (", ".join(taken) if taken else "none needed (every such flag given)"))


NO_TIMEOUT_S = MAX_TIMEOUT_S  # -T 0: nccl-tests' "no timeout"; a process group needs a finite one


def minus_t(text: str) -> float:
    """-T: whole seconds as strtol reads them; 0 is nccl-tests' "no timeout"; at most a year."""
    seconds = strtol("-T/--timeout")(text)
    if not 0 <= seconds <= MAX_TIMEOUT_S:
        raise ValueError(f"-T/--timeout: must be >= 0 and at most {MAX_TIMEOUT_S:.0f} seconds (a year; 0: no "
                         f"limit), got {text!r}")
    return float(seconds) if seconds else NO_TIMEOUT_S


_THEIRS = " (nccl-tests: %s, --ncclt-defaults)"  # the help of a flag whose default differs from nccl-tests'


def _n(flag: str, default: Any, *, keyword: str | None = None, choices: Any = None, help: str | None = None) -> Any:  # noqa: A002
    """An nccl-tests integer option: read as strtol reads it."""
    short, long = flag.split("/")
    return option(default, flag=long, keyword=keyword, parse=strtol(flag), choices=choices, help=help)


@dataclass(frozen=True, kw_only=True)
class BenchOptions(LaunchOptions):
    """``ccltune bench``'s options: the collectives, nccl-tests 2.19.6's options (same names as its long
    flags; ``ccltune bench --help`` says what each means), ccltune's own, and the launch options. The
    sizes are text as ``-b`` takes them (K/M/G suffixes)."""

    collective: tuple[str, ...] = option(positional=True, help="collective(s), comma or space separated, or 'all'")
    nthreads: int | None = _n("-t/--nthreads", None,
                              help="threads per process; ccltune runs one process per GPU: -t N x -g M = N*M processes per node")
    ngpus: int | None = _n("-g/--ngpus", None, help="GPUs per thread (as -t)")
    minbytes: str = option(NCCLT_DEFAULTS["minbytes"][1], flag="--minbytes", keyword="min_bytes",
                           help="smallest size (K/M/G suffixes, fractions allowed: 1.5M)" + _THEIRS % NCCLT_DEFAULTS["minbytes"][2])
    maxbytes: str = option(NCCLT_DEFAULTS["maxbytes"][1], flag="--maxbytes", keyword="max_bytes", help="largest size")
    stepbytes: str = option("1M", flag="--stepbytes", keyword="step_bytes",
                            help="add this many bytes when -f is 0 or 1 (a series holds at most 10000 sizes)")
    stepfactor: int = _n("-f/--stepfactor", NCCLT_DEFAULTS["stepfactor"][1], keyword="step_factor",
                         help="multiply the size by this (>= 2); 0 or 1: step by -i" + _THEIRS % NCCLT_DEFAULTS["stepfactor"][2])
    iters: int = _n("-n/--iters", 20, help="timed calls per size")
    agg_iters: int = _n("-m/--agg_iters", 1, help="calls aggregated per timed iteration")
    warmup_iters: int = _n("-w/--warmup_iters", NCCLT_DEFAULTS["warmup_iters"][1],
                           help="untimed calls right before each size is timed (and with the series warm-up modes, also at "
                                "every size before the first is timed)" + _THEIRS % NCCLT_DEFAULTS["warmup_iters"][2])
    run_cycles: int = _n("-N/--run_cycles", 1,
                         help="run and print the size loop this many times (rows again, one header and footer); 0: until "
                              "interrupted (Ctrl-C keeps every row)")
    parallel_init: int = _n("-p/--parallel_init", 0, choices=(0, 1),
                            help="communicators created concurrently (ccltune's processes always do)")
    check: int = _n("-c/--check", 1,
                    help="check results N times after each size's timed calls, up to the first wrong (0: off)")
    op: str = option("sum", flag="--op", help="sum, prod, max, min, avg, mulsum, or all")
    datatype: str = option("float", flag="--datatype",
                           help="int8, uint8, int32, uint32, int64, uint64, half, float, double, bfloat16, f8e4m3, f8e5m2, or all")
    root: str = option("0", flag="--root", help="root rank of broadcast, reduce, gather, scatter, or all")
    blocking: int = _n("-z/--blocking", 0, choices=(0, 1, 2, 3),
                       help="0: no wait between calls; 1, 2, 3: nccl-tests' blocking modes")
    stream_null: int = _n("-y/--stream_null", 0, choices=(0, 1), help="1: launch on the NULL stream")
    cudagraph: int = _n("-G/--cudagraph", 0,
                        help="capture the timed calls in a CUDA graph and launch it N times (0: eager). Its first launch, which "
                             "uploads it, is timed only with --warmup-mode nccl-tests, as nccl-tests times it")
    report_cputime: int = _n("-C/--report_cputime", 0, choices=(0, 1), help="1: report CPU time instead of GPU time")
    report_timestamps: int = _n("-S/--report_timestamps", 0, choices=(0, 1), help="1: end each row with a timestamp")
    output_file: str | None = option(None, flag="--output_file", help="also write nccl-tests' JSON (schema version 3)")
    average: str = option("avg", flag="--average", help="how per-rank times are combined: 0/rank0, 1/avg, 2/min, 3/max")
    local_register: int = _n("-R/--local_register", 0, choices=(0, 1, 2),
                             help="0: no registration; 1: local; 2: symmetric windows (NCCL >= 2.27)")
    cta_policy: int | None = _n("-x/--cta_policy", None, help="NCCL CTA policy 0, 1, 2")
    device_implementation: int = _n("-D/--device_implementation", 0, help="device-API implementation (0: NCCL's)")
    device_cta_count: int = _n("-V/--device_cta_count", 16, help="CTAs for -D")
    memory: int = _n("-M/--memory", 0, choices=(0, 1), help="1: report GPU memory usage")
    unalign: int = _n("-u/--unalign", 0, help="misalign buffers by this many elements")
    per_iter_timing: int = _n("-I/--per_iter_timing", 0, choices=(0, 1), help="1: per-iteration min/max/p99/cv columns")
    per_iter_skip: int = _n("-K/--per_iter_skip", 0, help="samples -I leaves out")
    ncclt_defaults: bool = option(False, flag="--ncclt-defaults",
                                  help="nccl-tests' defaults for the nccl-tests options the command line omits (-b 32M -e 32M "
                                       f"-f 1 -w 1; also {NCCLT_DEFAULTS_ENV}=1)")
    warmup_mode: str = option("point", flag="--warmup-mode", choices=WARMUP_MODES,
                              help="point: -w calls right before each size is timed; series: also -w calls at every size "
                                   "first, as nccl-tests 2.19; nccl-tests: nccl-tests' own procedure (docs/bench.md, 'Warm-up')")
    symmetric: bool = option(False, flag="--symmetric",
                             help="nccl engine: buffers from ncclMemAlloc registered as symmetric windows (NCCL >= 2.27)")
    algo: str | None = option(None, flag="--algo", help="nccl engine: force NCCL_ALGO for this run's communicator")
    proto: str | None = option(None, flag="--proto", help="nccl engine: force NCCL_PROTO for this run's communicator")
    channels: int | None = option(None, flag="--channels", help="nccl engine: channel count (min/maxCTAs)")
    json: str | None = option(None, flag="--json", help="write {env, records} as JSON")
    # LaunchOptions' field, with bench's default named (nccl-tests' layout: one pair of the largest size)
    buffers: str | None = option(None, flag="--buffers", choices=BUFFERS, help=buffers_help("ncclmem-max"))

    def to_argv(self) -> list[str]:
        """The command line of these options (a job's workers parse it back with the CLI's parser)."""
        return to_argv(self, "bench")


def average(text: str) -> str:
    """-a: nccl-tests' code (0..3) or ccltune's word."""
    word = _AVERAGE_CODES.get(text.strip(), text.strip().lower())
    if word not in AVERAGES:
        raise UsageError(f"-a/--average must be 0..3 or one of {', '.join(AVERAGES)}, got {text!r}")
    return word


def _refuse(flag: str, value: Any, engine: str, why: str) -> UsageError:
    return UsageError(f"{flag} {value}: the {engine} engine {why}")


# The ability each flag needs (a value other than its default); why an engine lacks one is the engine registry's
_NEEDS = {
    "-m/--agg_iters": engines.GROUP_CALLS,
    "-y/--stream_null": engines.CUDA_STREAM,
    "-M/--memory": engines.GPU_MEMORY,
    "-x/--cta_policy": engines.CTA_POLICY,
    "-R/--local_register": engines.REGISTRATION,
    "NCCL_TESTS_DEVICE": engines.DEVICE_CHOICE,
}
DEVICE_API = ("runs nccl-tests' own CUDA kernels written against NCCL's device API (ncclDevComm, NCCL >= 2.28, "
              "compiled into nccl-tests); ccltune issues NCCL's host API only, so it cannot run them (-D 0 does)")


def _can(flag: str, value: Any, engine: str) -> None:
    why = engines.kind(engine).lacks.get(_NEEDS[flag])
    if why:
        raise _refuse(flag, value, engine, why)


def check(o: BenchOptions, engine: str) -> tuple[BenchOptions, list[str]]:
    """Refuse what ``engine`` cannot honour, map what needs mapping (-t/-g to processes per node,
    -R 2 to --symmetric, -z 3 and -I under -G off); return the options so mapped and the note rows."""
    notes: list[str] = []
    if o.nthreads is not None or o.ngpus is not None:
        o, note = _threads_gpus(o)
        notes.append(note)
    o, more = _schedule(o, engine)
    notes += more
    for flag, value, off in (("-y/--stream_null", o.stream_null, 0), ("-M/--memory", o.memory, 0),
                             ("-x/--cta_policy", o.cta_policy, None), ("-R/--local_register", o.local_register, 0)):
        if flag == "-R/--local_register" and value == 2:
            continue  # symmetric windows: below
        if value != off:
            _can(flag, value, engine)
    if o.unalign < 0:
        raise UsageError(f"-u/--unalign must be >= 0 elements, got {o.unalign}")
    if o.cta_policy is not None and o.cta_policy not in (0, 1, 2):
        raise UsageError(f"-x/--cta_policy must be 0 (default), 1 (efficiency) or 2 (zero), got {o.cta_policy}")
    if o.device_implementation:
        raise _refuse("-D/--device_implementation", o.device_implementation, engine, DEVICE_API)
    if o.local_register == 2:
        if not engines.kind(engine).own_comm:
            raise _refuse("-R/--local_register", 2, engine, "has no symmetric windows (use --engine nccl)")
        o = dataclasses.replace(o, symmetric=True)
    if o.run_cycles < 0:  # nccl-tests' do {} while (--repeat): 0 runs until stopped, as here
        raise UsageError(f"-N/--run_cycles must be >= 0 (0: until interrupted), got {o.run_cycles}")
    if o.run_cycles == 0:
        notes.append("-N 0: the size loop runs until interrupted (Ctrl-C keeps every row)")
    if o.timeout == NO_TIMEOUT_S:
        notes.append("-T 0: no time limit, as nccl-tests (a hung rank is waited for up to a year)")
    if o.check < 0:
        raise UsageError(f"-c/--check must be >= 0, got {o.check}")
    if o.output_file is not None and not json_suffix(o.output_file):
        raise UsageError(f"-J/--output_file {o.output_file!r}: nccl-tests infers the output's type from the suffix "
                         "and writes only JSON (it would write nothing here): name a FILE ending in .json")
    if o.parallel_init:
        notes.append("-p 1: each process creates its own communicator, concurrently")
    groups.from_env()  # a bad NCCL_TESTS_SPLIT(_MASK) fails here, naming the variable
    device = os.environ.get("NCCL_TESTS_DEVICE")
    if device:
        _can("NCCL_TESTS_DEVICE", device, engine)
        if not device.strip().isdigit():
            raise UsageError(f"NCCL_TESTS_DEVICE must be a GPU index (>= 0), got {device!r}")
        notes.append(f"NCCL_TESTS_DEVICE={device.strip()}: local process i uses GPU {device.strip()} + i")
    return o, notes


def _threads_gpus(o: BenchOptions) -> tuple[BenchOptions, str]:
    """-t N -g M: N*M processes per node (``nproc``), said in a note row; the header then says
    nThread 1 nGpus 1, each process's shape, so that its rank lines add up. Under a launcher, which
    has already started the processes, t*g > 1 must be its processes per node."""
    t, g = o.nthreads or 1, o.ngpus or 1
    if t < 1 or g < 1:
        raise UsageError(f"-t/--nthreads and -g/--ngpus must be >= 1, got -t {t} -g {g}")
    if o.nproc is not None and o.nproc != t * g:
        raise UsageError(f"-t {t} -g {g} means {t * g} processes per node, but --nproc is {o.nproc}")
    info = dist.launch_info()
    if info.launcher == "single":
        if o.nproc is None and t * g > 1:
            o = dataclasses.replace(o, nproc=t * g)
    elif t * g > 1 and t * g != info.local_world_size:
        raise UsageError(f"-t {t} -g {g} means {t * g} processes per node, but the {info.launcher} launcher "
                         f"started {info.local_world_size} on this node")
    if info.launcher == "single" or os.environ.get("CCLTUNE_COMMAND"):  # ccltune starts (or started) them
        return o, (f"-t {t} -g {g}: {t * g} process{'es' if t * g > 1 else ''} per node, one GPU each"
                   " (ccltune runs one process per GPU)")
    return o, (f"-t {t} -g {g}: one GPU per process; the {info.launcher} launcher started {info.local_world_size}"
               " per node")


def json_suffix(path: str) -> bool:
    """Whether -J's FILE ends in '.json' (any case) after its last '/', as nccl-tests' classifyOutputFile
    infers the output's type (it writes nothing for any other suffix)."""
    name = path.rsplit("/", 1)[-1]
    return "." in name and name.rsplit(".", 1)[1].lower() == "json"


def free_path(path: str) -> str:
    """Where -J writes: FILE, or when it exists FILE.0, FILE.1, ... (the first that does not), as
    nccl-tests' jsonOutputInit probes with fopen(..., "wx") and never replaces a file."""
    candidate, n = path, 0
    while os.path.lexists(candidate):
        candidate, n = f"{path}.{n}", n + 1
    return candidate


def _schedule(o: BenchOptions, engine: str) -> tuple[BenchOptions, list[str]]:
    """-m, -z, -y, -I, -K: refused where they cannot mean anything; -z 3 and -I under -G disabled
    with a note, as nccl-tests disables them."""
    notes = []
    if o.agg_iters < 1:
        raise UsageError(f"-m/--agg_iters must be >= 1, got {o.agg_iters}")
    if o.agg_iters > 1:
        _can("-m/--agg_iters", o.agg_iters, engine)
    graph = o.cudagraph and engines.kind(engine).gpu
    if graph and o.blocking == 3:
        notes.append("-z 3 disabled: blocking mode 3 is incompatible with CUDA graph mode (-G), as nccl-tests says")
        o = dataclasses.replace(o, blocking=0)
    if graph and o.blocking:
        raise UsageError(f"-z {o.blocking} with -G {o.cudagraph}: a stream being captured in a CUDA graph "
                         "cannot be waited for")
    if graph and o.stream_null:
        raise UsageError(f"-y 1 with -G {o.cudagraph}: CUDA cannot capture the legacy NULL stream")
    if graph and o.per_iter_timing:
        notes.append("-I 1 disabled: per-iteration timing is incompatible with CUDA graph mode (-G), as "
                     "nccl-tests says")
        o = dataclasses.replace(o, per_iter_timing=0, per_iter_skip=0)
    if o.per_iter_skip and not o.per_iter_timing:
        raise UsageError(f"-K/--per_iter_skip {o.per_iter_skip} needs -I 1 (per-iteration timing)")
    if not 0 <= o.per_iter_skip < o.iters:
        raise UsageError(f"-K/--per_iter_skip must be between 0 and -n - 1 ({o.iters - 1}), got {o.per_iter_skip}")
    return o, notes


def split(o: BenchOptions, nranks: int) -> tuple[groups.Split | None, int, str | None]:
    """NCCL_TESTS_SPLIT / NCCL_TESTS_SPLIT_MASK over a job of ``nranks``: (the split, ranks per nccl-tests
    process (-t x -g), the note row), or (None, 1, None) when there is none. A -r root must be a rank of
    every group (checked by the caller against ``groups_of(...).smallest``)."""
    how = groups.from_env()
    if how is None:
        return None, 1, None
    per = (o.nthreads or 1) * (o.ngpus or 1)
    job = groups.groups_of(how, nranks, per)
    return how, per, (f"{how}: {job.describe()}; each group runs on its own communicator, times are averaged "
                      "over every rank and bandwidths are per group, as nccl-tests reports them")


def min_bw() -> float | None:
    """NCCL_TESTS_MIN_BW as nccl-tests reads it (atof); None when unset."""
    text = os.environ.get("NCCL_TESTS_MIN_BW")
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        raise UsageError(f"NCCL_TESTS_MIN_BW must be a number of GB/s, got {text!r}") from None


def root(text: str) -> int | None:
    """-r: a rank, or 'all' (None: every rank in turn, as nccl-tests' -r all)."""
    if str(text).strip().lower() == "all":
        return None
    try:
        value = int(str(text), 0)
    except ValueError:
        raise UsageError(f"-r/--root must be a rank, got {text!r}") from None
    if value < 0:
        raise UsageError(f"-r/--root must be >= 0, got {value}")
    return value
