"""Rule files of the ccltune tuner plugin: schema, parser, matcher and writer.

This is the Python twin of ``plugin/src/parse.c`` and ``plugin/src/match.c``: the same
lines are accepted, rejected lines get the same ``reason`` strings, and ``match`` makes the
same first-match decision as the plugin's ``getCollInfo``. Format: docs/rules.md.
Pure stdlib; nothing here prints.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ccltune import collectives
from ccltune.errors import RuleFileError, UsageError
from ccltune.files import read_bytes, write_text
from ccltune.sizes import RULE_FILE, parse_size
from ccltune.sizes import echo as _echo

MAX_LINE_BYTES = 1024
MAX_CHANNELS = 64
MAX_RULE_FILE_BYTES = 16 << 20  # the plugin refuses a larger rule file (docs/plugin.md); so does ccltune
ANY = -1  # wildcard for n_nodes, n_ranks, num_pipe_ops, reg_buff
NCCL_CHOICE = "default"  # algo/proto: keep NCCL's choice

COLLECTIVES = tuple(collectives.PLUGIN_NAMES.values())  # the tuned collectives, in ncclFunc_t order
# ncclAlgorithm_t and ncclProtocol_t in NCCL's order (the cost table's rows and columns): the one list
# of algorithm and protocol names; every other spelling is derived from it
ALGORITHMS = ("tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat")
PROTOCOLS = ("ll", "ll128", "simple")


def nccl_spelling(name: str) -> str:
    """An algorithm or protocol name as NCCL_ALGO/NCCL_PROTO spell it, lower-cased: rule files write
    collnet_direct, NCCL reads CollNetDirect."""
    return name.strip().lower().replace("_", "")


# NCCL_ALGO's spelling, lower-cased (NCCL reads CollNetDirect, NVLSTree): what a sweep forces
NCCL_ALGOS = tuple(map(nccl_spelling, ALGORITHMS))
PLATFORM_KEYS = ("gpu", "nvldomains", "nvlranks", "partition", "nps")
PARTITIONS = ("SPX", "DPX", "TPX", "QPX", "CPX")
MEMORY_PARTITIONS = ("NPS1", "NPS2", "NPS4")

_COLL_ALIASES = {n: p for n, p in collectives.PLUGIN_NAMES.items() if n != p}  # all_reduce -> allreduce
_ALGO_ALIASES = {n: a for n, a in zip(NCCL_ALGOS, ALGORITHMS) if n != a}  # collnetdirect -> collnet_direct
_INT_MAX = (1 << 31) - 1


def rule_spelling(name: str) -> str:
    """An algorithm or protocol name as rule files, the docs and every message spell it (``ALGORITHMS``,
    ``PROTOCOLS``), from either spelling: CollNetDirect -> collnet_direct. A name of neither comes back
    lower-cased, for the caller to refuse."""
    n = _ascii_lower(name.strip())
    return _ALGO_ALIASES.get(n, n)


@dataclass(frozen=True)
class Diagnostic:
    """A rejected line: ``path:line: reason`` (1-based line)."""

    path: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.reason}"


@dataclass(frozen=True)
class Platform:
    """A ``platform,...`` section selector; no keys set = every platform."""

    gpu: str | None = None  # lower-cased: a whole word of the GPU model name or a run of them (gpu_names)
    nvl_domains: int | None = None
    nvl_ranks: int | None = None
    partition: str | None = None  # SPX/DPX/TPX/QPX/CPX
    nps: str | None = None  # NPS1/NPS2/NPS4
    valid: bool = True  # False: the line was rejected, its rules never apply
    line: int = 0

    def matches(self, facts: PlatformFacts) -> bool:
        if not self.valid:
            return False
        if self.gpu is not None and (not facts.gpu or not gpu_names(self.gpu, facts.gpu)):
            return False
        if self.nvl_domains is not None and facts.nvl_domains != self.nvl_domains:
            return False
        if self.nvl_ranks is not None and not (
            facts.min_ranks_per_nvl_domain == self.nvl_ranks == facts.max_ranks_per_nvl_domain
        ):
            return False
        if self.partition is not None and (facts.partition or "").upper() != self.partition:
            return False
        return self.nps is None or (facts.nps or "").upper() == self.nps


ANY_PLATFORM = Platform()

_WORD = frozenset("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def gpu_names(value: str, model: str) -> bool:
    """Whether a section's ``gpu=`` value (lower-cased) names the GPU ``model`` (docs/rules.md): it is,
    case-insensitively, one whole word of the model name or a run of its words ('h200' names 'NVIDIA H200',
    'h100 80gb' names 'NVIDIA H100 80GB HBM3'; 'h20' does not name 'NVIDIA H200', nor 'mi300' 'AMD Instinct
    MI300A'). A word is a run of ASCII letters and digits. The plugin's twin: platform.c names_model."""
    if not value:
        return True
    low = _ascii_lower(model)
    at = low.find(value)
    while at >= 0:
        end = at + len(value)
        if (at == 0 or low[at - 1] not in _WORD) and (end == len(low) or low[end] not in _WORD):
            return True
        at = low.find(value, at + 1)
    return False


@dataclass(frozen=True)
class PlatformFacts:
    """What is known of the machine and the communicator; None = unknown (never matches).

    NVLink fields left None are derived like the plugin does for v2..v4: one domain per
    node, ranks per domain = n_ranks / n_nodes (see ``with_nvl_defaults``)."""

    gpu: str | None = None
    nvl_domains: int | None = None
    min_ranks_per_nvl_domain: int | None = None
    max_ranks_per_nvl_domain: int | None = None
    partition: str | None = None
    nps: str | None = None

    def with_nvl_defaults(self, n_ranks: int, n_nodes: int) -> PlatformFacts:
        if self.nvl_domains is not None or n_nodes <= 0:
            return self
        return PlatformFacts(
            self.gpu, n_nodes, n_ranks // n_nodes, -(-n_ranks // n_nodes), self.partition, self.nps
        )


@dataclass(frozen=True)
class Rule:
    """One rule line. ``algo``/``proto`` are canonical names or "default"; -1 = any."""

    collective: str
    min_bytes: int
    max_bytes: int
    algo: str
    proto: str
    channels: int = -1
    n_nodes: int = ANY
    n_ranks: int = ANY
    num_pipe_ops: int = ANY
    reg_buff: int = ANY
    platform: Platform = ANY_PLATFORM
    line: int = 0

    def to_line(self) -> str:
        return ",".join(
            str(v)
            for v in (self.collective, self.min_bytes, self.max_bytes, self.algo, self.proto,
                      self.channels, self.n_nodes, self.n_ranks, self.num_pipe_ops, self.reg_buff)
        )


@dataclass
class RuleSet:
    rules: list[Rule] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    sections: list[Platform] = field(default_factory=list)
    path: str = "<text>"


@dataclass(frozen=True)
class Query:
    """One getCollInfo call. ``cost_table``: [algo][proto] floats as NCCL passes them
    (-1.0 = IGNORE); None = every explicit cell usable and "default" left unresolved.
    ``reg_buff`` None = unknown (tuner v2/v3): only rules with regBuff -1 match."""

    collective: str
    size_bytes: int
    n_ranks: int
    n_nodes: int
    num_pipe_ops: int = 1
    reg_buff: int | None = 0
    platform: PlatformFacts = PlatformFacts()
    cost_table: Sequence[Sequence[float]] | None = None


@dataclass(frozen=True)
class Decision:
    """The winning rule (None: no rule matched, NCCL's choice stands). ``algo``/``proto``:
    the cell set to 0.0 (None: no cell changed, or unresolved "default" without a table);
    ``channels``: value written to nChannels, 0 = left alone."""

    rule: Rule | None = None
    algo: str | None = None
    proto: str | None = None
    channels: int = 0

    @property
    def line(self) -> int:
        return self.rule.line if self.rule else 0


def _ascii_lower(s: str) -> str:
    return "".join(chr(ord(c) + 32) if "A" <= c <= "Z" else c for c in s)


def _trim(s: str) -> str:
    return s.strip(" \t")


def _int_field(text: str, lo: int, hi: int) -> int | None:
    if text == "-1":
        return -1
    if not text or not all("0" <= c <= "9" for c in text) or int(text) > _INT_MAX:
        return None
    v = int(text)
    return v if lo <= v <= hi else None


def _parse_platform(fields: list[str], line: int) -> Platform:
    """Raises ValueError(reason) for a bad platform line."""
    if not fields or (len(fields) == 1 and (fields[0] == "*" or _ascii_lower(fields[0]) == "any")):
        return Platform(line=line)
    got: dict[str, object] = {}
    for f in fields:
        key, eq, val = f.partition("=")
        key, val = _trim(key), _trim(val)
        if not eq or not key or not val:
            raise ValueError(f"platform: malformed pair '{_echo(f)}' (expected key=value)")
        k = _ascii_lower(key)
        if k not in PLATFORM_KEYS:
            raise ValueError(f"platform: unknown key '{_echo(key)}' (valid: {', '.join(PLATFORM_KEYS)})")
        if k in got:
            raise ValueError(f"platform: duplicate key '{_echo(key)}'")
        if k == "gpu":
            if len(val.encode("utf-8", "surrogateescape")) >= 64:
                raise ValueError(f"platform: gpu '{_echo(val)}' is longer than 63 bytes")
            got[k] = _ascii_lower(val)
        elif k in ("nvldomains", "nvlranks"):
            n = _int_field(val, 1, _INT_MAX)
            if n is None or n < 1:
                raise ValueError(f"platform: {k} '{_echo(val)}' is not a positive integer")
            got[k] = n
        else:
            valid = PARTITIONS if k == "partition" else MEMORY_PARTITIONS
            if val.upper() not in valid or not val.isascii():
                raise ValueError(f"platform: {k} '{_echo(val)}' is not one of {', '.join(valid)}")
            got[k] = val.upper()
    return Platform(
        gpu=got.get("gpu"), nvl_domains=got.get("nvldomains"), nvl_ranks=got.get("nvlranks"),  # type: ignore[arg-type]
        partition=got.get("partition"), nps=got.get("nps"), line=line,  # type: ignore[arg-type]
    )


def parse_rule_fields(f: list[str], line: int = 0, platform: Platform = ANY_PLATFORM) -> Rule:
    """Fields of one rule line (already split and trimmed). Raises ValueError(reason)."""
    if not 8 <= len(f) <= 10:
        raise ValueError(f"expected 8, 9 or 10 fields, got {len(f)}")
    coll = _COLL_ALIASES.get(_ascii_lower(f[0]), _ascii_lower(f[0]))
    if coll not in COLLECTIVES:
        raise ValueError(f"unknown collective '{_echo(f[0])}' (valid: {', '.join(COLLECTIVES)})")
    lo = parse_size(f[1], "minbytes", grammar=RULE_FILE)
    hi = parse_size(f[2], "maxbytes", grammar=RULE_FILE)
    if lo > hi:
        raise ValueError(f"minbytes {lo} > maxbytes {hi}")
    algo = _ALGO_ALIASES.get(_ascii_lower(f[3]), _ascii_lower(f[3]))
    if algo not in ALGORITHMS + (NCCL_CHOICE,):
        raise ValueError(f"unknown algorithm '{_echo(f[3])}' (valid: {', '.join(ALGORITHMS)}, default)")
    proto = _ascii_lower(f[4])
    if proto not in PROTOCOLS + (NCCL_CHOICE,):
        raise ValueError(f"unknown protocol '{_echo(f[4])}' (valid: {', '.join(PROTOCOLS)}, default)")
    channels = _int_field(f[5], 0, MAX_CHANNELS)
    if channels is None:
        raise ValueError(f"channels: '{_echo(f[5])}' is not -1, 0 or 1..64")
    ints = []
    for i, name in enumerate(("nNodes", "nRanks", "numPipeOps", "regBuff")):
        if 6 + i >= len(f):
            ints.append(ANY)
            continue
        reg = name == "regBuff"
        v = _int_field(f[6 + i], 0 if reg else 1, 1 if reg else _INT_MAX)
        if v is None:
            want = "-1, 0 or 1" if reg else "-1 or a positive integer"
            raise ValueError(f"{name}: '{_echo(f[6 + i])}' is not {want}")
        ints.append(v)
    n_nodes, n_ranks, num_pipe_ops, reg_buff = ints
    return Rule(coll, lo, hi, algo, proto, channels, n_nodes, n_ranks, num_pipe_ops, reg_buff, platform=platform,
                line=line)


def parse_text(text: str, path: str = "<text>") -> RuleSet:
    """Parse a whole rule file. Bad lines become diagnostics; never raises for content.
    Non-UTF-8 bytes should arrive as surrogate escapes (``load`` does that)."""
    rs = RuleSet(path=path)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    section = ANY_PLATFORM
    for lineno, raw in enumerate(lines, 1):
        if raw.endswith("\r"):
            raw = raw[:-1]
        if len(raw.encode("utf-8", "surrogateescape")) > MAX_LINE_BYTES:
            rs.diagnostics.append(Diagnostic(path, lineno, f"line longer than {MAX_LINE_BYTES} bytes"))
            continue
        if "\0" in raw:
            rs.diagnostics.append(Diagnostic(path, lineno, "embedded NUL byte"))
            continue
        s = _trim(raw)
        if not s or s.startswith("#"):
            continue
        fields = [_trim(x) for x in s.split(",")]
        try:
            if _ascii_lower(fields[0]) == "platform":
                try:
                    section = _parse_platform(fields[1:], lineno)
                except ValueError:
                    section = Platform(valid=False, line=lineno)
                    raise
                finally:
                    rs.sections.append(section)
            else:
                rs.rules.append(parse_rule_fields(fields, lineno, section))
        except ValueError as exc:
            rs.diagnostics.append(Diagnostic(path, lineno, str(exc)))
    return rs


def load(path: str | os.PathLike[str], flag: str = "rule file") -> RuleSet:
    """Read and parse a rule file (a regular file or a pipe, as ``<(cat rules.conf)``). Raises
    RuleFileError naming ``flag`` and the path only when it cannot be read."""
    try:
        data = read_bytes(path, flag, limit=MAX_RULE_FILE_BYTES)
    except UsageError as exc:
        raise RuleFileError(str(exc)) from None
    return parse_text(data.decode("utf-8", "surrogateescape"), str(path))


def _applies(rule: Rule, q: Query, coll: str, facts: PlatformFacts) -> bool:
    return (
        rule.collective == coll
        and rule.min_bytes <= q.size_bytes <= rule.max_bytes
        and rule.n_nodes in (ANY, q.n_nodes)
        and rule.n_ranks in (ANY, q.n_ranks)
        and rule.num_pipe_ops in (ANY, q.num_pipe_ops)
        and (rule.reg_buff == ANY or rule.reg_buff == q.reg_buff)
        and rule.platform.matches(facts)
    )


def _usable(v: float) -> bool:
    return v >= 0.0  # False for IGNORE (-1.0), other negatives and NaN


def _pick_cell(rule: Rule, table: Sequence[Sequence[float]]) -> tuple[int, int] | None:
    """The cell a rule zeroes in this table, or None when it cannot (rule skipped)."""
    n_algo, n_proto = len(table), (len(table[0]) if table else 0)
    if rule.algo != NCCL_CHOICE and rule.proto != NCCL_CHOICE:
        a, p = ALGORITHMS.index(rule.algo), PROTOCOLS.index(rule.proto)
        return (a, p) if a < n_algo and p < n_proto and _usable(table[a][p]) else None
    if rule.algo == NCCL_CHOICE:  # cheapest algorithm for this protocol; ties: lowest index
        p = PROTOCOLS.index(rule.proto)
        cells = [(a, p) for a in range(n_algo)] if p < n_proto else []
    else:  # cheapest protocol for this algorithm
        a = ALGORITHMS.index(rule.algo)
        cells = [(a, p) for p in range(n_proto)] if a < n_algo else []
    best = None
    for a, p in cells:
        if _usable(table[a][p]) and (best is None or table[a][p] < table[best[0]][best[1]]):
            best = (a, p)
    return best


def match(ruleset: RuleSet, query: Query, partial_defaults: bool = True) -> Decision:
    """First rule (file order) that applies and is usable with the query's cost table.

    ``partial_defaults=False`` is the tuner-v2 behaviour: rules with exactly one
    "default" half cannot be expressed and are skipped."""
    coll = _COLL_ALIASES.get(_ascii_lower(query.collective), _ascii_lower(query.collective))
    facts = query.platform.with_nvl_defaults(query.n_ranks, query.n_nodes)
    table = query.cost_table
    for rule in ruleset.rules:
        if not _applies(rule, query, coll, facts):
            continue
        channels = rule.channels if rule.channels >= 1 else 0
        both_default = rule.algo == NCCL_CHOICE and rule.proto == NCCL_CHOICE
        if both_default:
            return Decision(rule, None, None, channels)
        if NCCL_CHOICE in (rule.algo, rule.proto) and not partial_defaults:
            continue
        if table is None:  # unresolved: report what the rule asks for
            algo = None if rule.algo == NCCL_CHOICE else rule.algo
            proto = None if rule.proto == NCCL_CHOICE else rule.proto
            return Decision(rule, algo, proto, channels)
        cell = _pick_cell(rule, table)
        if cell is not None:
            return Decision(rule, ALGORITHMS[cell[0]], PROTOCOLS[cell[1]], channels)
    return Decision()


def format_rules(rules: Iterable[Rule], header_lines: Iterable[str] = ()) -> str:
    """Render a rule file: '# ' header lines, then rules grouped by platform section in order."""
    out = [h if h.startswith("#") else f"# {h}" for h in header_lines]
    current = ANY_PLATFORM
    for r in rules:
        if r.platform != current and r.platform.valid:
            out.append(_platform_line(r.platform))
            current = r.platform
        out.append(r.to_line())
    return "\n".join(out) + "\n"


def platform_line(p: Platform) -> str:
    """The section line that selects ``p`` (``platform,gpu=h200,nvlranks=4``), as a rule file writes it."""
    return _platform_line(p)


def _platform_line(p: Platform) -> str:
    pairs = [
        f"{k}={v}" for k, v in (("gpu", p.gpu), ("nvldomains", p.nvl_domains), ("nvlranks", p.nvl_ranks),
                               ("partition", p.partition), ("nps", p.nps)) if v is not None
    ]
    return "platform," + (",".join(pairs) if pairs else "*")


def write_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Replace the rule file ``path`` whole (temp file + rename); never appends."""
    write_text(path, text, flag="rule file")

def parse_platform_args(pairs: Iterable[str]) -> PlatformFacts:
    """``--platform key=value`` options into facts, each pair checked as a rule file's platform field
    is (the same keys, values and duplicates refused). Raises UsageError on a bad pair."""
    pairs = list(pairs)
    for pair in pairs:
        if "=" not in pair:
            raise UsageError(f"--platform expects key=value, got {pair!r}")
    try:
        p = _parse_platform(pairs, 0)
    except ValueError as exc:
        raise UsageError(f"--platform: {str(exc).removeprefix('platform: ')}") from None
    return PlatformFacts(gpu=p.gpu, nvl_domains=p.nvl_domains, min_ranks_per_nvl_domain=p.nvl_ranks,
                         max_ranks_per_nvl_domain=p.nvl_ranks, partition=p.partition, nps=p.nps)
