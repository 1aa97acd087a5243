"""nccl-tests 2.19.6's option table (src/common.cu getopt_long): every flag parses in its short and
long spelling with nccl-tests' meaning, or is refused naming the engine that cannot honour it."""

from __future__ import annotations

import argparse

import pytest

from ccltune.cli import bench_options as cli_bench_options
from ccltune.commands import bench_options
from ccltune.commands.bench_options import BenchOptions
from ccltune.commands.options import from_fields
from ccltune.errors import UsageError

# (short, long, value) for every option nccl-tests 2.19.6 takes an argument for
TABLE = [("-t", "--nthreads", "1"), ("-g", "--ngpus", "1"), ("-b", "--minbytes", "1.5M"),
         ("-e", "--maxbytes", "2G"), ("-i", "--stepbytes", "1M"), ("-f", "--stepfactor", "1"),
         ("-n", "--iters", "5"), ("-m", "--agg_iters", "1"), ("-w", "--warmup_iters", "0"),
         ("-N", "--run_cycles", "1"), ("-p", "--parallel_init", "1"), ("-c", "--check", "3"),
         ("-o", "--op", "max"), ("-d", "--datatype", "half"), ("-r", "--root", "1"), ("-z", "--blocking", "0"),
         ("-y", "--stream_null", "0"), ("-G", "--cudagraph", "0"), ("-C", "--report_cputime", "0"),
         ("-S", "--report_timestamps", "1"), ("-J", "--output_file", "x.json"), ("-a", "--average", "3"),
         ("-R", "--local_register", "0"), ("-D", "--device_implementation", "0"),
         ("-V", "--device_cta_count", "16"), ("-M", "--memory", "0"), ("-u", "--unalign", "0"),
         ("-I", "--per_iter_timing", "0"), ("-K", "--per_iter_skip", "0")]


def _parse(*argv: str) -> BenchOptions:
    """bench's options from nccl-tests' flags (and --nproc, --timeout, --symmetric), as the CLI builds them."""
    p = argparse.ArgumentParser(exit_on_error=False)
    cli_bench_options.register(p)
    p.add_argument("--nproc", type=int, default=None)
    p.add_argument("--timeout", type=float, default=120.0)
    p.add_argument("--symmetric", action="store_true")
    return from_fields(BenchOptions, {"collective": ("all_reduce",), **vars(p.parse_args(list(argv)))})


def _notes(o: BenchOptions, engine: str) -> list[str]:
    return bench_options.check(o, engine)[1]


@pytest.mark.parametrize("short, long, value", TABLE)
def test_every_flag_in_both_spellings(short, long, value):
    a, b = _parse(short, value), _parse(f"{long}={value}")
    assert a == b
    bench_options.check(a, "nccl")


def test_minus_t_minus_g_map_to_processes_with_a_note():
    args, notes = bench_options.check(_parse("-g", "4", "-t", "2"), "nccl")
    assert notes == ["-t 2 -g 4: 8 processes per node, one GPU each (ccltune runs one process per GPU)"]
    assert args.nproc == 8
    args, notes = bench_options.check(_parse("-g", "1"), "gloo")
    assert notes[0].startswith("-t 1 -g 1: 1 process per node") and args.nproc is None
    with pytest.raises(UsageError, match="means 4 processes per node, but --nproc is 2"):
        bench_options.check(_parse("-g", "4", "--nproc", "2"), "nccl")


def _under_torchrun(monkeypatch, local: int, world: int) -> None:
    for k, v in {"RANK": "0", "WORLD_SIZE": str(world), "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": str(local),
                 "TORCHELASTIC_RUN_ID": "x", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}.items():
        monkeypatch.setenv(k, v)


def test_minus_g_under_a_launcher_must_match_its_processes_per_node(monkeypatch):
    """Under torchrun -g cannot start processes: -g 4 on a node of 2 would print '4 processes per node'
    over a job of 2, so it is refused; -g 2 there says what the launcher did, with the note."""
    _under_torchrun(monkeypatch, local=2, world=4)
    with pytest.raises(UsageError, match="-t 1 -g 4 means 4 processes per node, but the torchrun launcher started 2"):
        bench_options.check(_parse("-g", "4"), "gloo")
    with pytest.raises(UsageError, match="-t 2 -g 2 means 4"):
        bench_options.check(_parse("-g", "2", "-t", "2"), "gloo")
    note = "one GPU per process; the torchrun launcher started 2 per node"
    args, notes = bench_options.check(_parse("-g", "2"), "gloo")
    assert notes == [f"-t 1 -g 2: {note}"]
    assert args.nproc is None  # the launcher's job, untouched
    assert _notes(_parse("-g", "1"), "gloo") == [f"-t 1 -g 1: {note}"]  # mpirun -np N -g 1


