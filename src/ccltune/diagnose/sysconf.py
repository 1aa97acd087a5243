"""Host settings that slow collectives: NUMA auto-balancing, numad, IOMMU mode, PCIe ACS.

Every reader takes ``root``, the folder that stands for ``/`` (``--sysfs-root`` or
``CCLTUNE_SYSFS_ROOT``, so tests use fake trees). A file that cannot be read makes its check
WAIVED with the reason; nothing here raises but ``sys_root``, for a root the user named that is
not a folder.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from ccltune.diagnose.findings import Finding
from ccltune.errors import UsageError

ROOT_ENV = "CCLTUNE_SYSFS_ROOT"


def sys_root(cli_value: str | None = None) -> Path:
    """``--sysfs-root``, else $CCLTUNE_SYSFS_ROOT, else /.

    A root given by the flag or the variable must be an existing folder (UsageError naming which):
    under a mistyped one every file would be missing and every check WAIVED, which reads as a clean
    host. / is taken as it is: a real host may lack parts of /sys and /proc.
    """
    if cli_value is not None:
        return _given_root(cli_value, "--sysfs-root")
    env_value = os.environ.get(ROOT_ENV)
    if env_value:  # set but empty counts as unset, as for most variables
        return _given_root(env_value, f"${ROOT_ENV}")
    return Path("/")


def _given_root(value: str, where: str) -> Path:
    if not value:
        raise UsageError(f"{where}: empty path; give the folder that stands for /")
    path = Path(value)
    if not path.exists():
        raise UsageError(f"{where}: {value!r} does not exist")
    if not path.is_dir():
        raise UsageError(f"{where}: {value!r} is not a directory")
    return path


def read_text(root: Path, rel: str) -> tuple[str | None, str]:
    """(content, '') or (None, why it could not be read)."""
    path = root / rel
    try:
        return path.read_text(encoding="utf-8", errors="replace"), ""
    except FileNotFoundError:
        return None, f"/{rel} does not exist"
    except PermissionError:
        return None, f"no permission to read /{rel}"
    except OSError as exc:
        return None, f"cannot read /{rel}: {exc.strerror}"


def check_numa_balancing(root: Path) -> Finding:
    text, why = read_text(root, "proc/sys/kernel/numa_balancing")
    if text is None:
        return Finding("numa_balancing", "WAIVED", why)
    value = text.strip()
    if value == "0":
        return Finding("numa_balancing", "PASS", "kernel.numa_balancing = 0")
    return Finding("numa_balancing", "WARN", f"kernel.numa_balancing = {value}: the kernel migrates pages of "
                   "running processes, which stalls GPU transfers from host memory at random",
                   "sudo sysctl -w kernel.numa_balancing=0 (persist in /etc/sysctl.d/)")


def check_numad(root: Path) -> Finding:
    proc = root / "proc"
    try:
        pids = [p for p in proc.iterdir() if p.name.isdigit()]
    except OSError as exc:
        return Finding("numad", "WAIVED", f"cannot list /proc: {exc.strerror}")
    running = []
    for p in pids:
        try:
            if (p / "comm").read_text(encoding="utf-8", errors="replace").strip() == "numad":
                running.append(int(p.name))
        except OSError:
            continue  # a process that ended, or one we may not read
    if running:
        return Finding("numad", "WARN", f"numad is running (pid {', '.join(map(str, running))}): it moves processes "
                       "and memory between NUMA nodes behind NCCL's CPU affinity", "sudo systemctl disable --now numad")
    return Finding("numad", "PASS", f"numad not running ({len(pids)} processes checked)")


def check_iommu(root: Path) -> Finding:
    cmdline, why = read_text(root, "proc/cmdline")
    try:
        units = sorted(p.name for p in (root / "sys/class/iommu").iterdir())
    except OSError:
        units = None
    if cmdline is None and units is None:
        return Finding("iommu", "WAIVED", f"{why}; /sys/class/iommu unreadable")
    tokens = set((cmdline or "").split())
    passthrough = bool(tokens & {"iommu=pt", "iommu.passthrough=1", "amd_iommu=pt"})
    off = bool(tokens & {"iommu=off", "intel_iommu=off", "amd_iommu=off"})
    data = {"cmdline_iommu": sorted(t for t in tokens if "iommu" in t), "units": units}
    shown = " ".join(data["cmdline_iommu"]) or "no iommu option"
    if off or not units:
        return Finding("iommu", "PASS", f"IOMMU off ({shown}; {len(units or [])} IOMMU units)", data=data)
    if passthrough:
        return Finding("iommu", "PASS", f"IOMMU in passthrough mode ({shown}; {len(units)} units)", data=data)
    return Finding("iommu", "WARN", f"IOMMU translates DMA ({shown}; units {', '.join(units[:4])}): GPU peer-to-peer "
                   "and GPUDirect RDMA go through address translation (RCCL warns of hangs without iommu=pt)",
                   "add iommu=pt to the kernel command line (with intel_iommu=on / amd_iommu=on if needed)", data=data)


_DEVICE = re.compile(r"^((?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]) (.*)$")


def parse_acs(lspci_vvv: str) -> tuple[list[dict[str, str]], bool]:
    """(devices with an ACSCtl line: bdf, name, flags), and whether any capability read was denied."""
    devices, current, denied = [], None, False
    for line in lspci_vvv.splitlines():
        if m := _DEVICE.match(line):
            current = {"bdf": m[1], "name": m[2]}
        elif "<access denied>" in line:
            denied = True
        elif current is not None and line.strip().startswith("ACSCtl:"):
            devices.append({**current, "flags": line.split(":", 1)[1].strip()})
    return devices, denied


def check_acs(lspci_vvv: str | None) -> Finding:
    """WARN when a bridge has ACS request/completion redirect on: P2P detours through the root complex."""
    if lspci_vvv is None:
        return Finding("pcie_acs", "WAIVED", "lspci is not installed (pciutils)")
    devices, denied = parse_acs(lspci_vvv)
    if not devices:
        why = "lspci could not read capabilities (run as root)" if denied else "no device reports ACS"
        return Finding("pcie_acs", "WAIVED" if denied else "PASS", why)
    redirect = [d for d in devices if re.search(r"\b(ReqRedir|CmpltRedir)\+", d["flags"])]
    if not redirect:
        return Finding("pcie_acs", "PASS", f"ACS redirect off on all {len(devices)} ACS-capable devices")
    bdfs = ", ".join(d["bdf"] for d in redirect[:6]) + (" ..." if len(redirect) > 6 else "")
    return Finding("pcie_acs", "WARN", f"ACS redirect on at {len(redirect)} of {len(devices)} devices ({bdfs}): "
                   "PCIe peer-to-peer between GPUs and NICs detours through the root complex",
                   "on bare metal disable ACS in the BIOS or with `setpci -s BDF ECAP_ACS+0x6.w=0000`; "
                   "keep it in VMs that pass devices through", data={"devices": [d["bdf"] for d in redirect]})


def run_lspci() -> str | None:
    """``lspci -D -vvv`` output, or None when lspci is missing or fails."""
    if shutil.which("lspci") is None:
        return None
    try:
        return subprocess.run(["lspci", "-D", "-vvv"], capture_output=True, text=True, errors="replace",
                              timeout=30, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return None


def has_infiniband(root: Path) -> bool | None:
    try:
        return any((root / "sys/class/infiniband").iterdir())
    except FileNotFoundError:
        return False
    except OSError:
        return None


def host_checks(root: Path, lspci_vvv: str | None) -> list[Finding]:
    return [check_numa_balancing(root), check_numad(root), check_iommu(root), check_acs(lspci_vvv)]
