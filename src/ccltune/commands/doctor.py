"""``doctor``: what on this host slows collectives, each finding with evidence and a fix: the host and
environment checks, then a short all_reduce under torchrun read through its NCCL log (the checks:
``diagnose.checks``, run by ``diagnose.checks.registry``); or, with ``nccl_log``, a log the user has."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from ccltune import environment, ncclline
from ccltune.commands import launching
from ccltune.commands.bench_probe import bench_args
from ccltune.commands.common import Console, check_outputs
from ccltune.commands.diagnosis import DiagnoseOptions, Diagnosis, keep
from ccltune.commands.options import option, to_argv
from ccltune.diagnose.checks.registry import Context, run_checks
from ccltune.diagnose.findings import format_findings, overall
from ccltune.diagnose.parsers.ncclog import read_log
from ccltune.diagnose.probes import sysfs
from ccltune.diagnose.probes.sysfs import ROOT_ENV
from ccltune.inputs import MAX_LINE_CHARS


@dataclass(frozen=True, kw_only=True)
class DoctorOptions(DiagnoseOptions):
    """``ccltune doctor``'s options (``ccltune doctor --help`` says what each means). ``timeout`` in seconds."""

    nccl_log: str | None = option(None, flag="--nccl-log", help="only analyse this NCCL_DEBUG=INFO log (NCCL or RCCL)")
    from_amd_smi: tuple[str, ...] | None = option(None, flag="--from-amd-smi", repeat=True,
                                                  help="with --nccl-log of an RCCL job: the node's saved `amd-smi topology --json` / `amd-smi static "
                                                       "--asic --partition --numa --json` output (GPU count, xGMI links, NUMA nodes); give it once "
                                                       "per file; without it the node is read from this host")
    nproc: int | None = option(None, flag="--nproc", help="GPUs to run the collective on (default: all present)")
    no_run: bool = option(False, flag="--no-run", help="skip the collective runs (host and environment checks only)")
    timeout: float = option(300.0, flag="--timeout", help="seconds each collective run may take")
    sysfs_root: str | None = option(None, flag="--sysfs-root",
                                    help=f"folder standing for / when reading sys/ and proc/ (default: ${ROOT_ENV} or /)")

    def to_argv(self) -> list[str]:
        """The command line of these options (the CLI's parser reads it back to the same options)."""
        return to_argv(self, "doctor")


def run_doctor(o: DoctorOptions, console: Console = Console(), *, command_line: list[str] | None = None) -> Diagnosis:
    """Check ``o`` (--nproc and --timeout as ``bench`` checks them) before anything is read or run, run the
    checks, say them to ``console`` (progress lines as notes), store a doctor run with what the checks kept
    (the NCCL log among them). ``command_line``: what the user typed, recorded with the run (default: the
    options' argv)."""
    check_outputs(o)
    launching.check_nproc(o.nproc)
    launching.check_timeout(o.timeout)
    artifacts: dict[str, str] = {}
    if o.nccl_log:
        text = read_log(o.nccl_log)
        ctx = Context(root=sysfs.sys_root(o.sysfs_root), nccl_log_text=text, amd_smi=list(o.from_amd_smi) if o.from_amd_smi else None)
        findings = run_checks("doctor --nccl-log", ctx)
        title = f"ccltune doctor --nccl-log {o.nccl_log}"
        artifacts["nccl-log"] = text
    else:
        root = sysfs.sys_root(o.sysfs_root)
        ctx = Context(root=root, lspci=sysfs.run_lspci(), environ=dict(os.environ), nproc=o.nproc,
                      run=not o.no_run, timeout_s=o.timeout, log=console.note, bench_args=bench_args)
        findings, artifacts = run_checks("doctor", ctx), ctx.artifacts
        title = "ccltune doctor" + ("" if str(root) == "/" else f" (host files read under {root})")  # --sysfs-root
    console.say(format_findings(findings, title=title))
    record = {"status": overall(findings), "checks": [f.to_record() for f in findings]}
    artifacts["doctor.json"] = json.dumps(record, indent=2, default=str)
    env = environment.collect(argv=command_line or o.to_argv())
    if o.nccl_log:
        env = _log_host(env, artifacts["nccl-log"], o.nccl_log, console)
    run_id = keep(o, "doctor", record, findings, env=env, artifacts=artifacts, summary={"status": record["status"]})
    return Diagnosis(findings, record, o.db, run_id, o.json_path)


def _log_host(env: dict[str, Any], text: str, path: str, console: Console) -> dict[str, Any]:
    """The run's environment for a log read here: the log's own host(s) (its lines' prefixes) when this host
    is not among them, with where it was read (``read_on``), said on the console: a log of another machine
    is never stored as this one (issue 41)."""
    hosts = sorted({ln.host for raw in text.splitlines()
                    if (ln := ncclline.split(raw[:MAX_LINE_CHARS])) is not None and ln.host})
    if not hosts or env.get("host") in hosts:
        return env
    shown_hosts = ", ".join(hosts[:8]) + (f" and {len(hosts) - 8} more" if len(hosts) > 8 else "")
    console.note(f"# {path} is a log of {shown_hosts}, not of this host ({env.get('host')}): stored as "
                 f"{shown_hosts}")
    return {**env, "host": ",".join(hosts[:8]), "read_on": env.get("host")}
