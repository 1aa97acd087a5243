"""In-run arms: the user's job run ONCE, its ``--rules`` arms switched inside it by ccltune's tuner plugin
in blocks of whole steps (docs/ab.md "In-run arms").

ccltune writes the arms file (arm 0 NCCL's default, ``aa`` its A/A twin, one arm per rule file), starts the
job with ``CCLTUNE_ARMS`` and ``NCCL_TUNER_PLUGIN`` (and the profiler: ``CCLTUNE_PROFILE``,
``NCCL_PROFILER_PLUGIN``, when it is built) through ab's guard, stamps the step lines ``--metric`` matches
(:mod:`ccltune.ab.steplines`), then reads the plugin's arm logs, maps steps to blocks
(:mod:`ccltune.ab.blocks`) and judges each arm paired by round (:mod:`ccltune.ab.inrun_judge`). Nothing here
prints: lines go to ``say``."""

from __future__ import annotations

import re
import shutil
import statistics
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ccltune.ab import armsfile, blocks, gpu_period, inrun_judge, steplines
from ccltune.ab.armsfile import ArmLog, ArmsFile, InRunArm
from ccltune.ab.gpu_period import GpuDiagnostic
from ccltune.ab.steplines import StepLine
from ccltune.errors import CcltuneError, CheckFailed, DataError, UsageError
from ccltune.workload import profile_file


@dataclass(frozen=True)
class InRunPlan:
    argv: list[str]
    arms: tuple[InRunArm, ...]          # arm 0: NCCL's default (no rules)
    pattern: re.Pattern[str]
    higher_better: bool
    seed: int
    warmup_blocks: int = 2
    block_steps: int = 5                # steps (periods) per block
    max_blocks: int = 1 << 20
    period: int | None = None           # tuner calls per step per communicator; None: the plugin finds it
    step_calls: int | None = None       # the workload's calls per step: the found period's nearest multiple to it
    nranks: int | None = None           # arms only on communicators of this size (the workload's busiest of several)
    tuner: str = ""
    profiler: str | None = None
    base_env: Mapping[str, str] = field(default_factory=dict)
    echo: bool = False
    run_timeout_s: float | None = None
    min_effect: float = 0.01
    gpu_metric: bool = False            # judged by the GPU step period (profiler files), not the job's step lines

    @property
    def names(self) -> list[str]:
        return [a.name for a in self.arms]


STEPS_FILE = "steps.txt"   # the job's step lines, written once it ends: kept with the arm logs when no verdict comes


@dataclass
class InRunResult:
    job: steplines.JobOutput
    logs: list[ArmLog]
    blocks: blocks.Blocks
    judged: list[inrun_judge.ArmJudgement]
    notes: list[str] = field(default_factory=list)
    gpu_period: GpuDiagnostic | None = None   # the GPU step period per arm: a diagnostic


def run(plan: InRunPlan, say: Callable[[str], None]) -> InRunResult:
    """Run the job once with the arms (module doc). The job failing, or leaving no arm log or no step
    line, is an error naming what is missing."""
    tmp = Path(tempfile.mkdtemp(prefix="ccltune-inrun-"))
    keep = False
    try:
        return _run(plan, tmp, say)
    except DataError as exc:   # the job ran and measured, but no verdict came of it: its data stays for a look
        keep = (tmp / STEPS_FILE).is_file()
        if not keep:
            raise
        raise DataError(f"{exc}\n(the job's step lines, its arm logs and profiler files are kept in {tmp})") from None
    finally:
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)


