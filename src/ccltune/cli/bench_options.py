"""nccl-tests' command line for ``ccltune bench``: the option table of nccl-tests 2.19.6
(src/common.cu, getopt_long options), each flag with its short and long spelling and its meaning,
and the environment variables nccl-tests reads (NCCL_TESTS_SPLIT: ``ccltune.groups``). A value ccltune's engine cannot honour is refused
naming the engine; nothing is silently ignored.

Where a flag's meaning needs a mapping (``-g N``: N processes per node, since ccltune runs one
process per GPU), ``check`` returns a note row that the table prints."""

from __future__ import annotations

import argparse
import os
from typing import Any

from ccltune import dist, engines, groups
from ccltune.errors import UsageError
from ccltune.measure.point import AVERAGES

NCCL_TESTS_VERSION = "2.19.6"
_AVERAGE_CODES = {"0": "rank0", "1": "avg", "2": "min", "3": "max"}  # -a 0..3 (nccl-tests' codes)


def _int(flag: str):
    """An integer as strtol(optarg, NULL, 0) reads it (0x.. and 0.. prefixes), named in errors."""
    def parse(text: str) -> int:
        try:
            octal = text.strip().lstrip("+-")[:1] == "0" and text.strip().lstrip("+-")[1:2].isdigit()
            return int(text, 8) if octal else int(text, 0)  # strtol base 0: '010' is 8
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag}: {text!r} is not an integer") from None
    return parse


class _Str(str):
    """A string default argparse kept: the flag was omitted (``ncclt_defaults`` may replace it)."""


class _Int(int):
    """An integer default argparse kept: the flag was omitted."""


# The options whose default differs from nccl-tests 2.19.6's (src/common.cu: minBytes, maxBytes,
# stepFactor, warmup_iters): dest -> (flag, ccltune's default, nccl-tests'). ccltune's defaults visit
# a whole series; nccl-tests' one size, 32 MB.
NCCLT_DEFAULTS = {"minbytes": ("-b", _Str("8"), "32M"), "maxbytes": ("-e", _Str("32M"), "32M"),
                  "stepfactor": ("-f", _Int(2), 1), "warmup_iters": ("-w", _Int(5), 1)}
NCCLT_DEFAULTS_ENV = "CCLTUNE_NCCLT_DEFAULTS"


def ncclt_defaults(args: argparse.Namespace) -> str | None:
    """--ncclt-defaults (or CCLTUNE_NCCLT_DEFAULTS=1): every option of NCCLT_DEFAULTS the command line
    omitted takes nccl-tests' default, so a command line taken from nccl-tests runs the sizes nccl-tests
    runs. Returns the note row (None when off)."""
    env = os.environ.get(NCCLT_DEFAULTS_ENV, "").strip()
    if env not in ("", "0", "1"):
        raise UsageError(f"{NCCLT_DEFAULTS_ENV} must be 1 (on) or 0 (off), got {env!r}")
    if not (getattr(args, "ncclt_defaults", False) or env == "1"):
        return None
    taken = []
    for dest, (flag, _, theirs) in NCCLT_DEFAULTS.items():
        if isinstance(getattr(args, dest), (_Str, _Int)):
            setattr(args, dest, theirs)
            taken.append(f"{flag} {theirs}")
    return "nccl-tests' defaults: " + (", ".join(taken) if taken else "none needed (every such flag given)")


NO_TIMEOUT_S = 365 * 24 * 3600.0  # -T 0: nccl-tests' "no timeout"; a process group needs a finite one


def _timeout(text: str) -> float:
    """-T: whole seconds as strtol reads them; 0 is nccl-tests' "no timeout"."""
    seconds = _int("-T/--timeout")(text)
    if seconds < 0:
        raise argparse.ArgumentTypeError(f"-T/--timeout: must be >= 0 seconds (0: no limit), got {text!r}")
    return float(seconds) if seconds else NO_TIMEOUT_S


# What --help leaves to docs/bench.md: the defaults that differ, -J's environment, NCCL_TESTS_SPLIT, what each
# engine honours. That text had made bench --help 193 lines (issue 32).
EPILOG = (f"nccl-tests {NCCL_TESTS_VERSION} compatibility: ccltune's -b, -f and -w defaults differ "
          f"(--ncclt-defaults or {NCCLT_DEFAULTS_ENV}=1 takes nccl-tests'); -J, NCCL_TESTS_SPLIT, NCCL_TESTS_MIN_BW, "
          "NCCL_TESTS_DEVICE and the flags each engine honours or refuses: docs/bench.md.")


