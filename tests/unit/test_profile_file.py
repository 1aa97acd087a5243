"""The profiler-file reader (workload/profile_file.py) on real files the plugin wrote (profile-ddp-2: a 2-rank
DDP job; profile-harness/v5: its C harness's Send), the hand-written files only for an entry never timed (no
real file has one; tests/fixtures/workload/README.md), bad files made from them, and a seeded fuzz of the reader."""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest

from ccltune.errors import UsageError
from ccltune.workload import profile_file

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "workload"
DIR = FIX / "profile-ddp-2"
RANK0 = next(DIR.glob("ccltune-profile.vm.24508.*.0.txt"))
P2P = next((FIX / "profile-harness" / "v5").glob("*.txt"))     # the plugin's own output, driven by its harness
UNTIMED = next((FIX / "profile").glob("*.0.txt"))                # hand-written: an entry with no timed call


def test_reads_a_file_and_names_things_as_ccltune_does():
    f = profile_file.read(RANK0)
    assert (f.host, f.pid, f.comm, f.rank, f.nranks, f.nnodes, f.abi, f.every) == \
        ("vm", 24508, "0dc2473c45c1f942", 0, 2, 1, 5, 1)
    assert f.timing == "gpu-kernel-channels" and f.complete and not f.warnings
    assert [e.op for e in f.entries] == ["all_gather", "broadcast", "broadcast", "all_reduce", "broadcast", "broadcast",
                                         *["all_reduce"] * 5]
    ag, ar = f.entries[0], f.entries[6]
    assert (ag.kind, ag.count, ag.datatype, ag.algo, ag.proto, ag.nchannels, ag.nwarps, ag.peer) == \
        ("coll", 8, "int8", "RING", "LL", 1, 3, None)
    assert (ar.count, ar.datatype, ar.proto, ar.nchannels) == (32768000, "float", "SIMPLE", 24)
    assert ar.calls == ar.timed == 7 and ar.p10_us <= ar.p50_us <= ar.p90_us <= ar.max_us
    assert ar.sum_us == pytest.approx(11226.336)
    assert len(f.calls) == 41 and f.calls[0][1] == 0 and all(end >= start for _, _, start, end in f.calls)
    assert (f.dropped_entries, f.dropped_calls) == (0, 0)


def test_reads_a_send_and_an_entry_never_timed():
    send = next(e for e in profile_file.read(P2P).entries if e.kind == "p2p")
    assert (send.op, send.peer, send.algo, send.nwarps, send.calls, send.timed) == ("send", 3, None, None, 3, 3)
    rs = profile_file.read(UNTIMED).entries[4]
    assert rs.op == "reduce_scatter" and rs.timed == 0 and rs.sum_us is None and rs.p50_us is None


def test_read_dir_reads_every_rank_in_name_order(tmp_path):
    files = profile_file.read_dir(DIR)
    assert [f.rank for f in files] == [0, 1] and {f.comm for f in files} == {"0dc2473c45c1f942"}
    with pytest.raises(UsageError, match="no ccltune-profile"):
        profile_file.read_dir(tmp_path)


def test_unknown_names_are_kept_not_guessed():
    text = RANK0.read_text().replace("coll AllGather 8 ncclInt8", "coll AllToAllV 8 ncclFoo16")
    e = profile_file.parse(text.encode(), "x.txt").entries[0]
    assert (e.op, e.datatype) == ("nccl:AllToAllV", "nccl:ncclFoo16")


def test_a_cut_file_is_refused_when_strict_and_read_with_a_warning_otherwise():
    text = RANK0.read_text()
    cut = text[:text.index("call 5 ")] + "call 5 10 17957"   # the writer stopped mid-line
    with pytest.raises(UsageError, match=r"x.txt:\d+: the file ends without '# end'"):
        profile_file.parse(cut.encode(), "x.txt", strict=True)
    f = profile_file.parse(cut.encode(), "x.txt")
    assert not f.complete and len(f.calls) == 10 and "cut short" in f.warnings[0] and "dropped" in f.warnings[0]


