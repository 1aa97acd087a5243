"""Issue 41, item 6: files under a system root (--sysfs-root, $CCLTUNE_SYSFS_ROOT) are read through the bounded
input layer (inputs.read_system_text): /dev/zero, a FIFO or a 2 GB sparse file in place of a /proc or /sys file
is passed over with a reason, never read whole and never waited for. Each reader runs in a child process under a
memory and a time limit, so today's unbounded read fails the test instead of taking the machine."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"


def _tree(tmp: Path, how: str) -> Path:
    root = tmp / "root"
    dev = root / "sys/class/drm/card0/device"
    dev.mkdir(parents=True)
    (root / "proc").mkdir()
    for f in (root / "proc/cmdline", dev / "current_compute_partition", dev / "current_memory_partition",
              dev / "product_name"):
        if how == "zero":
            f.symlink_to("/dev/zero")
        elif how == "fifo":
            os.mkfifo(f)
        else:
            with open(f, "wb") as fh:
                fh.truncate(2 << 30)
    return root


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


def _run(code: str, root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
           "CCLTUNE_SYSFS_ROOT": str(root)}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          preexec_fn=_limit, env=env)


@pytest.mark.parametrize("how", ["zero", "fifo", "sparse"])
class TestASystemRootIsReadBounded:
    def test_the_host_checks_pass_it_over_with_a_reason(self, tmp_path, how):
        root = _tree(tmp_path, how)
        proc = _run("from pathlib import Path\nfrom ccltune.diagnose.probes import sysfs\n"
                    f"text, why = sysfs.read_text(Path({str(root)!r}), 'proc/cmdline')\n"
                    "assert text is None and 'cannot read /proc/cmdline' in why, why\nprint(why)", root)
        assert proc.returncode == 0, proc.stderr[-500:]

    def test_the_recorded_environment_passes_the_partitions_over(self, tmp_path, how):
        root = _tree(tmp_path, how)
        proc = _run("from ccltune import environment\nprint(environment.amd_partitions())", root)
        assert proc.returncode == 0, proc.stderr[-500:]
        assert "'compute_partition': None" in proc.stdout

    def test_the_amd_cards_reader_passes_them_over(self, tmp_path, how):
        root = _tree(tmp_path, how)
        proc = _run("from pathlib import Path\nfrom ccltune.diagnose.probes import amdsysfs\n"
                    f"print(amdsysfs.read_amd(Path({str(root)!r})).gpus)", root)
        assert proc.returncode == 0, proc.stderr[-500:]
