"""Issue 41, item 4: `check --from-json` checks what it gates on: results correct (#wrong 0), the figures
consistent with each other (time_us, algbw and busbw of one record), the ranks the same (records and
environment). A bench JSON as `ccltune bench --json` writes it: an all_reduce on 4 ranks (bus factor 1.5)."""

from __future__ import annotations

import json

from ccltune.cli import main

M = 1 << 20


def _records(n_ranks: int = 4, **change) -> list[dict]:
    out = []
    for size, busbw in ((64 * M, 300.0), (128 * M, 320.0), (256 * M, 335.0), (512 * M, 346.0), (1024 * M, 350.0)):
        algbw = busbw / 1.5
        out.append({"collective": "all_reduce", "size_bytes": size, "in_place": True, "busbw_gbps": busbw,
                    "algbw_gbps": algbw, "time_us": size / algbw / 1e3, "n_ranks": n_ranks, "graph": 0,
                    "status": "ok", "wrong": 0, **change})
    return out


def _check(tmp_path, capsys, records, world_size=4) -> tuple[int, str]:
    src = tmp_path / "bench.json"
    env = {"world_size": world_size, "engine": "nccl", "launcher": "torchrun", "platform": "NVIDIA H200 x4"}
    src.write_text(json.dumps({"env": env, "records": records}))
    rc = main(["check", "--profile", "h200-4", "--from-json", str(src), "--db", str(tmp_path / "r.db")])
    got = capsys.readouterr()
    return rc, got.out + got.err


class TestCheckGatesOnConsistentData:
    def test_the_good_file_passes(self, tmp_path, capsys):
        assert _check(tmp_path, capsys, _records())[0] == 0

    def test_wrong_results_with_status_ok_fail(self, tmp_path, capsys):
        rc, text = _check(tmp_path, capsys, _records(wrong=12))
        assert rc == 1 and "results_correct" in text and "#wrong 12" in text

    def test_a_time_1000x_what_the_busbw_implies_is_refused(self, tmp_path, capsys):
        recs = _records()
        recs[3]["time_us"] *= 1000
        rc, text = _check(tmp_path, capsys, recs)
        assert rc == 2 and "records[3].algbw_gbps" in text and "contradict" in text and "Traceback" not in text

    def test_records_of_2_ranks_under_an_environment_of_4_are_refused(self, tmp_path, capsys):
        rc, text = _check(tmp_path, capsys, _records(n_ranks=2))
        assert rc == 2 and "records[0].n_ranks is 2 but env.world_size is 4" in text

    def test_records_of_two_rank_counts_are_refused(self, tmp_path, capsys):
        recs = _records()
        recs[1]["n_ranks"] = 8
        rc, text = _check(tmp_path, capsys, recs, world_size=None)
        assert rc == 2 and "4, 8 ranks" in text