@pytest.mark.parametrize("file,old,new,why", [
    (RANK0, "# ccltune-profile 1", "# ccltune-profile 3", "version '3'"),
    (RANK0, "comm 0dc2473c45c1f942", "comm 0DC2473C45C1F942", "16 lower-case hex"),
    (RANK0, "rank 0 nranks 2", "rank 2 nranks 2", r"rank '2' is not an integer in \[0, 1\]"),
    (RANK0, "- 1 1 3.872", "- 1 2 3.872", "timed '2'"),
    (RANK0, "3.872 3.872 3.872 3.872 3.872", "3.872 5.000 3.872 3.872 3.872", "percentiles out of order"),
    (RANK0, "call 1 2 ", "call 1 17 ", r"entry '17' is not an integer in \[0, 10\]"),
    (RANK0, "# dropped entries 0 calls 0", "# dropped entries x calls 0", "dropped entries 'x'"),
    (RANK0, "# end", "# end\ncall 1 0 1 2", "text after '# end'"),
    (RANK0, "ncclInt8 RING LL 1 ", "ncclInt8 RING LL " + "9" * 30 + " ", "nchannels"),
    (RANK0, "# timing gpu-kernel-channels", "# timing cpu", "expected '# timing"),
    (P2P, "p2p Send 1048576 ncclInt8 - - 1 - 3", "p2p Send 1048576 ncclInt8 - - 1 - 5", "peer '5'"),
    (UNTIMED, "SIMPLE 24 16 - 3 0 - - - - -", "SIMPLE 24 16 - 3 0 - - 1.0 - -", "no timed call"),
])
def test_bad_values_name_the_file_line_and_value(file, old, new, why):
    text = file.read_text()
    assert old in text
    differ = next(k for k, (a, b) in enumerate(zip(old + "\0", new)) if a != b)   # the line the change is on
    line = text[:text.index(old)].count("\n") + new[:differ + 1].count("\n") + 1
    with pytest.raises(UsageError, match=rf"^x.txt:{line}: .*{why}"):
        profile_file.parse(text.replace(old, new, 1).encode(), "x.txt")


def test_bounds_line_length_and_bytes():
    text = RANK0.read_text().replace("# timing gpu-kernel-channels\n",
                                     "# timing gpu-kernel-channels\n# " + "x" * (profile_file.MAX_LINE_CHARS + 1) + "\n", 1)
    with pytest.raises(UsageError, match="x.txt:4: a line of"):
        profile_file.parse(text.encode(), "x.txt")
    with pytest.raises(UsageError, match="x.txt:2: byte 0xff is not ASCII"):
        profile_file.parse(RANK0.read_bytes().replace(b"host vm", b"host v\xffm", 1), "x.txt")


def _mutate(rng: random.Random, raw: bytes) -> bytes:
    lines = raw.split(b"\n")
    pick = rng.randrange(8)
    i = rng.randrange(len(lines))
    if pick == 0:      # flip a byte
        b = bytearray(raw)
        j = rng.randrange(len(b))
        b[j] = rng.randrange(256)
        return bytes(b)
    if pick == 1:      # drop a line
        del lines[i]
    elif pick == 2:    # repeat a line
        lines.insert(i, lines[rng.randrange(len(lines))])
    elif pick == 3:    # cut the file
        return raw[:rng.randrange(len(raw))]
    elif pick == 4:    # replace a token by an extreme value
        toks = lines[i].split(b" ")
        toks[rng.randrange(len(toks))] = rng.choice([b"-", b"", b"-1", b"1e309", b"9" * 25, b"nan", b"0x10", b"\t"])
        lines[i] = b" ".join(toks)
    elif pick == 5:    # swap two lines
        j = rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    elif pick == 6:    # drop a token
        toks = lines[i].split(b" ")
        del toks[rng.randrange(len(toks))]
        lines[i] = b" ".join(toks)
    else:              # CRLF endings
        return raw.replace(b"\n", b"\r\n")
    return b"\n".join(lines)


# the seeds: real files the plugin wrote in real jobs and in its harness, and the hand-written one (README there)
SEEDS = [RANK0, P2P, UNTIMED, *sorted(FIX.glob("profile-ddp-4/*.0.txt")), *sorted(FIX.glob("profile-ddp-tree-4/*.3.txt"))]


def _holds_its_bounds(f: profile_file.ProfileFile) -> None:
    """What a caller may rely on in any file the reader accepts."""
    assert len(f.entries) <= profile_file.MAX_ENTRIES and len(f.calls) <= profile_file.MAX_CALL_LINES
    for e in f.entries:
        assert e.timed <= e.calls and (e.nchannels is None or e.nchannels <= profile_file.MAX_CHANNELS)
        if e.timed:
            assert e.p10_us <= e.p50_us <= e.p90_us
    for _, entry, start, end in f.calls:
        assert 0 <= entry < len(f.entries) and start <= end


