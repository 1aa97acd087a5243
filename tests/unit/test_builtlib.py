"""ccltune.builtlib: a built C library is found wherever an install put it.

The layouts are built by hand in a temporary folder, as pip and scikit-build-core write
them (RECORD, direct_url.json); tests/plugin/test_editable_install.py does a real
`pip install -e .` (slow)."""

from __future__ import annotations

import json
from pathlib import Path

from ccltune import builtlib

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
    got = builtlib.candidates(LIB, "plugin", package_dir=pkg, search_path=[str(site)])
    assert builtlib.first_existing(got) == (site / "ccltune" / "lib" / LIB).resolve()


def test_an_editable_install_of_another_checkout_is_not_used(tmp_path):
    pkg = _checkout(tmp_path / "repo")
    site = tmp_path / "site"
    _dist(site, [f"ccltune/lib/{LIB}"], editable_of=tmp_path / "elsewhere")
    assert builtlib.installed(LIB, pkg, [str(site)]) == []


def test_a_wheel_install_is_used_only_for_its_own_package(tmp_path):
    site = tmp_path / "site"
    _dist(site, ["ccltune/__init__.py", f"ccltune/lib/{LIB}"])
    assert builtlib.installed(LIB, (site / "ccltune").resolve(), [str(site)]) == [(site / "ccltune/lib" / LIB).resolve()]
    # a checkout run with PYTHONPATH=src while some other ccltune wheel is installed: not that one's library
    assert builtlib.installed(LIB, _checkout(tmp_path / "repo"), [str(site)]) == []


def test_order_next_to_the_package_then_the_distribution_then_the_checkouts_build(tmp_path):
    pkg = _checkout(tmp_path / "repo")
    site = tmp_path / "site"
    _dist(site, [f"ccltune/lib/{LIB}"], editable_of=tmp_path / "repo")
    got = builtlib.candidates(LIB, "native", package_dir=pkg, search_path=[str(site)])
    assert got == [pkg / "lib" / LIB, (site / "ccltune/lib" / LIB).resolve(), tmp_path / "repo/native/build" / LIB]


def test_no_distribution_installed(tmp_path):
    pkg = _checkout(tmp_path / "repo")
    assert builtlib.installed(LIB, pkg, [str(tmp_path / "empty")]) == []
    assert builtlib.candidates(LIB, "plugin", package_dir=pkg, search_path=[]) == [
        pkg / "lib" / LIB, tmp_path / "repo/plugin/build" / LIB]
