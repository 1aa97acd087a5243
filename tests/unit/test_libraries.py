"""ccltune.libraries.find: a built C library is found wherever an install put it.

The layouts are built by hand in a temporary folder, as pip and scikit-build-core write
them (RECORD, direct_url.json); tests/plugin/test_editable_install.py does a real
`pip install -e .` (slow)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ccltune import libraries
from ccltune.errors import EngineUnavailable

LIB = "libexample.so"


def _checkout(root: Path) -> Path:
    pkg = root / "src" / "ccltune"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    return pkg


def _dist(site: Path, files: list[str], editable_of: Path | None = None) -> None:
    """A ccltune distribution installed into ``site``: its files, RECORD and direct_url.json."""
    info = site / "ccltune-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ccltune\nVersion: 0.1.0\n")
    for f in files:
        (site / f).parent.mkdir(parents=True, exist_ok=True)
        (site / f).write_bytes(b"\x7fELF")
    record = [*files, "ccltune-0.1.0.dist-info/METADATA", "ccltune-0.1.0.dist-info/RECORD"]
    if editable_of is not None:
        (info / "direct_url.json").write_text(json.dumps({"dir_info": {"editable": True},
                                                          "url": editable_of.as_uri()}))
        record.append("ccltune-0.1.0.dist-info/direct_url.json")
    (info / "RECORD").write_text("".join(f"{r},,\n" for r in record))


def test_editable_install_finds_the_library_in_site_packages(tmp_path):
    """`pip install -e .`: the package is the checkout's, the library is in site-packages."""
    pkg = _checkout(tmp_path / "repo")
    site = tmp_path / "site"
    _dist(site, ["_editable_skbc_ccltune.pth", f"ccltune/lib/{LIB}"], editable_of=tmp_path / "repo")
    got = libraries.candidates(LIB, package_dir=pkg, search_path=[str(site)])
    assert got[-1] == (site / "ccltune" / "lib" / LIB).resolve()
    assert [p for p in got if p.is_file()] == [got[-1]]


def test_an_editable_install_of_another_checkout_is_not_used(tmp_path):
    pkg = _checkout(tmp_path / "repo")
    site = tmp_path / "site"
    _dist(site, [f"ccltune/lib/{LIB}"], editable_of=tmp_path / "elsewhere")
    assert libraries.installed(LIB, pkg, [str(site)]) == []


def test_a_wheel_install_is_used_only_for_its_own_package(tmp_path):
    site = tmp_path / "site"
    _dist(site, ["ccltune/__init__.py", f"ccltune/lib/{LIB}"])
    assert libraries.installed(LIB, (site / "ccltune").resolve(), [str(site)]) == [(site / "ccltune/lib" / LIB).resolve()]
    # a checkout run with PYTHONPATH=src while some other ccltune wheel is installed: not that one's library
    assert libraries.installed(LIB, _checkout(tmp_path / "repo"), [str(site)]) == []


def test_order_next_to_the_package_then_the_checkouts_build_then_the_distribution(tmp_path):
    pkg = _checkout(tmp_path / "repo")
    site = tmp_path / "site"
    _dist(site, [f"ccltune/lib/{LIB}"], editable_of=tmp_path / "repo")
    got = libraries.candidates(LIB, ("native/build", "plugin/build"), package_dir=pkg, search_path=[str(site)])
    repo = tmp_path / "repo"
    assert got == [pkg / "lib" / LIB, repo / "native/build" / LIB, repo / "plugin/build" / LIB,
                   (site / "ccltune/lib" / LIB).resolve()]


def test_find_returns_the_first_that_exists_or_says_how_to_build(tmp_path, monkeypatch):
    a, b = tmp_path / "a" / LIB, tmp_path / "b" / LIB
    monkeypatch.setattr(libraries, "candidates", lambda name, source_builds: [a, b])
    with pytest.raises(EngineUnavailable, match=rf"{LIB} is not built \(looked for {a}, {b}\).*`make -C native`"):
        libraries.find(LIB, ("native/build",))
    b.parent.mkdir()
    b.write_bytes(b"")
    assert libraries.find(LIB) == b


def test_no_distribution_installed(tmp_path):
    assert libraries.installed(LIB, _checkout(tmp_path / "repo"), [str(tmp_path / "empty")]) == []