def test_timeout_average_root_codes_and_strtol_integers():
    assert _parse("-T", "7").timeout == 7.0
    assert [bench_options.average(c) for c in "0123"] == ["rank0", "avg", "min", "max"]
    assert bench_options.root("0x2") == 2 and _parse("-n", "0x10").iters == 16


@pytest.mark.parametrize("argv, engine, needle", [
    (["-R", "2"], "gloo", "-R/--local_register 2: the gloo engine has no symmetric windows"),
    (["-R", "1"], "torch", "-R/--local_register 1: the torch engine does not own its buffers' registration"),
    (["-R", "1"], "gloo", "-R/--local_register 1: the gloo engine has no NCCL communicator"),
    (["-m", "4"], "torch", "-m/--agg_iters 4: the torch engine issues each collective on its own"),
    (["-m", "4"], "gloo", "-m/--agg_iters 4: the gloo engine has no group calls"),
    (["-m", "0"], "nccl", "-m/--agg_iters must be >= 1, got 0"),
    (["-N", "-1"], "torch", "-N/--run_cycles must be >= 0 (0: until interrupted), got -1"),
    (["-z", "1", "-G", "2"], "nccl", "-z 1 with -G 2: a stream being captured"),
    (["-y", "1"], "gloo", "-y/--stream_null 1: the gloo engine runs on the CPU"),
    (["-y", "1", "-G", "1"], "nccl", "-y 1 with -G 1: CUDA cannot capture the legacy NULL stream"),
    (["-u", "-1"], "nccl", "-u/--unalign must be >= 0 elements, got -1"),
    (["-M", "1"], "gloo", "-M/--memory 1: the gloo engine runs on the CPU"),
    (["-D", "1"], "nccl", "-D/--device_implementation 1: the nccl engine runs nccl-tests' own CUDA kernels"),
    (["-x", "1"], "torch", "-x/--cta_policy 1: the torch engine makes no communicator"),
    (["-x", "3"], "nccl", "-x/--cta_policy must be 0 (default), 1 (efficiency) or 2 (zero), got 3"),
    (["-K", "2"], "nccl", "-K/--per_iter_skip 2 needs -I 1"),
    (["-I", "1", "-K", "5", "-n", "5"], "nccl", "-K/--per_iter_skip must be between 0 and -n - 1 (4), got 5"),
    (["-c", "-1"], "nccl", "-c/--check must be >= 0"),
])
def test_what_the_engine_cannot_honour_is_refused_by_name(argv, engine, needle):
    with pytest.raises(UsageError) as ei:
        bench_options.check(_parse(*argv), engine)
    assert needle in str(ei.value)


@pytest.mark.parametrize("argv, engines", [
    (["-m", "4"], ["nccl"]), (["-z", "1"], ["nccl", "torch", "gloo"]), (["-z", "3"], ["nccl", "torch", "gloo"]),
    (["-y", "1"], ["nccl", "torch"]), (["-C", "1"], ["nccl", "torch", "gloo"]), (["-u", "3"], ["nccl", "torch", "gloo"]),
    (["-M", "1"], ["nccl", "torch"]), (["-I", "1", "-K", "2"], ["nccl", "torch", "gloo"]), (["-x", "2"], ["nccl"]),
    (["-R", "1"], ["nccl"]), (["-z", "2", "-G", "3"], ["gloo"]),  # gloo runs eagerly: -G is dropped with a note
])
def test_what_an_engine_honours_is_accepted(argv, engines):
    for engine in engines:
        assert _notes(_parse(*argv), engine) == []


def test_minus_z_3_and_minus_i_under_graphs_are_disabled_with_a_note_as_nccl_tests_does():
    args, notes = bench_options.check(_parse("-z", "3", "-I", "1", "-K", "1", "-G", "10"), "nccl")
    assert [n.split(":")[0] for n in notes] == ["-z 3 disabled", "-I 1 disabled"]
    assert (args.blocking, args.per_iter_timing, args.per_iter_skip) == (0, 0, 0)


def test_minus_r_2_is_symmetric_on_nccl():
    assert bench_options.check(_parse("-R", "2"), "nccl")[0].symmetric