def register(p: argparse.ArgumentParser) -> None:
    """Every nccl-tests 2.19.6 option, with nccl-tests' defaults where ccltune's do not differ."""
    p.epilog = EPILOG
    g = p.add_argument_group(f"nccl-tests {NCCL_TESTS_VERSION} options (same spellings and meanings)")
    a = g.add_argument
    a("-t", "--nthreads", type=_int("-t/--nthreads"), default=None, metavar="N",
      help="threads per process; ccltune runs one process per GPU: -t N x -g M = N*M processes per node")
    a("-g", "--ngpus", type=_int("-g/--ngpus"), default=None, metavar="N", help="GPUs per thread (as -t)")
    theirs = " (nccl-tests: %s, --ncclt-defaults)"
    a("-b", "--minbytes", default=NCCLT_DEFAULTS["minbytes"][1],
      help="smallest size (K/M/G suffixes, fractions allowed: 1.5M)" + theirs % NCCLT_DEFAULTS["minbytes"][2])
    a("-e", "--maxbytes", default=NCCLT_DEFAULTS["maxbytes"][1], help="largest size")
    a("-i", "--stepbytes", default="1M", help="add this many bytes when -f is 0 or 1 (a series holds at most 10000 sizes)")
    a("-f", "--stepfactor", type=_int("-f/--stepfactor"), default=NCCLT_DEFAULTS["stepfactor"][1],
      help="multiply the size by this (>= 2); 0 or 1: step by -i" + theirs % NCCLT_DEFAULTS["stepfactor"][2])
    a("-n", "--iters", type=_int("-n/--iters"), default=20, help="timed calls per size")
    a("-m", "--agg_iters", type=_int("-m/--agg_iters"), default=1, help="calls aggregated per timed iteration")
    a("-w", "--warmup_iters", type=_int("-w/--warmup_iters"), default=NCCLT_DEFAULTS["warmup_iters"][1],
      help="untimed calls right before each size is timed (and with the series warm-up modes, also at "
           "every size before the first is timed)" + theirs % NCCLT_DEFAULTS["warmup_iters"][2])
    a("-N", "--run_cycles", type=_int("-N/--run_cycles"), default=1,
      help="run and print the size loop this many times (rows again, one header and footer); 0: until "
           "interrupted (Ctrl-C keeps every row)")
    a("-p", "--parallel_init", type=_int("-p/--parallel_init"), default=0, choices=(0, 1),
      help="communicators created concurrently (ccltune's processes always do)")
    a("-c", "--check", type=_int("-c/--check"), default=1,
      help="check results N times after each size's timed calls, up to the first wrong (0: off)")
    a("-o", "--op", default="sum", help="sum, prod, max, min, avg, mulsum, or all")
    a("-d", "--datatype", default="float",
      help="int8, uint8, int32, uint32, int64, uint64, half, float, double, bfloat16, f8e4m3, f8e5m2, or all")
    a("-r", "--root", default="0", help="root rank of broadcast, reduce, gather, scatter, or all")
    a("-z", "--blocking", type=_int("-z/--blocking"), default=0, choices=(0, 1, 2, 3),
      help="0: no wait between calls; 1, 2, 3: nccl-tests' blocking modes")
    a("-y", "--stream_null", type=_int("-y/--stream_null"), default=0, choices=(0, 1),
      help="1: launch on the NULL stream")
    a("-T", dest="timeout", type=_timeout, default=argparse.SUPPRESS, metavar="S",
      help="as --timeout: seconds before a stuck collective or a dead peer fails the run; 0: no limit, as "
           "nccl-tests (ccltune then waits up to a year)")
    a("-G", "--cudagraph", type=_int("-G/--cudagraph"), default=0, metavar="N",
      help="capture the timed calls in a CUDA graph and launch it N times (0: eager). Its first launch, which "
           "uploads it, is timed only with --warmup-mode nccl-tests, as nccl-tests times it")
    a("-C", "--report_cputime", type=_int("-C/--report_cputime"), default=0, choices=(0, 1),
      help="1: report CPU time instead of GPU time")
    a("-S", "--report_timestamps", type=_int("-S/--report_timestamps"), default=0, choices=(0, 1),
      help="1: end each row with a timestamp")
    a("-J", "--output_file", default=None, metavar="FILE", help="also write nccl-tests' JSON (schema version 3)")
    a("-a", "--average", default="avg",
      help="how per-rank times are combined: 0/rank0, 1/avg, 2/min, 3/max")
    a("-R", "--local_register", type=_int("-R/--local_register"), default=0, choices=(0, 1, 2),
      help="0: no registration; 1: local; 2: symmetric windows (NCCL >= 2.27)")
    a("-x", "--cta_policy", type=_int("-x/--cta_policy"), default=None, help="NCCL CTA policy 0, 1, 2")
    a("-D", "--device_implementation", type=_int("-D/--device_implementation"), default=0,
      help="device-API implementation (0: NCCL's)")
    a("-V", "--device_cta_count", type=_int("-V/--device_cta_count"), default=16, help="CTAs for -D")
    a("-M", "--memory", type=_int("-M/--memory"), default=0, choices=(0, 1), help="1: report GPU memory usage")
    a("-u", "--unalign", type=_int("-u/--unalign"), default=0, help="misalign buffers by this many elements")
    a("-I", "--per_iter_timing", type=_int("-I/--per_iter_timing"), default=0, choices=(0, 1),
      help="1: per-iteration min/max/p99/cv columns")
    a("-K", "--per_iter_skip", type=_int("-K/--per_iter_skip"), default=0, help="samples -I leaves out")


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


