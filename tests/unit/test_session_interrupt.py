"""A run interrupted (Ctrl-C, a launcher's SIGTERM) reads `interrupted` in its database before the
engine is torn down: srun's second Ctrl-C or a launcher's last SIGKILL can end the process during the
teardown, which used to leave the run `running` (later shown as abandoned). One process, the real
gloo engine and SQLite file."""

from __future__ import annotations

import pytest

from ccltune.engines.base import EngineOptions
from ccltune.measure import session
from ccltune.store import Store


def test_interrupt_stores_the_status_before_the_teardown(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(k, raising=False)
    db = tmp_path / "s.db"
    seen: list[str] = []
    teardown = session.Session._teardown_engine

    def watched(self: session.Session) -> None:
        with Store(str(db), readonly=True) as st:  # what another process would read if this one died now
            seen.append(st.run(self.run_id).status)
        teardown(self)

    monkeypatch.setattr(session.Session, "_teardown_engine", watched)
    with session.Session("bench", "gloo", db=str(db), argv=["bench", "all_reduce"], timeout_s=30.0) as s:
        s.start_engine(EngineOptions())
        s.begin({}, {"engine": "gloo"})
        s.summary = lambda: {"rows": 0}
        with s.running(lambda: "interrupted; 0 rows kept"):
            raise KeyboardInterrupt
    assert seen == ["interrupted"]  # was "running"
    assert s.exit_code == 130
    with Store(str(db), readonly=True) as st:
        assert st.runs("bench")[0].status == "interrupted"