@pytest.mark.parametrize("engine", ["nccl", "torch", "gloo"])
def test_parallel_groups_run_on_every_engine_and_a_bad_split_is_refused_naming_it(monkeypatch, engine):
    monkeypatch.setenv("NCCL_TESTS_SPLIT", "MOD 2")
    assert _notes(_parse(), engine) == []
    split, per_proc, note = bench_options.split(_parse("-g", "1"), 4)
    assert (split.op, split.operand, per_proc) == ("mod", 2, 1)
    assert note.startswith("NCCL_TESTS_SPLIT='MOD 2': 2 groups: 0 = ranks 0,2; 1 = ranks 1,3; each group runs")
    monkeypatch.setenv("NCCL_TESTS_SPLIT", "0x1")  # no operation: nccl-tests would quietly run one group
    with pytest.raises(UsageError, match=r"NCCL_TESTS_SPLIT='0x1': expected '<op><value>'"):
        bench_options.check(_parse(), engine)
    monkeypatch.setenv("NCCL_TESTS_SPLIT_MASK", "0xg")  # the mask wins, as nccl-tests reads it first
    with pytest.raises(UsageError, match=r"NCCL_TESTS_SPLIT_MASK='0xg': expected a hexadecimal mask"):
        bench_options.check(_parse(), engine)


def test_minus_g_splits_nccl_tests_processes_not_gpus(monkeypatch):
    """nccl-tests colors its MPI processes; with -g 2 each holds 2 of ccltune's one-GPU ranks."""
    monkeypatch.setenv("NCCL_TESTS_SPLIT", "MOD 2")
    split, per_proc, note = bench_options.split(_parse("-g", "2"), 8)
    assert per_proc == 2 and "0 = ranks 0,1,4,5; 1 = ranks 2,3,6,7" in note


def test_nccl_tests_device_offsets_the_gpu(monkeypatch):
    from ccltune.engines.base import device_index

    monkeypatch.setenv("NCCL_TESTS_DEVICE", "2")
    assert _notes(_parse(), "nccl") == ["NCCL_TESTS_DEVICE=2: local process i uses GPU 2 + i"]
    assert [device_index(i, 8) for i in range(3)] == [2, 3, 4]
    with pytest.raises(UsageError, match="NCCL_TESTS_DEVICE 2: the gloo engine runs on the CPU"):
        bench_options.check(_parse(), "gloo")
    monkeypatch.setenv("NCCL_TESTS_DEVICE", "first")
    with pytest.raises(UsageError, match="NCCL_TESTS_DEVICE must be a GPU index"):
        bench_options.check(_parse(), "nccl")
    monkeypatch.delenv("NCCL_TESTS_DEVICE")
    assert device_index(3, 8) == 3


def test_min_bw(monkeypatch):
    assert bench_options.min_bw() is None or True
    monkeypatch.setenv("NCCL_TESTS_MIN_BW", "100")
    assert bench_options.min_bw() == 100.0
    monkeypatch.setenv("NCCL_TESTS_MIN_BW", "fast")
    with pytest.raises(UsageError, match="NCCL_TESTS_MIN_BW must be a number"):
        bench_options.min_bw()


def test_all_loops_every_datatype_op_and_root_in_nccl_tests_order():
    """-d all -o all -r all: one run, each collective looping as its nccl-tests program does
    (datatypes, then ops for those that print one, then roots for rooted ones); -N repeats."""
    from ccltune import collectives, datatypes
    from ccltune.measure.bench import BenchPlan, variants

    plan = BenchPlan(collectives=[], sizes=[8], dtype=datatypes.dtype("int8"), op="sum", root=0, iters=1, warmup=0,
                     graph=0, check=2, average="avg", timeout_s=1, dtypes=datatypes.dtypes("all"),
                     ops=datatypes.ops("all"), all_roots=True, cycles=2)
    ar, bc, sr, ag = (collectives.REGISTRY[c] for c in ("all_reduce", "broadcast", "sendrecv", "all_gather"))
    got = [(v.dtype.name, v.op) for v in variants(plan, ar, 4)]
    assert len(got) == 12 * 6 and got[:7] == [("int8", o) for o in datatypes.ops("all")] + [("uint8", "sum")]
    assert [(v.dtype.name, v.root) for v in variants(plan, bc, 3)][:4] == [("int8", 0), ("int8", 1), ("int8", 2),
                                                                            ("uint8", 0)]
    assert len(variants(plan, sr, 4)) == 72 and len(variants(plan, ag, 4)) == 12  # sendrecv prints its op
    assert bench_options.root("all") is None and bench_options.root("ALL") is None


def _bench_plan(*argv: str):
    from ccltune.cli import build_parser
    from ccltune.commands.bench import plan_of

    args = from_fields(BenchOptions, vars(build_parser().parse_args(["bench", "all_reduce", *argv])))
    args, note = bench_options.ncclt_defaults(args)
    return note, plan_of(args)