def check(args: argparse.Namespace, engine: str) -> list[str]:
    """Refuse what ``engine`` cannot honour, map what needs mapping (-t/-g to processes per node,
    -R 2 to --symmetric, -T to the timeout); return the note rows. ``args`` is updated in place."""
    notes: list[str] = []
    if args.nthreads is not None or args.ngpus is not None:
        notes.append(_threads_gpus(args))
    notes += _schedule(args, engine)
    for flag, value, off in (("-y/--stream_null", args.stream_null, 0), ("-M/--memory", args.memory, 0),
                             ("-x/--cta_policy", args.cta_policy, None), ("-R/--local_register", args.local_register, 0)):
        if flag == "-R/--local_register" and value == 2:
            continue  # symmetric windows: below
        if value != off:
            _can(flag, value, engine)
    if args.unalign < 0:
        raise UsageError(f"-u/--unalign must be >= 0 elements, got {args.unalign}")
    if args.cta_policy is not None and args.cta_policy not in (0, 1, 2):
        raise UsageError(f"-x/--cta_policy must be 0 (default), 1 (efficiency) or 2 (zero), got {args.cta_policy}")
    if args.device_implementation:
        raise _refuse("-D/--device_implementation", args.device_implementation, engine, DEVICE_API)
    if args.local_register == 2:
        if not engines.kind(engine).own_comm:
            raise _refuse("-R/--local_register", 2, engine, "has no symmetric windows (use --engine nccl)")
        args.symmetric = True
    if args.run_cycles < 0:  # nccl-tests' do {} while (--repeat): 0 runs until stopped, as here
        raise UsageError(f"-N/--run_cycles must be >= 0 (0: until interrupted), got {args.run_cycles}")
    if args.run_cycles == 0:
        notes.append("-N 0: the size loop runs until interrupted (Ctrl-C keeps every row)")
    if args.timeout == NO_TIMEOUT_S:
        notes.append("-T 0: no time limit, as nccl-tests (a hung rank is waited for up to a year)")
    if args.check < 0:
        raise UsageError(f"-c/--check must be >= 0, got {args.check}")
    if args.output_file is not None and not json_suffix(args.output_file):
        raise UsageError(f"-J/--output_file {args.output_file!r}: nccl-tests infers the output's type from the suffix "
                         "and writes only JSON (it would write nothing here): name a FILE ending in .json")
    if args.parallel_init:
        notes.append("-p 1: each process creates its own communicator, concurrently")
    groups.from_env()  # a bad NCCL_TESTS_SPLIT(_MASK) fails here, naming the variable
    device = os.environ.get("NCCL_TESTS_DEVICE")
    if device:
        _can("NCCL_TESTS_DEVICE", device, engine)
        if not device.strip().isdigit():
            raise UsageError(f"NCCL_TESTS_DEVICE must be a GPU index (>= 0), got {device!r}")
        notes.append(f"NCCL_TESTS_DEVICE={device.strip()}: local process i uses GPU {device.strip()} + i")
    return notes


