"""nccl-tests' command line for ``ccltune bench``: the option table of nccl-tests 2.19.6
(src/common.cu, getopt_long options), each flag with its short and long spelling and its meaning.
Each flag sets the field of ``ccltune.commands.bench_options.BenchOptions`` of its long name, whose
default it shows; what a value means to an engine is checked there (``check``)."""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable
from typing import Any

from ccltune.commands.bench_options import (
    NCCL_TESTS_VERSION,
    NCCLT_DEFAULTS,
    NCCLT_DEFAULTS_ENV,
    BenchOptions,
    minus_t,
    strtol,
)
from ccltune.commands.options import default


def _D(name: str) -> Any:
    return default(BenchOptions, name)


def _typed(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """``parse`` as an argparse type: its ValueError is argparse's error, with its own message."""
    def typed(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return typed


# What --help leaves to docs/bench.md: the defaults that differ, -J's environment, NCCL_TESTS_SPLIT, what each
# engine honours. That text had made bench --help 193 lines (issue 32).
EPILOG = (f"nccl-tests {NCCL_TESTS_VERSION} compatibility: ccltune's -b, -f and -w defaults differ "
          f"(--ncclt-defaults or {NCCLT_DEFAULTS_ENV}=1 takes nccl-tests'); -J, NCCL_TESTS_SPLIT, NCCL_TESTS_MIN_BW, "
          "NCCL_TESTS_DEVICE and the flags each engine honours or refuses: docs/bench.md.")


def _add(group: Any, *flags: str, **kw: Any) -> None:
    """One flag, its default BenchOptions' (-T sets --timeout's field, whose default --timeout shows)."""
    if kw.get("default") is not argparse.SUPPRESS:
        kw["default"] = _D(kw.get("dest") or flags[-1].lstrip("-"))
    group.add_argument(*flags, **kw)


def register(p: argparse.ArgumentParser) -> None:
    """Every nccl-tests 2.19.6 option, with nccl-tests' defaults where ccltune's do not differ."""
    p.epilog = EPILOG
    g = p.add_argument_group(f"nccl-tests {NCCL_TESTS_VERSION} options (same spellings and meanings)")
    a = functools.partial(_add, g)
    a("-t", "--nthreads", type=_typed(strtol("-t/--nthreads")), metavar="N",
      help="threads per process; ccltune runs one process per GPU: -t N x -g M = N*M processes per node")
    a("-g", "--ngpus", type=_typed(strtol("-g/--ngpus")), metavar="N", help="GPUs per thread (as -t)")
    theirs = " (nccl-tests: %s, --ncclt-defaults)"
    a("-b", "--minbytes",
      help="smallest size (K/M/G suffixes, fractions allowed: 1.5M)" + theirs % NCCLT_DEFAULTS["minbytes"][2])
    a("-e", "--maxbytes", help="largest size")
    a("-i", "--stepbytes", help="add this many bytes when -f is 0 or 1 (a series holds at most 10000 sizes)")
    a("-f", "--stepfactor", type=_typed(strtol("-f/--stepfactor")),
      help="multiply the size by this (>= 2); 0 or 1: step by -i" + theirs % NCCLT_DEFAULTS["stepfactor"][2])
    a("-n", "--iters", type=_typed(strtol("-n/--iters")), help="timed calls per size")
    a("-m", "--agg_iters", type=_typed(strtol("-m/--agg_iters")), help="calls aggregated per timed iteration")
    a("-w", "--warmup_iters", type=_typed(strtol("-w/--warmup_iters")),
      help="untimed calls right before each size is timed (and with the series warm-up modes, also at "
           "every size before the first is timed)" + theirs % NCCLT_DEFAULTS["warmup_iters"][2])
    a("-N", "--run_cycles", type=_typed(strtol("-N/--run_cycles")),
      help="run and print the size loop this many times (rows again, one header and footer); 0: until "
           "interrupted (Ctrl-C keeps every row)")
    a("-p", "--parallel_init", type=_typed(strtol("-p/--parallel_init")), choices=(0, 1),
      help="communicators created concurrently (ccltune's processes always do)")
    a("-c", "--check", type=_typed(strtol("-c/--check")),
      help="check results N times after each size's timed calls, up to the first wrong (0: off)")
    a("-o", "--op", help="sum, prod, max, min, avg, mulsum, or all")
    a("-d", "--datatype",
      help="int8, uint8, int32, uint32, int64, uint64, half, float, double, bfloat16, f8e4m3, f8e5m2, or all")
    a("-r", "--root", help="root rank of broadcast, reduce, gather, scatter, or all")
    a("-z", "--blocking", type=_typed(strtol("-z/--blocking")), choices=(0, 1, 2, 3),
      help="0: no wait between calls; 1, 2, 3: nccl-tests' blocking modes")
    a("-y", "--stream_null", type=_typed(strtol("-y/--stream_null")), choices=(0, 1),
      help="1: launch on the NULL stream")
    a("-T", dest="timeout", type=_typed(minus_t), default=argparse.SUPPRESS, metavar="S",
      help="as --timeout: seconds before a stuck collective or a dead peer fails the run; 0: no limit, as "
           "nccl-tests (ccltune then waits up to a year)")
    a("-G", "--cudagraph", type=_typed(strtol("-G/--cudagraph")), metavar="N",
      help="capture the timed calls in a CUDA graph and launch it N times (0: eager). Its first launch, which "
           "uploads it, is timed only with --warmup-mode nccl-tests, as nccl-tests times it")
    a("-C", "--report_cputime", type=_typed(strtol("-C/--report_cputime")), choices=(0, 1),
      help="1: report CPU time instead of GPU time")
    a("-S", "--report_timestamps", type=_typed(strtol("-S/--report_timestamps")), choices=(0, 1),
      help="1: end each row with a timestamp")
    a("-J", "--output_file", metavar="FILE", help="also write nccl-tests' JSON (schema version 3)")
    a("-a", "--average",
      help="how per-rank times are combined: 0/rank0, 1/avg, 2/min, 3/max")
    a("-R", "--local_register", type=_typed(strtol("-R/--local_register")), choices=(0, 1, 2),
      help="0: no registration; 1: local; 2: symmetric windows (NCCL >= 2.27)")
    a("-x", "--cta_policy", type=_typed(strtol("-x/--cta_policy")), help="NCCL CTA policy 0, 1, 2")
    a("-D", "--device_implementation", type=_typed(strtol("-D/--device_implementation")),
      help="device-API implementation (0: NCCL's)")
    a("-V", "--device_cta_count", type=_typed(strtol("-V/--device_cta_count")), help="CTAs for -D")
    a("-M", "--memory", type=_typed(strtol("-M/--memory")), choices=(0, 1), help="1: report GPU memory usage")
    a("-u", "--unalign", type=_typed(strtol("-u/--unalign")), help="misalign buffers by this many elements")
    a("-I", "--per_iter_timing", type=_typed(strtol("-I/--per_iter_timing")), choices=(0, 1),
      help="1: per-iteration min/max/p99/cv columns")
    a("-K", "--per_iter_skip", type=_typed(strtol("-K/--per_iter_skip")), help="samples -I leaves out")