def test_ncclt_defaults_fill_only_what_the_command_line_omits(monkeypatch):
    monkeypatch.delenv(bench_options.NCCLT_DEFAULTS_ENV, raising=False)
    note, plan = _bench_plan()
    assert note is None and plan.sizes[0] == 8 and plan.warmup == 5  # ccltune's own defaults
    note, plan = _bench_plan("--ncclt-defaults")
    assert (plan.sizes, plan.warmup, plan.max_bytes) == ([32 << 20], 1, 32 << 20)  # nccl-tests': one size, 32M
    assert note == "nccl-tests' defaults: -b 32M, -e 32M, -f 1, -w 1"
    # a flag given keeps its value, even one equal to ccltune's default
    monkeypatch.setenv(bench_options.NCCLT_DEFAULTS_ENV, "1")
    note, plan = _bench_plan("-b", "8M", "-w", "5", "-f", "2")
    assert (plan.sizes, plan.warmup) == ([8 << 20, 16 << 20, 32 << 20], 5)
    assert note == "nccl-tests' defaults: -e 32M"
    monkeypatch.setenv(bench_options.NCCLT_DEFAULTS_ENV, "0")
    assert _bench_plan()[0] is None
    monkeypatch.setenv(bench_options.NCCLT_DEFAULTS_ENV, "yes")
    with pytest.raises(UsageError, match="CCLTUNE_NCCLT_DEFAULTS must be 1 \\(on\\) or 0 \\(off\\), got 'yes'"):
        _bench_plan()


def test_values_nccl_tests_gives_a_meaning_are_taken_with_it():
    """-T 0: no timeout (nccl-tests' default); -N 0: until interrupted; -f by strtol, as -n and the others."""
    args = _parse("-T", "0", "-N", "0")
    assert args.timeout == bench_options.NO_TIMEOUT_S and args.run_cycles == 0
    assert _notes(args, "gloo") == [
        "-N 0: the size loop runs until interrupted (Ctrl-C keeps every row)",
        "-T 0: no time limit, as nccl-tests (a hung rank is waited for up to a year)"]
    assert _parse("-T", "0x10").timeout == 16.0 and _parse("-f", "0x4").stepfactor == 4
    assert _parse("--stepfactor=010").stepfactor == 8  # strtol base 0: a leading 0 is octal
    for flag, value in (("-f", "1.5"), ("-f", "2x"), ("-T", "1.5"), ("-T", "-1")):
        with pytest.raises(argparse.ArgumentError, match=repr(value)):
            _parse(flag, value)
    with pytest.raises(UsageError, match="-N/--run_cycles must be >= 0 \\(0: until interrupted\\), got -1"):
        bench_options.check(_parse("-N", "-1"), "gloo")


def test_rank_lines_name_the_gpu_the_engine_uses_under_nccl_tests_device(monkeypatch):
    """NCCL_TESTS_DEVICE=2, local rank 1: the engine opens GPU 3 (device_index), and so says the rank line."""
    from types import SimpleNamespace

    from ccltune.commands.bench_table import devices as _devices

    ctx = SimpleNamespace(world_size=1, rank=0, host_of=lambda r: "node")
    gpus = [{"name": f"GPU{i}", "pci_bus_id": f"0000:{i:02x}:00"} for i in range(4)]
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("NCCL_TESTS_DEVICE", "2")
    [d] = _devices(ctx, {"gpus": gpus}, "nccl")
    assert (d.device, d.bus_id, d.name) == (3, "0000:03:00", "GPU3")
    monkeypatch.delenv("NCCL_TESTS_DEVICE")
    [d] = _devices(ctx, {"gpus": gpus}, "torch")
    assert (d.device, d.name) == (1, "GPU1")
    [d] = _devices(ctx, {"gpus": []}, "gloo")
    assert (d.device, d.name, d.bus_id) == (1, "cpu", "0000:00:00")


def test_minus_j_names_a_json_file_and_never_replaces_one(tmp_path):
    """nccl-tests' classifyOutputFile (the suffix after the last '/', any case) and jsonOutputInit's
    probe: FILE, else FILE.0, FILE.1, ..."""
    assert all(bench_options.json_suffix(p) for p in ("r.json", "a/b.JSON", "x.y.json"))
    assert not any(bench_options.json_suffix(p) for p in ("r.txt", "json", "a.json/r", "r.json.", "r.jsonl"))
    with pytest.raises(UsageError, match="-J/--output_file 'r.txt': nccl-tests infers the output's type from the suffix"):
        bench_options.check(_parse("-J", "r.txt"), "gloo")
    f = tmp_path / "r.json"
    assert bench_options.free_path(str(f)) == str(f)
    f.write_text("{}")
    assert bench_options.free_path(str(f)) == f"{f}.0"
    (tmp_path / "r.json.0").write_text("{}")
    assert bench_options.free_path(str(f)) == f"{f}.1"