def _threads_gpus(args: argparse.Namespace) -> str:
    """-t N -g M: N*M processes per node (``args.nproc``), said in a note row; the header then says
    nThread 1 nGpus 1, each process's shape, so that its rank lines add up. Under a launcher, which
    has already started the processes, t*g > 1 must be its processes per node."""
    t, g = args.nthreads or 1, args.ngpus or 1
    if t < 1 or g < 1:
        raise UsageError(f"-t/--nthreads and -g/--ngpus must be >= 1, got -t {t} -g {g}")
    if args.nproc is not None and args.nproc != t * g:
        raise UsageError(f"-t {t} -g {g} means {t * g} processes per node, but --nproc is {args.nproc}")
    info = dist.launch_info()
    if info.launcher == "single":
        if args.nproc is None and t * g > 1:
            args.nproc = t * g
    elif t * g > 1 and t * g != info.local_world_size:
        raise UsageError(f"-t {t} -g {g} means {t * g} processes per node, but the {info.launcher} launcher "
                         f"started {info.local_world_size} on this node")
    if info.launcher == "single" or os.environ.get("CCLTUNE_COMMAND"):  # ccltune starts (or started) them
        return (f"-t {t} -g {g}: {t * g} process{'es' if t * g > 1 else ''} per node, one GPU each"
                " (ccltune runs one process per GPU)")
    return (f"-t {t} -g {g}: one GPU per process; the {info.launcher} launcher started {info.local_world_size}"
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


def _schedule(args: argparse.Namespace, engine: str) -> list[str]:
    """-m, -z, -y, -I, -K: refused where they cannot mean anything; -z 3 and -I under -G disabled
    with a note, as nccl-tests disables them."""
    notes = []
    if args.agg_iters < 1:
        raise UsageError(f"-m/--agg_iters must be >= 1, got {args.agg_iters}")
    if args.agg_iters > 1:
        _can("-m/--agg_iters", args.agg_iters, engine)
    graph = args.cudagraph and engines.kind(engine).gpu
    if graph and args.blocking == 3:
        notes.append("-z 3 disabled: blocking mode 3 is incompatible with CUDA graph mode (-G), as nccl-tests says")
        args.blocking = 0
    if graph and args.blocking:
        raise UsageError(f"-z {args.blocking} with -G {args.cudagraph}: a stream being captured in a CUDA graph "
                         "cannot be waited for")
    if graph and args.stream_null:
        raise UsageError(f"-y 1 with -G {args.cudagraph}: CUDA cannot capture the legacy NULL stream")
    if graph and args.per_iter_timing:
        notes.append("-I 1 disabled: per-iteration timing is incompatible with CUDA graph mode (-G), as "
                     "nccl-tests says")
        args.per_iter_timing, args.per_iter_skip = 0, 0
    if args.per_iter_skip and not args.per_iter_timing:
        raise UsageError(f"-K/--per_iter_skip {args.per_iter_skip} needs -I 1 (per-iteration timing)")
    if not 0 <= args.per_iter_skip < args.iters:
        raise UsageError(f"-K/--per_iter_skip must be between 0 and -n - 1 ({args.iters - 1}), got {args.per_iter_skip}")
    return notes


def split(args: argparse.Namespace, nranks: int) -> tuple[groups.Split | None, int, str | None]:
    """NCCL_TESTS_SPLIT / NCCL_TESTS_SPLIT_MASK over a job of ``nranks``: (the split, ranks per nccl-tests
    process (-t x -g), the note row), or (None, 1, None) when there is none. A -r root must be a rank of
    every group (checked by the caller against ``groups_of(...).smallest``)."""
    how = groups.from_env()
    if how is None:
        return None, 1, None
    per = (args.nthreads or 1) * (args.ngpus or 1)
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
