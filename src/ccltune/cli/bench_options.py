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
    a("-t", "--nthreads", type=_typed(strtol("-t/--nthreads")), metavar="N")
    a("-g", "--ngpus", type=_typed(strtol("-g/--ngpus")), metavar="N")
    a("-b", "--minbytes")
    a("-e", "--maxbytes")
    a("-i", "--stepbytes")
    a("-f", "--stepfactor", type=_typed(strtol("-f/--stepfactor")))
    a("-n", "--iters", type=_typed(strtol("-n/--iters")))
    a("-m", "--agg_iters", type=_typed(strtol("-m/--agg_iters")))
    a("-w", "--warmup_iters", type=_typed(strtol("-w/--warmup_iters")))
    a("-N", "--run_cycles", type=_typed(strtol("-N/--run_cycles")))
    a("-p", "--parallel_init", type=_typed(strtol("-p/--parallel_init")), choices=(0, 1))
    a("-c", "--check", type=_typed(strtol("-c/--check")))
    a("-o", "--op")
    a("-d", "--datatype")
    a("-r", "--root")
    a("-z", "--blocking", type=_typed(strtol("-z/--blocking")), choices=(0, 1, 2, 3))
    a("-y", "--stream_null", type=_typed(strtol("-y/--stream_null")), choices=(0, 1))
    a("-T", dest="timeout", type=_typed(minus_t), default=argparse.SUPPRESS, metavar="S",
      help="as --timeout: seconds before a stuck collective or a dead peer fails the run; 0: no limit, as "
           "nccl-tests (ccltune then waits up to a year)")
    a("-G", "--cudagraph", type=_typed(strtol("-G/--cudagraph")), metavar="N")
    a("-C", "--report_cputime", type=_typed(strtol("-C/--report_cputime")), choices=(0, 1))
    a("-S", "--report_timestamps", type=_typed(strtol("-S/--report_timestamps")), choices=(0, 1))
    a("-J", "--output_file", metavar="FILE")
    a("-a", "--average")
    a("-R", "--local_register", type=_typed(strtol("-R/--local_register")), choices=(0, 1, 2))
    a("-x", "--cta_policy", type=_typed(strtol("-x/--cta_policy")))
    a("-D", "--device_implementation", type=_typed(strtol("-D/--device_implementation")))
    a("-V", "--device_cta_count", type=_typed(strtol("-V/--device_cta_count")))
    a("-M", "--memory", type=_typed(strtol("-M/--memory")), choices=(0, 1))
    a("-u", "--unalign", type=_typed(strtol("-u/--unalign")))
    a("-I", "--per_iter_timing", type=_typed(strtol("-I/--per_iter_timing")), choices=(0, 1))
    a("-K", "--per_iter_skip", type=_typed(strtol("-K/--per_iter_skip")))
