"""RCCL vs NCCL detection and the RCCL sweep rules (engines/library.py), against fake libraries
built here that answer as RCCL and NCCL would.

The fake exports the NCCL API symbols NcclLib binds (ncclGetVersion ... ncclGetLastError) with
the meanings of RCCL's public header (ROCm/rccl src/nccl.h.in, RCCL 2.21.5, commit 0cbce2a7):
ncclGetVersion returns NCCL_VERSION_CODE (22105: RCCL reports the NCCL version it is based on),
and the RCCL build also exports mscclLoadAlgo. Like RCCL's RCCL_PARAM (src/include/param.h) it
reads RCCL_LL128_FORCE_ENABLE once, at the first communicator, and every communicator keeps that
cached value; ``fake_ll128`` reports what a communicator got.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ccltune.commconfig import CommConfig
from ccltune.engines import library
from ccltune.engines.nccl import _env
from ccltune.engines.nccl_lib import NcclLib
from ccltune.errors import EngineUnavailable, UsageError

FAKE = r"""
#include <stdlib.h>
#include <string.h>
typedef struct { char internal[128]; } ncclUniqueId;
typedef struct { int ll128; } fakeComm;
static long cached = -2;  /* RCCL_PARAM: read once per process */
static int init(void** comm) {
  if (cached == -2) { const char* v = getenv("RCCL_LL128_FORCE_ENABLE"); cached = v ? atol(v) : 0; }
  fakeComm* c = malloc(sizeof *c);
  if (!c) return 2;
  c->ll128 = (int)cached;
  *comm = c;
  return 0;
}
int ncclGetVersion(int* v) { *v = 22105; return 0; }
int ncclGetUniqueId(ncclUniqueId* id) { memset(id, 7, sizeof *id); return 0; }
int ncclCommInitRank(void** comm, int n, ncclUniqueId id, int rank) { (void)n; (void)id; (void)rank; return init(comm); }
int ncclCommInitRankConfig(void** comm, int n, ncclUniqueId id, int rank, void* cfg) {
  (void)n; (void)id; (void)rank; (void)cfg; return init(comm); }