def _run(plan: InRunPlan, tmp: Path, say: Callable[[str], None]) -> InRunResult:
    job, logs = _job(plan, tmp)
    if plan.gpu_metric:
        return _judge_gpu(plan, tmp, job, logs)
    got = blocks.block_values(logs, job.steps, n_arms=len(plan.arms), warmup_blocks=plan.warmup_blocks,
                              seed=plan.seed, max_blocks=plan.max_blocks, end_ns=job.end_ns)
    notes = list(got.notes)
    if job.buffered:
        notes.append(f"{job.burst_steps} of {len(job.steps)} step lines came in bursts (up to {job.largest_burst} "
                     "in one read): the job's stdout is block-buffered, so a line's arrival is not its step's end and "
                     "steps land in the wrong blocks; a Python job gets PYTHONUNBUFFERED=1 from ccltune (check that "
                     "it does not reopen stdout), any other job needs 'stdbuf -oL COMMAND' or a pty")
    short = _blocks_shorter_than_steps(logs, got, job.steps)
    if short:  # a step then runs under several arms: no block's steps are its arm's, whatever got assigned
        raise DataError(f"ab --in-run: no block to judge: {short}")
    if not got.values:
        raise DataError(f"ab --in-run: {len(logs)} arm log(s) and {len(job.steps)} step line(s), but no block to "
                        f"judge: {len(got.spans)} block(s) logged, the first {plan.warmup_blocks} and the warm-up "
                        f"round ({len(plan.arms)} blocks) are warm-up; run more steps (a block is {plan.block_steps} "
                        "steps) or lower --block-steps" + ("; " + "; ".join(notes) if notes else ""))
    judged = inrun_judge.judge(got.values, plan.names, higher_better=plan.higher_better, min_effect=plan.min_effect)
    return InRunResult(job, logs, got, judged, notes, _gpu_period(tmp / "profile" if plan.profiler else None, got, plan))


def _job(plan: InRunPlan, tmp: Path) -> tuple[steplines.JobOutput, list[ArmLog]]:
    """The job run once with the arms file, its step lines kept in ``tmp``, and its arm logs, checked."""
    logdir = tmp / "arms"
    logdir.mkdir()
    spec = ArmsFile(plan.seed, plan.warmup_blocks, plan.block_steps, plan.max_blocks, str(logdir), plan.arms,
                    plan.period, plan.step_calls, plan.nranks)
    spec.write(tmp / "arms.txt")
    env = {**plan.base_env, "CCLTUNE_ARMS": str(tmp / "arms.txt"), "NCCL_TUNER_PLUGIN": plan.tuner}
    if plan.profiler:
        (tmp / "profile").mkdir()
        env.update(NCCL_PROFILER_PLUGIN=plan.profiler, CCLTUNE_PROFILE=str(tmp / "profile"))
    job = steplines.run(plan.argv, env, plan.pattern, echo=plan.echo, timeout_s=plan.run_timeout_s)
    (tmp / STEPS_FILE).write_text("# t_ns value (each step line as it arrived)\n"
                                  + "".join(f"{s.t_ns} {s.value!r}\n" for s in job.steps))
    tail = "\n".join(f"  | {line}" for line in job.tail)
    if job.reason:
        raise CheckFailed(f"ab --in-run: the job failed ({job.reason}): nothing to judge; its last lines:\n{tail}")
    if not job.steps and not plan.gpu_metric:
        raise UsageError(f"--metric {plan.pattern.pattern!r} matched no line of the job's output (exit code 0): "
                         f"check --metric; the job's last lines:\n{tail}")
    logs = armsfile.read_logs(logdir)
    if not logs and plan.nranks:
        raise DataError(f"ab --in-run: the job wrote no arm log: the arms were for communicators of {plan.nranks} ranks "
                        "only (the busiest size in --workload) and the job made none of that size (a workload of "
                        "another launch?)")
    if not logs:
        raise DataError(f"ab --in-run: the job wrote no arm log (ccltune-arms.*.txt) into {logdir}: the tuner "
                        f"plugin NCCL_TUNER_PLUGIN={plan.tuner} with CCLTUNE_ARMS was not loaded by NCCL (a job "
                        "without NCCL, an NCCL older than the tuner ABI, or a job that replaced NCCL_TUNER_PLUGIN; "
                        "NCCL_DEBUG=INFO says 'Successfully loaded external tuner plugin'), or its processes never "
                        "reached finalize or exit")
    if all(lg.calls == 0 for lg in logs):
        ranks = sorted({lg.nranks for lg in logs})
        raise DataError(f"ab --in-run: NCCL asked the tuner plugin about no collective ({len(logs)} communicator log(s), "
                        f"of {'/'.join(map(str, ranks))} rank(s)), so no arm ever ran: "
                        + ("NCCL consults no tuner for a one-rank communicator (a one-GPU job runs its collectives "
                           "as local copies); rules change nothing there" if ranks == [1] else
                           "the job issued no broadcast, reduce, all_gather, reduce_scatter or all_reduce through NCCL "
                           "(send/recv and all-to-all reach no tuner), or replayed them from CUDA graphs captured before"))
    return job, logs