def test_fuzz_every_mutation_is_a_result_or_a_usage_error():
    """The reader's fuzz target. The reader is Python, so clang's libFuzzer does not apply, and atheris
    (Python's coverage-guided fuzzer) is not a dependency here: this is a seeded, time-bounded mutational
    fuzz instead. Random mutations (1-3 each) of a valid file (the seeds above); the reader returns a
    ProfileFile that holds its documented bounds or raises UsageError naming the file, nothing else,
    each in well under a second."""
    rng = random.Random(20261126)
    seeds = [p.read_bytes() for p in SEEDS]
    assert len(seeds) == 5
    deadline = time.monotonic() + 3.0
    outcomes = {"ok": 0, "error": 0}
    n = 0
    while n < 3000 and time.monotonic() < deadline:
        data = seeds[n % len(seeds)]
        for _ in range(rng.randint(1, 3)):
            data = _mutate(rng, data)
        for strict in (False, True):
            t = time.monotonic()
            try:
                f = profile_file.parse(data, "fz.txt", strict)
                assert isinstance(f, profile_file.ProfileFile)
                _holds_its_bounds(f)
                outcomes["ok"] += 1
            except UsageError as exc:
                assert str(exc).startswith("fz.txt"), str(exc)
                outcomes["error"] += 1
            assert time.monotonic() - t < 1.0
        n += 1
    assert n >= 200 and outcomes["ok"] and outcomes["error"]


HARNESS = DIR.parent / "profile-harness"


def test_reads_what_the_plugin_writes_for_every_abi():
    """The writer's own output (branch prof's plugin driven by its C harness, README): ABI v5 with GPU
    times, ABI v1 with host times and no rank or node count ('-')."""
    (v5,) = profile_file.read_dir(HARNESS / "v5")
    assert (v5.abi, v5.nranks, v5.nnodes, v5.timing, v5.complete) == (5, 4, 1, "gpu-kernel-channels", True)
    assert [(e.kind, e.op, e.datatype) for e in v5.entries] == [("coll", "all_reduce", "bfloat16"),
                                                                ("p2p", "send", "int8")]
    assert len(v5.calls) == 13 and v5.entries[0].p50_us is not None
    (v1,) = profile_file.read_dir(HARNESS / "v1")
    assert (v1.abi, v1.nranks, v1.nnodes, v1.timing) == (1, None, None, "host")
    assert v1.timing_note.startswith("ABI v1 has no GPU timer")


ARMS = HARNESS / "arms_steps"


def test_reads_format_2_with_the_arm_of_every_call():
    """Format 2 as the plugin writes it (its C harness, case arms_steps, with the stub tuner's arm share):
    the arms' sums and each call line's arm; a format 1 file reads as arm -1 throughout."""
    (f,) = profile_file.read_dir(ARMS, strict=True)
    assert (f.version, f.arm_source, f.dropped_arms) == (2, "tuner", 0)
    assert f.arm_sums == (profile_file.ArmSum(0, 72, 72, 7200.0, 0), profile_file.ArmSum(1, 48, 48, 5760.0, 0),
                          profile_file.ArmSum(2, 48, 48, 4320.0, 0))
    assert len(f.call_arms) == len(f.calls) == 168 and f.call_arms[:12] == (0,) * 12 and f.call_arms[-1] == 1
    (v5,) = profile_file.read_dir(HARNESS / "v5")
    assert v5.version == 1 and set(v5.call_arms) == {-1} and len(v5.call_arms) == len(v5.calls)
    assert v5.arm_sums == (profile_file.ArmSum(-1, 13, 13, 1471.0, None),) and v5.arm_source == "none"


@pytest.mark.parametrize("old,new,why", [
    ("# arms tuner", "# arms maybe", "expected '# arms <tuner|none>"),
    ("arm 1 48 48 5760.000 0", "arm 64 48 48 5760.000 0", "a sum of arm 64: the writer sums arms -1..63"),
    ("arm 1 48 48 5760.000 0", "arm 1 48 49 5760.000 0", "timed '49'"),
    ("arm 1 48 48 5760.000 0", "arm 1 48 40 5760.000 9", "no_entry '9'"),
    ("arm 1 48 48 5760.000 0", "arm 0 48 48 5760.000 0", "a second sum of arm 0"),
    ("call 0 0 0 ", "call 0 0 -2 ", "arm '-2' is not -1"),
    ("call 0 0 0 ", "call 0 0 ", "expected 'call <seq> <entry> <arm> <start_ns> <end_ns>'"),
    ("# dropped entries 0 calls 0 arms 0", "# dropped entries 0 calls 0", "arms <A>"),
    ("# sums arm calls timed sum_us no_entry\n", "", "an entry line has 16 fields .* 'arm 0 72"),
    ("# calls seq entry arm start_ns end_ns", "# calls seq entry start_ns end_ns", "expected 'arm <arm>"),
])
def test_bad_format_2_values_are_named(old, new, why):
    (path,) = ARMS.glob("*.txt")
    text = path.read_text()
    assert old in text
    with pytest.raises(UsageError, match=rf"^x.txt:\d+: .*{why}"):
        profile_file.parse(text.replace(old, new, 1).encode(), "x.txt")