int ncclCommDestroy(void* comm) { free(comm); return 0; }
int ncclCommAbort(void* comm) { free(comm); return 0; }
int ncclCommGetAsyncError(void* comm, int* e) { (void)comm; *e = 0; return 0; }
const char* ncclGetErrorString(int r) { return r ? "unhandled system error" : "no error"; }
const char* ncclGetLastError(void* comm) { (void)comm; return ""; }
int fake_ll128(void* comm) { return ((fakeComm*)comm)->ll128; }
#ifdef RCCL
int mscclLoadAlgo(const char* path, void* handle, int rank) { (void)path; (void)handle; (void)rank; return 0; }
#endif
"""


# RCCL 2.21.5 lets RCCL_LL128_FORCE_ENABLE turn LL128 on only on gfx90a (src/graph/tuning.cc at 0cbce2a7):
# the tests of that mechanism run as on an MI250X; test_ll128_on_2_21_elsewhere_is_refused covers the rest
GFX90A = "gfx90a:sramecc+:xnack-"


def _build(tmp: Path, name: str, rccl: bool) -> str:
    if shutil.which("gcc") is None:
        pytest.skip("gcc is needed to build the fake library")
    src = tmp / "fake.c"
    src.write_text(FAKE)
    out = tmp / name
    cmd = ["gcc", "-shared", "-fPIC", "-o", str(out), str(src)] + (["-DRCCL"] if rccl else [])
    subprocess.run(cmd, check=True, capture_output=True)
    return str(out)


@pytest.fixture()
def rccl(tmp_path: Path) -> NcclLib:
    return NcclLib(_build(tmp_path, "libfake-ccl.so", rccl=True))  # detected by its symbol, not its name


def test_detects_rccl_by_symbol(rccl: NcclLib) -> None:
    facts = library.facts_of(rccl, GFX90A)
    assert (facts.kind, facts.version, facts.name) == ("rccl", "2.21.5", "RCCL 2.21.5")
    assert facts.proto_env == {"ll128": {"RCCL_LL128_FORCE_ENABLE": "1"}}


def test_nccl_and_rccl_by_file_name(tmp_path: Path) -> None:
    nccl = NcclLib(_build(tmp_path, "libnccl.so.2", rccl=False))
    assert library.facts_of(nccl).kind == "nccl"
    assert library.detect("/opt/rocm/lib/librccl.so.1", lambda s: False, "2.22.3").kind == "rccl"


def test_candidates_from_the_library() -> None:
    rccl = library.detect("librccl.so", lambda s: False, "2.21.5")
    nccl = library.detect("libnccl.so.2", lambda s: False, "2.28.9")
    ok = [CommConfig(), CommConfig("ring", "ll128"), CommConfig("tree", "ll", 8), CommConfig("pat", "simple")]
    assert library.sweep_candidates(rccl, ok) == ok
    nvls = [*ok, CommConfig("nvls", "simple")]
    assert library.sweep_candidates(nccl, nvls) == nvls
    with pytest.raises(UsageError, match=r"--algos nvls: RCCL 2.21.5 cannot run it \(nvls: NVLS needs NVIDIA "
                                         r"NVSwitch.*\); sweep tree,ring,pat"):
        library.sweep_candidates(rccl, nvls)
    with pytest.raises(UsageError, match=r"^--algos collnet_direct,nvls_tree: RCCL 2.21.5 cannot run them "
                                         r"\(collnet_direct: CollNet.*; nvls_tree: NVLSTree .*\); sweep tree,ring,pat$"):
        library.sweep_candidates(rccl, [*ok, CommConfig("nvlstree", "simple"), CommConfig("collnetdirect", "ll")])


def _comm(lib: NcclLib, env: library.CommEnv, proto: str | None) -> int:
    label = f"ring/{proto}/default" if proto else "default"
    with _env(NCCL_PROTO=proto, **env.for_comm(proto, label)):
        comm = lib.comm_init(2, lib.unique_id(), 0, lib.config())
    try:
        return lib.lib.fake_ll128(comm)
    finally:
        lib.call("ncclCommDestroy", comm)


def test_ll128_candidate_sets_force_enable_for_its_communicator(rccl: NcclLib, monkeypatch) -> None:
    monkeypatch.delenv("RCCL_LL128_FORCE_ENABLE", raising=False)
    env = library.CommEnv(library.facts_of(rccl, GFX90A))
    assert _comm(rccl, env, "ll128") == 1  # set around its init only
    assert "RCCL_LL128_FORCE_ENABLE" not in os.environ


def test_rccl_cache_refuses_a_later_ll128_communicator(rccl: NcclLib, monkeypatch) -> None:
    monkeypatch.delenv("RCCL_LL128_FORCE_ENABLE", raising=False)
    env = library.CommEnv(library.facts_of(rccl, GFX90A))
    assert _comm(rccl, env, None) == 0  # NCCL's default first: RCCL caches "unset"
    with pytest.raises(EngineUnavailable, match=r"ring/ll128/default needs RCCL_LL128_FORCE_ENABLE=1, but RCCL "
                                                r"2.21.5 read RCCL_LL128_FORCE_ENABLE once, at this process's "
                                                r"first communicator \(RCCL_LL128_FORCE_ENABLE=\(unset\)\)"):
        env.for_comm("ll128", "ring/ll128/default")
    assert _comm(rccl, env, "simple") == 0


def test_force_enable_for_the_whole_run(rccl: NcclLib, monkeypatch) -> None:
    monkeypatch.setenv("RCCL_LL128_FORCE_ENABLE", "1")
    env = library.CommEnv(library.facts_of(rccl, GFX90A))
    assert [_comm(rccl, env, p) for p in (None, "ll128", "ll")] == [1, 1, 1]


def test_nccl_needs_no_extra_environment(tmp_path: Path) -> None:
    nccl = NcclLib(_build(tmp_path, "libnccl.so.2", rccl=False))
    env = library.CommEnv(library.facts_of(nccl))
    assert env.for_comm("ll128", "ring/ll128/default") == {} == env.for_comm(None, "default")
    assert isinstance(nccl.lib.fake_ll128, ctypes._CFuncPtr)


def _grid(protos: str) -> list[CommConfig]:
    from ccltune.commands.sweep import candidates
    from ccltune.commands.sweep_options import SweepOptions

    return candidates(SweepOptions(algos="tree,ring", protos=protos, channels="8,16", grid="full"))


def test_deferred_are_exactly_the_candidates_the_fake_rccl_refuses_after_the_default(rccl, monkeypatch) -> None:
    """What the sweep announces up front is what happens: NCCL's default made first caches 'unset', and every
    candidate library.deferred names (and no other) is then refused, the rest get their communicator."""
    monkeypatch.delenv("RCCL_LL128_FORCE_ENABLE", raising=False)
    facts = library.facts_of(rccl, GFX90A)
    cands = _grid("ll,ll128,simple")
    d = library.deferred(facts, cands)
    assert d is not None and dict(d.env) == {"RCCL_LL128_FORCE_ENABLE": "1"}
    assert dict(d.first) == {"RCCL_LL128_FORCE_ENABLE": None} and d.library == "RCCL 2.21.5"
    assert [c.label for c in d.candidates][:2] == ["tree/ll128/default", "ring/ll128/default"]
    env, refused = library.CommEnv(facts), []
    for c in cands:
        try:
            assert _comm(rccl, env, c.proto) == 0
        except EngineUnavailable:
            refused.append(c)
    assert refused == list(d.candidates) and len(refused) == 2 + 2 * 2  # 2 pairs, 2 pairs x 2 channel counts


def test_nothing_deferred_when_the_run_starts_forced_or_without_ll128_or_on_nccl(rccl, monkeypatch) -> None:
    facts = library.facts_of(rccl, GFX90A)
    assert library.deferred(facts, _grid("ll,simple"), environ={}) is None
    assert library.deferred(facts, _grid("ll128,simple"), environ={"RCCL_LL128_FORCE_ENABLE": "1"}) is None
    nccl = library.detect("libnccl.so.2", lambda s: False, "2.28.9")
    assert library.deferred(nccl, _grid("ll128"), environ={}) is None and library.deferred(None, _grid("ll128")) is None
    monkeypatch.setenv("RCCL_LL128_FORCE_ENABLE", "1")  # the follow-up run: every communicator gets LL128
    assert library.deferred(facts, _grid("ll128")) is None
    env = library.CommEnv(facts)
    assert [_comm(rccl, env, c.proto) for c in _grid("ll128")[:4]] == [1, 1, 1, 1]


def test_the_sweep_says_up_front_which_command_measures_them() -> None:
    from ccltune.commands.sweep import deferred_lines, follow_up_command

    facts = library.detect("librccl.so.1", lambda s: False, "2.21.5", GFX90A)
    d = library.deferred(facts, _grid("ll,ll128,simple"), environ={})
    argv = ["sweep", "all_reduce", "-b", "8", "-e", "1G", "--protos", "ll,ll128,simple", "--nproc", "8",
            "--resume", "3", "--db", "my runs.db"]
    cmd = "RCCL_LL128_FORCE_ENABLE=1 ccltune sweep all_reduce -b 8 -e 1G --nproc 8 --db 'my runs.db' --protos ll128"
    assert follow_up_command(d, argv) == cmd
    assert follow_up_command(d, ["sweep", "--protos=ll128,simple", "--resume=2"]) == \
        "RCCL_LL128_FORCE_ENABLE=1 ccltune sweep --protos ll128"
    lines = deferred_lines(d, argv)
    assert lines[0].startswith("# RCCL 2.21.5 reads RCCL_LL128_FORCE_ENABLE once per process, at its first "
                               "communicator (NCCL's default, made with RCCL_LL128_FORCE_ENABLE unset), so 6 "
                               "candidates (tree/ll128/default, ring/ll128/default, tree/ll128/8, tree/ll128/16 "
                               "and 2 more) are recorded unavailable in this run.")
    assert lines[-1] == f"#   {cmd}"


def test_the_sweep_announces_them_on_rank_0_before_measuring(monkeypatch) -> None:
    from ccltune.tune import sweep_run

    monkeypatch.delenv("RCCL_LL128_FORCE_ENABLE", raising=False)
    facts = library.detect("librccl.so.1", lambda s: False, "2.21.5", GFX90A)
    said: list[library.Deferred] = []
    plan = sweep_run.SweepPlan([], [8], _grid("ll128,simple"), None, on_deferred=said.append)
    found = sweep_run.fit_candidates(plan, facts, is_root=True)
    assert said == [found] and len(found.candidates) == 6 and plan.candidates == _grid("ll128,simple")
    assert sweep_run.fit_candidates(plan, facts, is_root=False) == found and len(said) == 1  # rank 0 only
    with pytest.raises(UsageError, match="--algos nvls"):
        sweep_run.fit_candidates(sweep_run.SweepPlan([], [8], [CommConfig("nvls", "simple")], None),
                                 facts, is_root=True)


def test_ll128_on_2_21_elsewhere_is_refused(rccl: NcclLib, monkeypatch) -> None:
    """RCCL 2.21.5 on an MI300X (gfx942), or on a GPU it cannot name: forcing LL128 changes nothing, so an
    LL128 candidate is refused with the reason (recorded unavailable), never run as another protocol.
    From 2.22 (ROCm/rocm-systems @03a89144) RCCL_LL128_FORCE_ENABLE turns it on there too."""
    monkeypatch.delenv("RCCL_LL128_FORCE_ENABLE", raising=False)
    for arch in ("gfx942:sramecc+:xnack-", None):
        facts = library.facts_of(rccl, arch)
        assert "ll128" in facts.proto_unavailable and facts.proto_env == {}
        assert library.deferred(facts, _grid("ll128,simple"), environ={}) is None
        env = library.CommEnv(facts)
        assert _comm(rccl, env, None) == 0 and _comm(rccl, env, "simple") == 0
        with pytest.raises(EngineUnavailable, match=r"ring/ll128/default: RCCL 2.21.5 enables LL128 only on gfx90a "
                                                     r"\(src/graph/tuning.cc\), not on (gfx942|this GPU)"):
            _comm(rccl, env, "ll128")
    newer = library.detect("librccl.so.1", lambda s: False, "2.22.3", "gfx942:sramecc+:xnack-")
    assert newer.proto_env == {"ll128": {"RCCL_LL128_FORCE_ENABLE": "1"}} and not newer.proto_unavailable
