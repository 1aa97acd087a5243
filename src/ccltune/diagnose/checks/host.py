"""Host settings that slow collectives: NUMA auto-balancing, numad, IOMMU mode, PCIe ACS.

Each check reads under ``root`` (see ``probes.sysfs``); a file that cannot be read makes its
check WAIVED with the reason.
"""

from __future__ import annotations

import re
from pathlib import Path

from ccltune.diagnose.findings import Finding
from ccltune.diagnose.probes.sysfs import read_text
from ccltune.status import Verdict


def check_numa_balancing(root: Path) -> Finding:
    text, why = read_text(root, "proc/sys/kernel/numa_balancing")
    if text is None:
        return Finding("numa_balancing", Verdict.WAIVED, why)
    value = text.strip()
    if value == "0":
        return Finding("numa_balancing", Verdict.PASS, "kernel.numa_balancing = 0")
    return Finding("numa_balancing", Verdict.WARN, f"kernel.numa_balancing = {value}: the kernel migrates pages of "
                   "running processes, which stalls GPU transfers from host memory at random",
                   "sudo sysctl -w kernel.numa_balancing=0 (persist in /etc/sysctl.d/)")


def check_numad(root: Path) -> Finding:
    proc = root / "proc"
    try:
        pids = [p for p in proc.iterdir() if p.name.isdigit()]
    except OSError as exc:
        return Finding("numad", Verdict.WAIVED, f"cannot list /proc: {exc.strerror}")
    running = []
    for p in pids:
        try:
            if (p / "comm").read_text(encoding="utf-8", errors="replace").strip() == "numad":
                running.append(int(p.name))
        except OSError:
            continue  # a process that ended, or one we may not read
    if running:
        return Finding("numad", Verdict.WARN, f"numad is running (pid {', '.join(map(str, running))}): it moves processes "
                       "and memory between NUMA nodes behind NCCL's CPU affinity", "sudo systemctl disable --now numad")
    return Finding("numad", Verdict.PASS, f"numad not running ({len(pids)} processes checked)")


def check_iommu(root: Path) -> Finding:
    cmdline, why = read_text(root, "proc/cmdline")
    try:
        units = sorted(p.name for p in (root / "sys/class/iommu").iterdir())
    except OSError:
        units = None
    if cmdline is None and units is None:
        return Finding("iommu", Verdict.WAIVED, f"{why}; /sys/class/iommu unreadable")
    tokens = set((cmdline or "").split())
    passthrough = bool(tokens & {"iommu=pt", "iommu.passthrough=1", "amd_iommu=pt"})
    off = bool(tokens & {"iommu=off", "intel_iommu=off", "amd_iommu=off"})
    options = sorted(t for t in tokens if "iommu" in t)
    data = {"cmdline_iommu": options, "units": units}
    shown = " ".join(options) or "no iommu option"
    if off or not units:
        return Finding("iommu", Verdict.PASS, f"IOMMU off ({shown}; {len(units or [])} IOMMU units)", data=data)
    if passthrough:
        return Finding("iommu", Verdict.PASS, f"IOMMU in passthrough mode ({shown}; {len(units)} units)", data=data)
    return Finding("iommu", Verdict.WARN, f"IOMMU translates DMA ({shown}; units {', '.join(units[:4])}): GPU peer-to-peer "
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
        return Finding("pcie_acs", Verdict.WAIVED, "lspci is not installed (pciutils)")
    devices, denied = parse_acs(lspci_vvv)
    if not devices:
        why = "lspci could not read capabilities (run as root)" if denied else "no device reports ACS"
        return Finding("pcie_acs", Verdict.WAIVED if denied else Verdict.PASS, why)
    redirect = [d for d in devices if re.search(r"\b(ReqRedir|CmpltRedir)\+", d["flags"])]
    if not redirect:
        return Finding("pcie_acs", Verdict.PASS, f"ACS redirect off on all {len(devices)} ACS-capable devices")
    bdfs = ", ".join(d["bdf"] for d in redirect[:6]) + (" ..." if len(redirect) > 6 else "")
    return Finding("pcie_acs", Verdict.WARN, f"ACS redirect on at {len(redirect)} of {len(devices)} devices ({bdfs}): "
                   "PCIe peer-to-peer between GPUs and NICs detours through the root complex",
                   "on bare metal disable ACS in the BIOS or with `setpci -s BDF ECAP_ACS+0x6.w=0000`; "
                   "keep it in VMs that pass devices through", data={"devices": [d["bdf"] for d in redirect]})

