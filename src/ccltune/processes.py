"""Facts about this host's processes, from Linux /proc: a process's start time, whether it still
runs, its descendants. Below both the results database (which judges whether a run stored as
running was abandoned) and the launcher (which records a job's processes and ends them)."""

from __future__ import annotations

import os


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
