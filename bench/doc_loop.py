"""Run docs/workload.md's loop, its commands as the doc writes them, on a real job, and print a table.

The fenced block after "The loop, each step below" is read from the doc itself, so what runs is what a user
reads. Only three things are substituted, each the same way in every line:

- ``torchrun ... train.py`` becomes the job (``--job``) with ``--capture-args`` for steps 1 and 7 (the capture
  runs), ``--judge-args`` for step 8 (the runs the job judges itself in; ``--whole-args`` for its whole-run ab);
- ``/tmp/`` becomes the work folder (``--work``), where every output lands (commands run there);
- ``ccltune`` (also inside ``$(...)``) is this checkout's ccltune (a shim in WORK/bin on PATH).

Each line runs under ``bash -c`` with a time limit (``--line-timeout``, and what is left of ``--budget``); a line
past its limit gets SIGINT (ccltune stops and keeps what it measured), then SIGKILL. The output of each line is
WORK/stepN[a-z].txt. Printed: one row per line (step, rc, seconds, the line's last words), then the commands.

  python3 bench/doc_loop.py --work /tmp/loop-ddp \\
      --job 'torchrun --standalone --nproc-per-node 2 examples/train_transformer.py --mode ddp --layers 2' \\
      --capture-args '--steps 20 --warmup 2' --judge-args '--steps 400 --warmup 3' [--whole-args '--steps 40']
      [--dry-run] [--only 1,2,3]
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "workload.md"
JOB_TOKEN = "torchrun ... train.py"
NVLS_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


@dataclass
class Line:
    step: int
    text: str          # as the doc writes it, its trailing comment left out
    name: str = ""     # step1, step8a, ...


def block(doc: Path = DOC) -> str:
    text = doc.read_text(encoding="utf-8")
    return text[text.index("The loop, each step below"):].split("```")[1]


def lines(doc: Path = DOC) -> list[Line]:
    """The block's command lines with their step: a line's own '# N.' or '# N,' comment, else a '# N.' comment
    line before it, else the next numbered line's step (step 7's deploy run before its import)."""
    out: list[Line] = []
    pending: list[Line] = []
    carried: int | None = None
    for raw in block(doc).splitlines():
        s = raw.strip()
        if not s:
            continue
        if s.startswith("#"):
            m = re.match(r"#\s*(\d+)[.,]", s)
            carried = int(m.group(1)) if m else carried
            continue
        m = re.search(r"\s#\s*(\d+)[.,]", s)
        command = s[:m.start()].rstrip() if m else s.split(" # ", 1)[0].rstrip()
        line = Line(int(m.group(1)) if m else (carried or 0), command)
        carried = None
        if m:
            for p in pending:
                p.step = line.step
            pending = []
        elif not line.step:
            pending.append(line)
        out.append(line)
    counts: dict[int, int] = {}
    for ln in out:
        k = counts[ln.step] = counts.get(ln.step, 0) + 1
        ln.name = f"step{ln.step}" + ("" if sum(x.step == ln.step for x in out) == 1 else "abcdefgh"[k - 1])
    return out


def substitute(line: Line, work: Path, job: str, capture_args: str, judge_args: str, whole_args: str = "") -> str:
    text = line.text.replace("/tmp/", f"{work}/")
    if JOB_TOKEN in text:
        whole = text.startswith("ccltune ab ") and "--in-run" not in text.split(" -- ")[0]
        extra = (whole_args or judge_args) if whole else judge_args if line.step == 8 else capture_args
        text = text.replace(JOB_TOKEN, f"{job} {extra}".strip())
    return text


def shim(work: Path) -> Path:
    """WORK/bin/ccltune: this checkout's ccltune under the Python running this script."""
    bin_dir = work / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / "ccltune"
    path.write_text(f"#!/bin/sh\nPYTHONPATH={shlex.quote(str(ROOT / 'src'))}${{PYTHONPATH:+:$PYTHONPATH}} "
                    f"exec {shlex.quote(sys.executable)} -m ccltune \"$@\"\n")
    path.chmod(0o755)
    return bin_dir


def run_line(command: str, work: Path, out: Path, limit: float, env: dict[str, str]) -> tuple[int | str, float]:
    start = time.monotonic()
    with out.open("w") as fh:
        fh.write(f"$ {command}\n")
        fh.flush()
        proc = subprocess.Popen(["bash", "-c", command], cwd=work, env=env, stdout=fh, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            rc: int | str = proc.wait(timeout=max(1.0, limit))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            rc = f"timeout {limit:.0f}s"
    return rc, time.monotonic() - start


KEY = re.compile(r"^# (workload:|wrote|search:|cost:|sweep|replay|predicted)|PASS|FAIL|WAIVED|SLOWER|FASTER|"
                 r"no difference|median step|error:|interrupted")


def last_words(path: Path, n: int = 2, width: int = 150) -> str:
    """The line's outcome: its last lines that say one (a verdict, what was written, an error), else its last."""
    text = [x.strip() for x in path.read_text(errors="replace").splitlines()[1:] if x.strip()]
    keys = [x for x in text if KEY.search(x)]
    return " | ".join(x[:width] for x in (keys or text)[-n:])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--work", required=True, type=Path)
    p.add_argument("--job", required=True, help="the launcher and script that replace 'torchrun ... train.py'")
    p.add_argument("--capture-args", default="", help="added to the job in steps 1 and 7")
    p.add_argument("--judge-args", default="", help="added to the job in step 8")
    p.add_argument("--whole-args", default="", help="added to the job in step 8's whole-run ab (default: --judge-args)")
    p.add_argument("--only", default="", help="steps to run, e.g. 1,2,3 (default: all)")
    p.add_argument("--line-timeout", type=float, default=600.0)
    p.add_argument("--budget", type=float, default=3600.0, help="seconds for the whole loop")
    p.add_argument("--dry-run", action="store_true")
    a = p.parse_args(argv)
    work = a.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    only = {int(x) for x in a.only.split(",") if x.strip()}
    todo = [ln for ln in lines() if not only or ln.step in only]
    env = {**os.environ, **NVLS_OFF, "PATH": f"{shim(work)}:{os.environ.get('PATH', '')}"}
    start = time.monotonic()
    rows = []
    for ln in todo:
        command = substitute(ln, work, a.job, a.capture_args, a.judge_args, a.whole_args)
        if a.dry_run:
            print(f"{ln.name}: {command}")
            continue
        left = a.budget - (time.monotonic() - start)
        if left < 5:
            rows.append((ln.name, "not run (budget)", 0.0, ""))
            continue
        rc, secs = run_line(command, work, work / f"{ln.name}.txt", min(a.line_timeout, left), env)
        rows.append((ln.name, str(rc), secs, last_words(work / f"{ln.name}.txt")))
        print(f"{ln.name:8s} rc={rc!s:12s} {secs:7.1f}s  {rows[-1][3]}", flush=True)
    if rows:
        print(f"\n# docs/workload.md's loop in {work}: {len(rows)} line(s), {time.monotonic() - start:.0f} s")
        print("| line | exit | seconds | what it said |\n|---|---|---|---|")
        for name, rc, secs, said in rows:
            print(f"| {name} | {rc} | {secs:.1f} | {said.replace('|', '/')} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
