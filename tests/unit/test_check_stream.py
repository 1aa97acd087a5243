"""The checked call of a point runs on the stream its inputs were filled on.

Found on 2 x H200 (2026-11-28, `bench all_reduce -G 10 --warmup-mode nccl-tests`): the fill ran on
torch's current stream and the checked graph replayed on the engine's own stream, so the in-place
all_reduce of 128 MB and 512 MB read half-written inputs (#wrong 1.2e7 and 1.1e8). CUDA streams do not
run here; this records, for each step of the check, whether it ran inside the engine's stream context.
"""
from __future__ import annotations

import contextlib
from types import SimpleNamespace

import pytest

from ccltune.measure import point


class _Engine:
    supports_graph = True

    def __init__(self) -> None:
        self.torch = None
        self.ctx = SimpleNamespace(comm_rank=0, comm_size=2)
        self.inside = 0
        self.log: list[tuple[str, bool]] = []

    @contextlib.contextmanager
    def stream_context(self):
        self.inside += 1
        try:
            yield
        finally:
            self.inside -= 1

    def _note(self, what: str) -> None:
        self.log.append((what, self.inside > 0))

    def capture(self, pt, bufs, calls, *, step=True):
        self._note("capture")
        eng = self
        return SimpleNamespace(replay=lambda: eng._note("replay"))

    def launch(self, pt, bufs):
        self._note("launch")

    def sync(self):
        self._note("sync")


@pytest.mark.parametrize("graph", [True, False])
def test_fill_call_and_wait_share_the_engines_stream(monkeypatch, graph):
    eng = _Engine()
    monkeypatch.setattr(point.buffers, "fill", lambda *a, **k: eng._note("fill"))
    monkeypatch.setattr(point.buffers, "count_wrong", lambda *a, **k: (eng._note("count"), 0)[1])
    monkeypatch.setattr(point, "close_graph", lambda g: None)
    pt = SimpleNamespace(ncclt=True, graph=10 if graph else 0, lay=SimpleNamespace(count=4), coll=None, op="sum",
                         dt=None, root=0)
    assert point._check(eng, pt, object()) == (0.0, 0.0)
    steps = [w for w, _ in eng.log]
    assert steps[0] == "fill" and steps[-1] == "count"
    assert ("replay" in steps) == graph and ("launch" in steps) != graph
    # everything up to the last wait runs in the stream context; counting reads after that wait
    assert all(inside for w, inside in eng.log if w != "count"), eng.log
