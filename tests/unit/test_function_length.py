"""No function of src/ccltune over 60 lines (issue 40 item 7 split the last 8; scripts/long_functions.py
lists any): a longer one is split where a name helps."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import long_functions  # noqa: E402

LIMIT = 60


def test_no_function_is_over_the_limit():
    found = long_functions.long_functions(LIMIT)
    print(f"functions over {LIMIT} lines: {len(found)}")
    new = [f"{where}: {lines} lines" for lines, where in found]
    assert not new, f"functions over {LIMIT} lines (split them where a name helps):\n" + "\n".join(new)


def test_the_list_sees_a_long_function(tmp_path):
    (tmp_path / "m.py").write_text("class C:\n    def f(self):\n" + "        x = 1\n" * 61)
    assert long_functions.long_functions(LIMIT, tmp_path) == [(62, f"{tmp_path.name}/m.py:C.f")]