def _judge_gpu(plan: InRunPlan, tmp: Path, job: steplines.JobOutput, logs: list[ArmLog]) -> InRunResult:
    """--metric gpu: each block's GPU step period from the profiler's files (``gpu_period.per_block``: the same
    call of consecutive steps, on each rank's GPU clock, nothing from the job), judged as step lines are."""
    spans, notes = blocks.spans(logs, len(plan.arms), plan.warmup_blocks, plan.seed, plan.max_blocks)
    try:
        files = profile_file.read_dir(tmp / "profile", strict=True)
    except (CcltuneError, OSError) as exc:
        raise DataError(f"ab --in-run --metric gpu: the profiler's files could not be read: {exc}") from None
    if not files:
        raise DataError(f"ab --in-run --metric gpu: the profiler plugin ({plan.profiler}) wrote no file: NCCL did not "
                        "load it (NCCL_PROFILER_PLUGIN), or the job has no NCCL")
    periods, more = gpu_period.per_block(files, spans, plan.block_steps)
    notes += more
    values = [blocks.BlockValue(s, statistics.median(b.period_ns for b in periods[s.index]) / 1e6,
                                min(len(b.steps_ns) for b in periods[s.index]))
              for s in spans if s.round >= 0 and s.index < plan.max_blocks and s.end_ns is not None
              and periods.get(s.index)]
    if not values:
        raise DataError(f"ab --in-run --metric gpu: {len(files)} profiler file(s) and {len(spans)} block(s) logged, but "
                        "no judged block has a GPU step period" + ("; " + "; ".join(notes) if notes else ""))
    got = blocks.Blocks(spans=spans, values=values, notes=notes)
    judged = inrun_judge.judge(values, plan.names, higher_better=False, min_effect=plan.min_effect)
    return InRunResult(job, logs, got, judged, notes)


def _gpu_period(profile: Path | None, got: blocks.Blocks, plan: InRunPlan) -> GpuDiagnostic | None:
    """The GPU step period per judged block and arm from the profiler's files (``ccltune.ab.gpu_period``): a
    diagnostic beside the verdict; None without the profiler."""
    if profile is None:
        return None
    try:
        files = profile_file.read_dir(profile, strict=True)
    except (CcltuneError, OSError) as exc:
        return GpuDiagnostic(0, notes=[f"the profiler's files could not be read: {exc}"])
    if not files:
        return GpuDiagnostic(0, notes=[f"the profiler plugin ({plan.profiler}) wrote no file: NCCL did not "
                                                  "load it (NCCL_PROFILER_PLUGIN), or the job has no NCCL"])
    return gpu_period.diagnostic(files, got.values, plan.names, plan.block_steps, got.spans)


def _blocks_shorter_than_steps(logs: Sequence[ArmLog], got: blocks.Blocks, steps: Sequence[StepLine]) -> str:
    """Why blocks hold no whole step, when the plugin's period is not the job's step (a decode loop whose calls
    are all one key: the plugin finds period 1, 4 x H200 TP job of 2026-11-28): more blocks than steps over the
    same time. '' otherwise."""
    if len(steps) < 2:
        return ""
    inside = [s for s in got.spans if steps[0].t_ns <= s.start_ns <= steps[-1].t_ns]
    if len(inside) <= len(steps) - 1:  # no more block starts than steps over the steps' time
        return ""
    periods = sorted({lg.period for lg in logs if lg.period})
    seen = _calls_per_step(logs, steps)
    return (f"{len(inside)} blocks began in the time of {len(steps) - 1} steps: a block is shorter than a step, "
            f"so the plugin's period ({', '.join(map(str, periods)) or 'none'} tuner call(s)) is not the job's step; "
            "give --workload W.json (the job's workload, `ccltune workload import`: its calls per step) or --period N, "
            "the tuner calls of one step on the communicator" + (f" (this run: about {seen} a step)" if seen else ""))


def _calls_per_step(logs: Sequence[ArmLog], steps: Sequence[StepLine]) -> int | None:
    """The tuner calls of one step in this run, about: a log's calls between its first and last block start
    within the steps' time, over the step lines that arrived between them (the largest over the logs)."""
    got = []
    for lg in logs:
        inside = [b for b in lg.blocks if steps[0].t_ns <= b.t_ns <= steps[-1].t_ns]
        n_steps = sum(inside[0].t_ns < s.t_ns <= inside[-1].t_ns for s in steps) if len(inside) > 1 else 0
        if n_steps:
            got.append(round((inside[-1].first_call - inside[0].first_call) / n_steps))
    return max(got) if got and max(got) > 0 else None
