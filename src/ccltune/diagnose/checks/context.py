"""What one command's checks read (``Context``): below the registry (diagnose/checks/registry.py),
which runs the checks, and the check modules, which take it as their argument.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ccltune.diagnose.checks.profiles import Profile
from ccltune.diagnose.parsers.ncclog import NcclLog, parse_log
from ccltune.diagnose.probes import amdsmi
from ccltune.diagnose.probes import topo as topo_probe
from ccltune.diagnose.probes.benchrun import BenchArgs


@dataclass
class Context:
    """What one command's checks may read, and where they leave what they produced besides findings.

    The command fills what it knows; a check reads only what it needs. ``topology`` is read from the
    saved amd-smi outputs when ``amd_smi`` names them, else discovered (NVML, nvidia-smi, amd-smi, AMD
    sysfs under ``root``), the first time a check asks for it; ``nccl_log`` is ``nccl_log_text`` parsed.
    """

    root: Path = Path("/")  # the folder that stands for / (--sysfs-root)
    environ: Mapping[str, str] = field(default_factory=dict)  # the job's environment
    lspci: str | None = None  # ``lspci -D -vvv`` output; None: lspci not installed
    nproc: int | None = None  # GPUs to run collectives on; None: all present
    run: bool = True  # False: --no-run, the checks that run collectives are waived
    timeout_s: float = 300.0  # seconds each collective run may take
    log: Callable[[str], None] = lambda _: None  # progress lines (the CLI prints them to stderr)
    bench_args: BenchArgs | None = None  # the command's builder of the bench line its probes run (benchrun)
    # ccltune check: the profile to judge by, the GPUs visible, and what to judge (records given, a bench JSON
    # file, or else measured now); ``how`` says how the figures were taken
    profile: Profile | None = None
    gpus: int = 0
    from_json: str | None = None
    records: list[dict[str, Any]] | None = None
    how: dict[str, Any] = field(default_factory=dict)
    # doctor --nccl-log: the saved NCCL/RCCL log's text, and the node's saved amd-smi outputs (--from-amd-smi)
    nccl_log_text: str | None = None
    amd_smi: list[str] | None = None
    artifacts: dict[str, str] = field(default_factory=dict)  # name -> text, kept with the run
    _topology: topo_probe.Topology | None = None
    _nccl_log: NcclLog | None = None

    @property
    def topology(self) -> topo_probe.Topology:
        if self._topology is None:
            self._topology = (topo_probe.from_amdsmi(amdsmi.parse(amdsmi.read_saved(self.amd_smi))) if self.amd_smi
                              else topo_probe.discover(self.root))
        return self._topology

    @property
    def nccl_log(self) -> NcclLog:
        if self._nccl_log is None:
            if self.nccl_log_text is None:
                raise ValueError("this context carries no NCCL log (nccl_log_text)")
            self._nccl_log = parse_log(self.nccl_log_text)
        return self._nccl_log
