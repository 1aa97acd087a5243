"""Platform profiles for ``ccltune check``: TOML files naming gates, a monotonicity rule and
the bench sweep that measures them. Built-ins live in ``ccltune/diagnose/profiles/*.toml``;
``--profile PATH.toml`` reads a user's file of the same schema::

    name = "h200-4"                 # required
    description = "..."             # optional
    gpu_match = "H200"              # substring of the GPU name, for picking a profile automatically
    world_size = 4                  # required: GPUs (ranks) the figures assume
    provisional = false             # true: thresholds not yet confirmed by measurement
    [bench]                         # the sweep that measures the gates (nccl-tests flags)
    min_bytes = "64M"; max_bytes = "1G"; step_factor = 2; iters = 20; warmup = 5
    [[gate]]                        # one or more
    name = "..."; collective = "all_reduce"; size = "512M"; in_place = true
    metric = "busbw_gbps"; min = 340.0
    [monotonic]                     # optional
    collective = "all_reduce"; in_place = true; from_size = "64M"; tolerance = 0.05
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from importlib import resources
from typing import Any

from ccltune.errors import UsageError, did_you_mean, unknown_name
from ccltune.files import check_name, read_text
from ccltune.sizes import parse_size

METRICS = ("busbw_gbps", "algbw_gbps")
_TOP_KEYS = ("name", "description", "gpu_match", "world_size", "provisional", "bench", "gate", "monotonic")
_GATE_KEYS = ("name", "collective", "size", "in_place", "metric", "min")
_MONO_KEYS = ("collective", "in_place", "from_size", "tolerance")
_BENCH_KEYS = ("min_bytes", "max_bytes", "step_factor", "iters", "warmup")


@dataclass(frozen=True)
class Gate:
    name: str
    collective: str
    size_bytes: int
    in_place: bool
    metric: str
    min_value: float


@dataclass(frozen=True)
class Monotonic:
    collective: str
    in_place: bool
    from_bytes: int
    tolerance: float  # a fall of more than this fraction below the best smaller size fails


@dataclass(frozen=True)
class GateBench:
    """The bench a profile's gates run (sizes in bytes, nccl-tests' step factor, iterations)."""

    min_bytes: int
    max_bytes: int
    step_factor: int = 2
    iters: int = 20
    warmup: int = 5


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    world_size: int
    gates: tuple[Gate, ...]
    bench: GateBench
    monotonic: Monotonic | None = None
    gpu_match: str | None = None
    provisional: bool = False
    source: str = ""


def _toml_loads(text: str, where: str) -> dict[str, Any]:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ImportError:
            raise UsageError(f"{where}: reading TOML profiles needs Python >= 3.11 or the 'tomli' package "
                             "(pip install tomli)") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{where}: not valid TOML: {exc}") from None
    except RecursionError:  # tomllib recurses once per nested array or inline table
        raise UsageError(f"{where}: not valid TOML: nested deeper than the parser's limit (about 1000 levels)") from None


def _builtin_dir() -> Any:
    return resources.files("ccltune.diagnose") / "profiles"


def builtin_names() -> list[str]:
    return sorted(p.name[:-5] for p in _builtin_dir().iterdir() if p.name.endswith(".toml"))


def load_profile(spec: str) -> Profile:
    """A built-in by name (``h200-4``) or a file by path (anything ending in .toml or naming a file)."""
    if spec.endswith(".toml") or "/" in spec or check_name(spec, "--profile").is_file():
        text = read_text(spec, "--profile")
        return parse_profile(_toml_loads(text, spec), where=spec)
    names = builtin_names()
    if spec not in names:
        raise unknown_name("profile", spec, names, where="--profile (or give a path to a .toml file)")
    text = (_builtin_dir() / f"{spec}.toml").read_text(encoding="utf-8")
    return parse_profile(_toml_loads(text, f"built-in profile {spec}"), where=f"built-in profile {spec}")


def parse_profile(data: dict[str, Any], *, where: str) -> Profile:
    """Validate a decoded TOML document; every error names the file and the key."""
    _known(data, _TOP_KEYS, where)
    name = _get(data, "name", str, where)
    world_size = _get(data, "world_size", int, where)
    if world_size < 1:
        raise UsageError(f"{where}: world_size must be >= 1, got {world_size}")
    description = _get(data, "description", str, where, default="")
    gpu_match = _get(data, "gpu_match", str, where, default=None)
    provisional = _get(data, "provisional", bool, where, default=False)
    raw_gates = data.get("gate")
    if not isinstance(raw_gates, list) or not raw_gates:
        raise UsageError(f"{where}: needs at least one [[gate]] table")
    gates = tuple(_gate(g, f"{where}: [[gate]] {i + 1}") for i, g in enumerate(raw_gates))
    mono = _monotonic(data["monotonic"], f"{where}: [monotonic]") if "monotonic" in data else None
    sizes = [g.size_bytes for g in gates] + ([mono.from_bytes] if mono else [])
    bench = _bench(data.get("bench", {}), f"{where}: [bench]", default_min=min(sizes), default_max=max(sizes))
    return Profile(name=name, description=description, world_size=world_size, gates=gates, bench=bench,
                   monotonic=mono, gpu_match=gpu_match, provisional=provisional, source=where)


def _gate(g: Any, where: str) -> Gate:
    if not isinstance(g, dict):
        raise UsageError(f"{where}: must be a table")
    _known(g, _GATE_KEYS, where)
    metric = _get(g, "metric", str, where, default="busbw_gbps")
    if metric not in METRICS:
        raise unknown_name("metric", metric, METRICS, where=where)
    minimum = _get(g, "min", (int, float), where)
    if not math.isfinite(minimum):
        raise UsageError(f"{where}: 'min' must be a finite number, got {minimum}")
    collective = _get(g, "collective", str, where)
    return Gate(name=_get(g, "name", str, where, default="") or f"{collective}_{metric}", collective=collective,
                size_bytes=parse_size(_get(g, "size", (str, int), where), f"{where}: size"),
                in_place=_get(g, "in_place", bool, where, default=True), metric=metric, min_value=float(minimum))


def _monotonic(m: Any, where: str) -> Monotonic:
    if not isinstance(m, dict):
        raise UsageError(f"{where}: must be a table")
    _known(m, _MONO_KEYS, where)
    tolerance = float(_get(m, "tolerance", (int, float), where, default=0.05))
    if not 0 <= tolerance < 1:
        raise UsageError(f"{where}: 'tolerance' must be in [0, 1), got {tolerance}")
    return Monotonic(collective=_get(m, "collective", str, where),
                     in_place=_get(m, "in_place", bool, where, default=True),
                     from_bytes=parse_size(_get(m, "from_size", (str, int), where), f"{where}: from_size"),
                     tolerance=tolerance)


def _bench(b: Any, where: str, *, default_min: int, default_max: int) -> GateBench:
    if not isinstance(b, dict):
        raise UsageError(f"{where}: must be a table")
    _known(b, _BENCH_KEYS, where)
    lo = parse_size(_get(b, "min_bytes", (str, int), where, default=default_min), f"{where}: min_bytes")
    hi = parse_size(_get(b, "max_bytes", (str, int), where, default=default_max), f"{where}: max_bytes")
    if lo > hi:
        raise UsageError(f"{where}: min_bytes must be <= max_bytes, got {lo} > {hi}")
    counts = {key: _get(b, key, int, where, default=default) for key, default in
              (("step_factor", 2), ("iters", 20), ("warmup", 5))}
    for key, low in (("step_factor", 2), ("iters", 1), ("warmup", 0)):  # bench's own -f, -n, -w limits
        if counts[key] < low:
            raise UsageError(f"{where}: {key!r} must be >= {low}, got {counts[key]}")
    return GateBench(lo, hi, counts["step_factor"], counts["iters"], counts["warmup"])


def _known(table: dict[str, Any], keys: tuple[str, ...], where: str) -> None:
    for key in table:
        if key not in keys:
            raise UsageError(f"{where}: unknown key {key!r}{did_you_mean(key, keys)}; valid: {', '.join(keys)}")


_MISSING = object()
_KIND_NAMES = {str: "a string", int: "an integer", float: "a number", bool: "a boolean (true or false)"}


def _get(table: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str, default: Any = _MISSING) -> Any:
    """``table[key]``, of TOML type ``kind`` (a boolean only where ``kind`` is bool); ``default`` when absent,
    UsageError when absent without a default or of another type."""
    if key not in table:
        if default is _MISSING:
            raise UsageError(f"{where}: missing {key!r}")
        return default
    value = table[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        expected = " or ".join(_KIND_NAMES.get(k, k.__name__) for k in kinds if not (k is int and float in kinds))
        raise UsageError(f"{where}: {key!r} has the wrong type ({type(value).__name__}): {value!r}; "
                         f"expected {expected}")
    return value


def detect(gpu_names: list[str]) -> Profile | None:
    """The built-in profile whose ``gpu_match`` is in these GPUs' name and whose world size they make."""
    if not gpu_names:
        return None
    for name in builtin_names():
        prof = load_profile(name)
        if prof.gpu_match and prof.gpu_match in gpu_names[0] and prof.world_size == len(gpu_names):
            return prof
    return None
