"""``ccltune tune`` on AMD partition modes: a sweep run whose environment recorded CPX/NPS4 gets a
``platform,...,partition=CPX,nps=NPS4`` section, and the plugin's own parser (the golden harness) applies
it on a CPX/NPS4 sysfs tree and not on an SPX/NPS1 one. No AMD GPU here: the runs are stored rows."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ccltune import rules
from ccltune.cli import main
from ccltune.store import Measurement, Store
from plugin_build import REPO, run

KB = 1 << 10
SIZES = [4 * KB, 8 * KB, 16 * KB, 32 * KB]


def _sweep(db: Path, modes: dict[str, str], winner: tuple[str, str]) -> int:
    """An 8-rank all_reduce sweep on MI300X in ``modes`` where ``winner`` beats the default by 30% at every size."""
    env = {"gpus": [{"name": "AMD Instinct MI300X", "index": i} for i in range(8)], "world_size": 8,
           "platform": "AMD Instinct MI300X x8", **modes}
    algo, proto = winner
    rows = []
    for size in SIZES:
        for rep in range(3):
            jitter = 1 + 0.01 * (rep - 1)
            common = dict(collective="all_reduce", size_bytes=size, count=size // 4, dtype="float", op="sum",
                          root=None, in_place=False, n_ranks=8, rep=rep)
            rows.append(Measurement(**common, time_us=40.0 * jitter))
            rows.append(Measurement(**common, time_us=28.0 * jitter, algo=algo, proto=proto, config=f"{algo}/{proto}/-"))
    with Store(db) as st:
        rid = st.begin_run("sweep", command="ccltune sweep all_reduce", env=env)
        st.add_measurements(rid, rows)
        st.finish_run(rid, "complete")
    return rid


def _tuned(tmp_path: Path) -> tuple[Path, str]:
    db, out = tmp_path / "s.db", tmp_path / "rules.conf"
    _sweep(db, {"compute_partition": "CPX", "memory_partition": "NPS4"}, ("ring", "ll"))
    _sweep(db, {"compute_partition": "SPX", "memory_partition": "NPS1"}, ("tree", "simple"))
    assert main(["tune", "--db", str(db), "--out", str(out)]) == 0
    return out, out.read_text()


def test_tune_writes_a_section_per_partition_mode(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, text = _tuned(tmp_path)
    lines = text.splitlines()
    cpx = lines.index("platform,gpu=instinct mi300x,nvlranks=8,partition=CPX,nps=NPS4")
    spx = lines.index("platform,gpu=instinct mi300x,nvlranks=8,partition=SPX,nps=NPS1")
    assert lines[cpx + 1].startswith("allreduce,4096,32768,ring,ll,")
    assert lines[spx + 1].startswith("allreduce,4096,32768,tree,simple,")
    assert "partition=CPX nps=NPS4" in text.split("\nplatform")[0]  # the header's Platforms line names them
    assert "partition=CPX nps=NPS4" in capsys.readouterr().out  # the group table too
    ruleset = rules.load(out)
    assert not ruleset.diagnostics
    for modes, algo in ((("CPX", "NPS4"), "ring"), (("SPX", "NPS1"), "tree"), (("CPX", "NPS1"), None)):
        facts = rules.PlatformFacts(gpu="AMD Instinct MI300X", partition=modes[0], nps=modes[1])
        assert rules.match(ruleset, rules.Query("allreduce", 8 * KB, 8, 1, platform=facts)).algo == algo


def test_a_partition_the_plugin_cannot_name_is_refused_naming_the_run(tmp_path, capsys) -> None:
    db = tmp_path / "s.db"
    rid = _sweep(db, {"compute_partition": "XPX"}, ("ring", "ll"))
    assert main(["tune", "--db", str(db), "--out", str(tmp_path / "r.conf")]) == 1  # bad data: exit 1
    err = capsys.readouterr().err
    assert f"run {rid} (sweep): recorded compute_partition 'XPX' is not one of SPX" in err
    assert not (tmp_path / "r.conf").exists()


def test_the_plugin_applies_the_cpx_section_only_in_cpx(tmp_path: Path, c_build: Path, amd_cpx_root: Path) -> None:
    """The emitted file through the C parser and matcher, facts read from sysfs as under RCCL."""
    out, _ = _tuned(tmp_path)
    spx = tmp_path / "spx" / "sys/class/drm/card1/device"
    spx.mkdir(parents=True)
    for name, value in (("vendor", "0x1002"), ("product_name", "AMD Instinct MI300X"),
                        ("current_compute_partition", "SPX"), ("current_memory_partition", "NPS1")):
        (spx / name).write_text(value + "\n")
    table = " ".join(["1.0"] * 8 * 3)  # RCCL's 8 algorithms x 3 protocols, every cell available
    queries = "".join(f"allreduce {s} 8 1 1 0 8 3 {table}\n" for s in (2 * KB, 8 * KB, 32 * KB, 64 * KB))
    got = {}
    for name, root in (("cpx", amd_cpx_root), ("spx", tmp_path / "spx")):
        env = {k: v for k, v in os.environ.items() if not k.startswith("CCLTUNE_")} | {"CCLTUNE_SYSFS_ROOT": str(root)}
        proc = run([c_build / "golden", out, "1,8,8"], input=queries, env=env)
        assert proc.returncode == 0 and "diag" not in proc.stdout, proc.stdout + proc.stderr
        lines = proc.stdout.splitlines()
        assert lines[1].endswith(f"partition={name.upper()} nps={'NPS4' if name == 'cpx' else 'NPS1'}")
        got[name] = [ln.split()[1] for ln in lines[2:]]
    # 2 KB and 64 KB lie outside the measured range: no rule, NCCL's choice
    assert got == {"cpx": ["-", "ring", "ring", "-"], "spx": ["-", "tree", "tree", "-"]}


def test_a_run_records_the_partition_modes_the_plugin_reads(tmp_path: Path, c_build: Path, amd_cpx_root: Path,
                                                            monkeypatch) -> None:
    """environment.collect (every run's record) reads the modes from the same files as the plugin, in its order:
    the first card that has the file, connectors (card0-DP-1) skipped, upper-cased; None where none has it."""
    from ccltune import environment

    tree = tmp_path / "t"
    for card, part, nps in (("card0-DP-1", "DPX", "NPS2"), ("card3", "qpx", "nps2"), ("card12", "cpx", "nps4")):
        dev = tree / "sys/class/drm" / card / "device"
        dev.mkdir(parents=True)
        (dev / "current_compute_partition").write_text(part + "\n")
        (dev / "current_memory_partition").write_text(nps + "\n")
    for root, want in ((amd_cpx_root, ("CPX", "NPS4")), (tree, ("CPX", "NPS4")), (tmp_path / "none", (None, None))):
        (tmp_path / "none").mkdir(exist_ok=True)
        monkeypatch.setenv("CCLTUNE_SYSFS_ROOT", str(root))
        got = environment.amd_partitions()
        assert (got["compute_partition"], got["memory_partition"]) == want
        env = {k: v for k, v in os.environ.items() if not k.startswith("CCLTUNE_")} | {"CCLTUNE_SYSFS_ROOT": str(root)}
        line = run([c_build / "golden", REPO / "tests/fixtures/rules/basic.conf"], input="", env=env).stdout
        assert f"partition={want[0] or '?'} nps={want[1] or '?'}" in line
    monkeypatch.setenv("CCLTUNE_SYSFS_ROOT", str(amd_cpx_root))
    recorded = environment.collect(world_size=1)
    assert (recorded["compute_partition"], recorded["memory_partition"]) == ("CPX", "NPS4")
