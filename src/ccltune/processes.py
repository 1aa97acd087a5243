"""Facts about this host's processes, from Linux /proc: a process's start time, whether it still
runs, its descendants; and a process's request to die with its parent (``die_with_parent``). Below
both the results database (which judges whether a run stored as running was abandoned) and the
launchers (which record a job's processes and end them: ``launch``, ``ab.guard``, which also takes in the
job's orphans: ``become_subreaper``)."""

from __future__ import annotations

import ctypes
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36


def process_start(pid: int) -> int | None:
    """The process's start time (clock ticks since boot, /proc/PID/stat), to tell it from a later
    process given the same pid; None where /proc cannot say."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            return int(fh.read().rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def alive(pid: int, start: int | None = None) -> bool:
    """Whether process ``pid`` (started at ``start``, when known) still runs (a zombie does not)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return fields[0] != "Z" and (start is None or int(fields[19]) == start)
    except FileNotFoundError:
        return False
    except (OSError, ValueError, IndexError):
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (Linux /proc; [] elsewhere)."""
    children: dict[int, list[int]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="utf-8") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _prctl(option: int, arg: int) -> bool:
    """prctl(option, arg) on Linux; whether it took."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        return int(ctypes.CDLL(None, use_errno=True).prctl(option, arg, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def become_subreaper() -> bool:
    """Linux: make this process the one its orphaned descendants are given to (PR_SET_CHILD_SUBREAPER), so a
    process the job left behind, in a session of its own or not, stays among ``descendants(os.getpid())``
    after its parent exits. Returns whether it took (False elsewhere)."""
    return _prctl(_PR_SET_CHILD_SUBREAPER, 1)


def die_with_parent(expected_ppid: int | None = None, sig: int = signal.SIGTERM) -> None:
    """Linux: the kernel sends ``sig`` to this process when its parent exits (PR_SET_PDEATHSIG), so
    no process of a job outlives its launcher. ``expected_ppid``: the parent it must still have (when
    it went before this call, ``sig`` is sent now)."""
    ppid = os.getppid() if expected_ppid is None else expected_ppid
    if not _prctl(_PR_SET_PDEATHSIG, int(sig)):
        return
    if os.getppid() != ppid:
        os.kill(os.getpid(), sig)
