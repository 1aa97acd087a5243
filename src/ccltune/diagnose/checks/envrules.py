"""NCCL/RCCL environment variables that hurt performance: one table, one rule a row.

Each rule names the variable, how NCCL reads it, when its value is harmful, the status that
earns, why, and the fix. RCCL reads the same ``NCCL_*`` names, so one table serves both.
Applied to the process environment (``ccltune doctor``) or to the "X set by environment to Y"
lines of a log (``ccltune doctor --nccl-log``).

Values are read the way NCCL reads them, so a rule judges what NCCL will use: integers with
C's ``strtoll(value, NULL, 0)`` (``0x100`` is 256, ``010`` is 8, ``4M`` is 4; out of range:
NCCL's default), path levels by name or old-style number. A value NCCL cannot read whole is a
finding of its own, which names the value NCCL uses instead.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ccltune import rules
from ccltune.diagnose.findings import Finding
from ccltune.errors import UsageError
from ccltune.files import read_bytes
from ccltune.status import Verdict

_INT64 = (-(1 << 63), (1 << 63) - 1)
# C strtoll with base 0: leading white space, a sign, then 0x/0X hex, 0 octal, or decimal digits
_STRTOLL = re.compile(r"[ \t\n\v\f\r]*([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)")


def strtoll(text: str) -> tuple[int | None, str]:
    """C ``strtoll(text, &end, 0)``: (value, the text after what was read). No digits: (0, text);
    out of the 64-bit range (ERANGE): (None, ''), where NCCL uses its default."""
    m = _STRTOLL.match(text)
    if not m:
        return 0, text
    sign, digits = m.groups()
    if digits[:2] in ("0x", "0X"):
        n = int(digits, 16)
    elif digits.startswith("0"):
        n = int(digits, 8)
    else:
        n = int(digits)
    n = -n if sign == "-" else n
    if not _INT64[0] <= n <= _INT64[1]:
        return None, ""
    return n, text[m.end():]


def read_int(value: str) -> tuple[int | None, str]:
    """(the integer NCCL uses, '' or what is wrong with ``value``), as NCCL's ncclLoadParam reads an
    integer variable. None: NCCL uses its default (an empty or out-of-range value)."""
    if value == "":
        return None, ""  # NCCL treats an empty value as unset
    n, rest = strtoll(value)
    if n is None:
        return None, "out of the 64-bit integer range: NCCL ignores it and uses its default"
    if rest.strip():
        read = f"only {value[:len(value) - len(rest)].strip()!r}" if len(rest) < len(value) else "no digits"
        return n, f"not an integer; NCCL's strtoll reads {read}, so NCCL uses {n}"
    return n, ""


# The path level names NCCL accepts, up to SYS (its topoPathTypeStr; RCCL says XGMI for NVL; LOC,
# NVL, PIX, PXB, PHB and SYS are the documented ones), matched case-sensitively, and the old
# numbering 0..5 (larger is SYS).
LEVELS = ("LOC", "NVL", "XGMI", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS")
_DOCUMENTED_LEVELS = "LOC, NVL, PIX, PXB, PHB, SYS"
_OLD_LEVELS = ("LOC", "PIX", "PXB", "PHB", "SYS", "SYS")


def read_level(value: str) -> tuple[str | None, str]:
    """(the path level NCCL uses, '' or what is wrong with ``value``), as NCCL's ncclGetLevel reads
    NCCL_P2P_LEVEL and NCCL_NET_GDR_LEVEL. None: NCCL ignores the value and picks the level itself."""
    if value == "" or value in LEVELS:
        return value or None, ""
    if value[0].isdigit() and value[0].isascii():
        n, rest = strtoll(value)
        if n is None or n >= 1 << 31:  # NCCL keeps strtol's result in an int
            return None, "a number too large for NCCL's old level numbering (0-5): NCCL misreads it"
        level = _OLD_LEVELS[min(n, len(_OLD_LEVELS) - 1)]  # NCCL: larger than 5 is 5 (SYS)
        if not rest.strip():
            return level, ""
        return level, f"not a level name or integer; NCCL reads it as {level}"
    hint = f" (names are upper case: {value.strip().upper()})" if value.strip().upper() in LEVELS else ""
    return None, (f"not a level NCCL knows ({_DOCUMENTED_LEVELS} or 0-5){hint}: NCCL ignores it and picks "
                  "the level itself")


def _read_text(value: str) -> tuple[str, str]:
    bad = next((c for c in value if not c.isprintable()), None)
    if bad is not None:
        return value, f"holds the control character {bad!r}, which no NCCL value has"
    return value, ""


DEBUG_LEVELS = ("VERSION", "WARN", "INFO", "ABORT", "TRACE")


def read_debug(value: str) -> tuple[str | None, str]:
    """NCCL_DEBUG as NCCL reads it: one of DEBUG_LEVELS, in any case, compared whole (strcasecmp);
    anything else leaves NCCL silent, as if unset."""
    if value.upper() in DEBUG_LEVELS:
        return value.upper(), ""
    return None, f"not a level NCCL knows ({', '.join(DEBUG_LEVELS)}): NCCL prints nothing, as if it were unset"


_READERS: dict[str, Callable[[str], tuple[Any, str]]] = {"int": read_int, "level": read_level, "text": _read_text,
                                                         "debug": read_debug}
_FORMS = {"int": "an integer (decimal, 0x hex or 0 octal)", "level": f"one of {_DOCUMENTED_LEVELS}",
          "text": "a valid value", "debug": f"one of {', '.join(DEBUG_LEVELS)}"}


def _int_below(limit: int) -> Callable[[int], bool]:
    return lambda n: n < limit


def _int_is(*values: int) -> Callable[[int], bool]:
    return lambda n: n in values


def _level_is(*levels: str) -> Callable[[str], bool]:
    return lambda level: level in levels


def _one_of(*values: str) -> Callable[[str], bool]:
    wanted = {v.upper() for v in values}
    return lambda value: value.strip().upper() in wanted


def _any(value: str) -> bool:
    return value.strip() != ""


@dataclass(frozen=True)
class EnvRule:
    var: str
    matches: Callable[[Any], bool]  # on the value as NCCL reads it (see ``reads``)
    status: Verdict  # the status a match earns
    why: str
    fix: str
    reads: str = "text"  # how NCCL reads the variable: "int" (strtoll, base 0), "level" (a path level), "text"


RULES: tuple[EnvRule, ...] = (
    EnvRule("NCCL_P2P_DISABLE", _int_is(1), Verdict.FAIL,
            "peer-to-peer (NVLink/xGMI/PCIe) is off: GPUs exchange data through host memory",
            "unset NCCL_P2P_DISABLE", reads="int"),
    EnvRule("NCCL_P2P_LEVEL", _level_is("LOC"), Verdict.FAIL,
            "P2P level LOC forbids peer-to-peer between any two GPUs",
            "unset NCCL_P2P_LEVEL (or set SYS to allow P2P across the CPU interconnect)", reads="level"),
    EnvRule("NCCL_SHM_DISABLE", _int_is(1), Verdict.WARN,
            "shared memory is off: pairs without P2P fall back to the network transport",
            "unset NCCL_SHM_DISABLE", reads="int"),
    EnvRule("NCCL_ALGO", _any, Verdict.WARN,
            "forces one algorithm for every collective and size; NCCL's own choice is best at most sizes",
            "unset NCCL_ALGO; use a tuner plugin (ccltune tune) for per-size choices"),
    EnvRule("NCCL_PROTO", _any, Verdict.WARN,
            "forces protocols for every collective and size; NCCL's own choice is best at most sizes",
            "unset NCCL_PROTO; use a tuner plugin (ccltune tune) for per-size choices"),
    EnvRule("NCCL_MAX_NCHANNELS", _int_below(16), Verdict.WARN,
            "caps NCCL at fewer than 16 channels: large messages cannot reach the link bandwidth",
            "unset NCCL_MAX_NCHANNELS, or measure counts with `ccltune doctor --nproc N`", reads="int"),
    EnvRule("NCCL_MAX_CTAS", _int_below(16), Verdict.WARN,
            "caps NCCL at fewer than 16 CTAs (channels): large messages cannot reach the link bandwidth",
            "unset NCCL_MAX_CTAS", reads="int"),
    EnvRule("NCCL_BUFFSIZE", _int_below(1 << 22), Verdict.WARN,
            "buffers below the 4 MiB default lower large-message bandwidth",
            "unset NCCL_BUFFSIZE", reads="int"),
    EnvRule("NCCL_DEBUG", _one_of("INFO", "TRACE"), Verdict.WARN,
            "verbose logging slows communicator creation and floods the job's output",
            "unset NCCL_DEBUG or set NCCL_DEBUG=WARN outside diagnosis", reads="debug"),
    EnvRule("NCCL_IB_DISABLE", lambda n: n != 0, Verdict.WARN,  # NCCL: any value but 0 turns IB off
            "InfiniBand is off: traffic between nodes goes over TCP sockets",
            "unset NCCL_IB_DISABLE on hosts with InfiniBand adapters", reads="int"),
    EnvRule("NCCL_NET_GDR_LEVEL", _level_is("LOC"), Verdict.WARN,
            "GPUDirect RDMA is off: network traffic is staged through host memory",
            "unset NCCL_NET_GDR_LEVEL", reads="level"),
    EnvRule("NCCL_NVLS_ENABLE", _int_is(0), Verdict.PASS,
            "NVLink SHARP (multicast) is off: on NVSwitch systems that support it this can cost all_reduce "
            "bandwidth; it is needed where multicast is unavailable (some virtual machines and fabrics)",
            "unset NCCL_NVLS_ENABLE unless this machine cannot use NVLS", reads="int"),
    EnvRule("CUDA_LAUNCH_BLOCKING", _one_of("1"), Verdict.FAIL,
            "every CUDA launch is synchronous: communication cannot overlap anything",
            "unset CUDA_LAUNCH_BLOCKING"),
    EnvRule("TORCH_NCCL_BLOCKING_WAIT", _one_of("1"), Verdict.WARN,
            "the host blocks on every collective", "unset TORCH_NCCL_BLOCKING_WAIT"),
)


@dataclass(frozen=True)
class EnvVar:
    """A variable NCCL reads, whatever its value's effect: how NCCL reads it and which values it
    accepts. A value NCCL cannot read, or reads and then refuses, is a WARN naming what NCCL does."""

    var: str
    reads: str  # as EnvRule.reads
    valid: Callable[[Any], bool] | None = None  # on the value as read; None: any value NCCL can read
    expect: str = ""  # the valid values, in words
    otherwise: str = "NCCL ignores it and uses its default"


def _channels(n: int) -> bool:
    return 1 <= n <= 64  # NCCL's MAXCHANNELS


def _nthreads(n: int) -> bool:  # NCCL's getNthreads: a multiple of the warp size within its limits
    return n % 32 == 0 and 64 <= n <= 640


VARS: tuple[EnvVar, ...] = (
    EnvVar("NCCL_NTHREADS", "int", _nthreads, "a multiple of 32 from 64 to 640",
           "NCCL uses its default thread count (a value <= 0), or the nearest limit with a WARN"),
    *(EnvVar(v, "int", _channels, "a count from 1 to 64", "NCCL clamps it or ignores it")
      for v in ("NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS", "NCCL_MIN_CTAS", "NCCL_MAX_CTAS")),
    EnvVar("NCCL_BUFFSIZE", "int", lambda n: n > 0, "a number of bytes > 0"),
    *(EnvVar(v, "int") for v in ("NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE", "NCCL_NVLS_ENABLE", "NCCL_CUMEM_ENABLE",
                                 "NCCL_COLLNET_ENABLE", "NCCL_NET_GDR_READ", "NCCL_IB_DISABLE")),
    EnvVar("NCCL_P2P_LEVEL", "level"),
    EnvVar("NCCL_NET_GDR_LEVEL", "level"),
    EnvVar("NCCL_DEBUG", "debug"),
    *(EnvVar(v, "text") for v in ("NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE", "NCCL_ALGO", "NCCL_PROTO",
                                  "NCCL_SOCKET_IFNAME", "NCCL_IB_HCA", "NCCL_TUNER_PLUGIN", "NCCL_NET",
                                  "NCCL_TUNER_CONFIG_FILE")),
)


_BY_NAME = {v.var: v for v in VARS}


def check_env(environ: Mapping[str, str], *, source: str, has_infiniband: bool | None = None,
              files_here: bool = False) -> list[Finding]:
    """One finding per rule that matches ``environ``, and one per variable NCCL reads (VARS) whose
    value NCCL cannot read or refuses; or one PASS naming what was checked.

    ``has_infiniband`` False turns NCCL_IB_DISABLE=1 into a PASS (nothing to disable);
    None (unknown) keeps the rule's WARN. ``files_here``: the files the variables name are on this
    host (the process environment, not a log's), so NCCL_TUNER_CONFIG_FILE is read as the plugin
    reads it.
    """
    out = []
    for rule in RULES:
        value = environ.get(rule.var)
        if value is None:
            continue
        read, problem = _READERS[rule.reads](value)
        refused = _refused(rule.var, read) if not problem else ""
        problem = problem or refused  # a value NCCL refuses is not used, so it does no harm either
        harmful = read is not None and not refused and rule.matches(read)
        data = {"variable": rule.var, "value": value, "source": source, "read_as": read}
        if problem:  # NCCL misreads or ignores it: say so, and judge what NCCL uses instead
            status = Verdict.FAIL if harmful and rule.status == Verdict.FAIL else Verdict.WARN
            evidence = f"{rule.var}={value!r} ({source}): {problem}" + (f"; {rule.why}" if harmful else "")
            fix = f"set {rule.var} to {_expect(rule.var, rule.reads)}, or unset it"
            out.append(Finding(f"env:{rule.var}", status, evidence, fix, data=data))
            continue
        if not harmful:
            continue
        status = rule.status
        why = rule.why
        if rule.var == "NCCL_IB_DISABLE" and has_infiniband is False:
            status, why = Verdict.PASS, "no InfiniBand adapter on this host, so nothing is lost"
        read_as = "" if str(read) == value.strip() else f"; NCCL reads {read}"
        out.append(Finding(f"env:{rule.var}", status, f"{rule.var}={value} ({source}{read_as}): {why}", rule.fix,
                           data=data))
    judged = {f.data.get("variable") for f in out}
    for known in VARS:
        value = environ.get(known.var)
        if value is None or known.var in judged:
            continue
        finding = _misread(known, value, source)
        if finding is not None:
            out.append(finding)
    config = environ.get("NCCL_TUNER_CONFIG_FILE")
    if files_here and config and "NCCL_TUNER_CONFIG_FILE" not in {f.data.get("variable") for f in out}:
        out.extend(_rule_file(config, source))
    if not out:
        out.append(Finding("env", Verdict.PASS, f"no harmful NCCL/RCCL variable in {source} "
                           f"({len(RULES)} rules and {len(VARS)} variables checked)", data={"source": source}))
    return out


def _refused(var: str, read: Any) -> str:
    """What is wrong with a value NCCL read but refuses (VARS' ``valid``), or ''."""
    known = _BY_NAME.get(var)
    if known is None or known.valid is None or read is None or known.valid(read):
        return ""
    return f"{known.expect} is what NCCL accepts: {known.otherwise}"


def _misread(known: EnvVar, value: str, source: str) -> Finding | None:
    """A WARN when NCCL cannot read ``value`` whole, or reads it and refuses it; else None."""
    read, problem = _READERS[known.reads](value)
    problem = problem or _refused(known.var, read)
    if not problem:
        return None
    data = {"variable": known.var, "value": value, "source": source, "read_as": read}
    return Finding(f"env:{known.var}", Verdict.WARN, f"{known.var}={value!r} ({source}): {problem}",
                   f"set {known.var} to {_expect(known.var, known.reads)}, or unset it", data=data)


def _expect(var: str, reads: str) -> str:
    known = _BY_NAME.get(var)
    return known.expect if known is not None and known.expect else _FORMS[reads]


def _rule_file(path: str, source: str) -> list[Finding]:
    """NCCL_TUNER_CONFIG_FILE read as the ccltune plugin reads it: a WARN when it cannot be used
    (missing, not a regular file, over 16 MiB, binary) or has lines the plugin rejects."""
    data = {"variable": "NCCL_TUNER_CONFIG_FILE", "value": path, "source": source}
    fix = "point NCCL_TUNER_CONFIG_FILE at a rule file written by `ccltune tune`, or unset it"
    try:
        raw = read_bytes(path, "NCCL_TUNER_CONFIG_FILE", limit=rules.MAX_RULE_FILE_BYTES)
    except UsageError as exc:
        return [Finding("env:NCCL_TUNER_CONFIG_FILE", Verdict.WARN, f"{exc} ({source}): the tuner plugin cannot use "
                        "it, and NCCL runs untuned", fix, data=data)]
    nul = raw.find(b"\0")
    if nul >= 0:
        return [Finding("env:NCCL_TUNER_CONFIG_FILE", Verdict.WARN, f"NCCL_TUNER_CONFIG_FILE={path!r} ({source}) is a "
                        f"binary file (a NUL byte at offset {nul}), not a rule file", fix, data=data)]
    diags = rules.parse_text(raw.decode("utf-8", "surrogateescape"), path).diagnostics
    if diags:
        return [Finding("env:NCCL_TUNER_CONFIG_FILE", Verdict.WARN, f"NCCL_TUNER_CONFIG_FILE={path!r} ({source}): "
                        f"{len(diags)} lines the plugin rejects (first: {diags[0]})",
                        f"ccltune plugin check {path}", data=data)]
    return []
