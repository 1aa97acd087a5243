"""nccl-tests' parallel groups: NCCL_TESTS_SPLIT and NCCL_TESTS_SPLIT_MASK, as nccl-tests 2.19.6 reads
them (src/common.cu, ``run``). Pure functions: no process group.

Each process gets a "color" from its rank; processes of one color form a group (MPI_Comm_split with the
rank as key, so a group's ranks keep their world order), and each group runs the collectives on a
communicator of its own, in parallel with the others.

- ``NCCL_TESTS_SPLIT_MASK=<hex>``: color = rank & mask, the mask read as hexadecimal (``strtoul(.., 16)``:
  ``10`` is 0x10, ``0x3`` is 3). nccl-tests' README calls it equivalent to ``NCCL_TESTS_SPLIT="&<value>"``,
  which reads the value as decimal; the source reads hex, and so does ccltune. When it is set it wins.
- ``NCCL_TESTS_SPLIT="<op><value>"``: op ``AND``/``&``, ``OR``/``|``, ``MOD``/``%`` or ``DIV``/``/``
  (case-insensitive, at the very start), then the value after optional blanks: decimal, ``0x`` hex,
  ``0b`` binary (and, as C's strtoul with base 0 reads it, a leading ``0`` for octal).

Where nccl-tests silently falls back to one group (an unknown operation, no value) or crashes (``MOD 0``,
``DIV 0``), ccltune refuses the value naming the variable; so it does text after the value, a negative
value and one beyond a C int (nccl-tests' ``(int)strtoul`` would wrap them).

The rank nccl-tests splits is its MPI process; ccltune runs one process per GPU, so with ``-t T -g G``
(T x G GPUs per nccl-tests process) the process of rank r is ``r // (T * G)``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from ccltune.errors import UsageError

MASK_VAR, SPLIT_VAR = "NCCL_TESTS_SPLIT_MASK", "NCCL_TESTS_SPLIT"
# nccl-tests' spellings, in the order it tries them; each names one operation
_OPERATIONS = (("AND", "and"), ("&", "and"), ("OR", "or"), ("|", "or"), ("MOD", "mod"), ("%", "mod"),
               ("DIV", "div"), ("/", "div"))
_INT_MAX = 2**31 - 1
_HEX = re.compile(r"\s*(?:0[xX])?([0-9a-fA-F]+)\s*")
_SYNTAX = ("'<op><value>' with op AND, OR, MOD, DIV (or &, |, %, /) and a value in decimal, 0x hex or "
           "0b binary, e.g. 'MOD 2' or 'AND 0x1'")


@dataclass(frozen=True)
class Split:
    """One NCCL_TESTS_SPLIT (or _MASK) setting: ``color(proc)`` as nccl-tests computes it."""

    variable: str   # the environment variable it came from
    value: str      # its text, as the user wrote it
    op: str         # and, or, mod, div
    operand: int

    def color(self, proc: int) -> int:
        if self.op == "and":
            return proc & self.operand
        if self.op == "or":
            return proc | self.operand
        if self.op == "mod":
            return proc % self.operand
        return proc // self.operand

    def colors(self, world_size: int, ranks_per_proc: int = 1) -> tuple[int, ...]:
        """Every rank's color; rank r belongs to nccl-tests' process ``r // ranks_per_proc``."""
        return tuple(self.color(r // max(1, ranks_per_proc)) for r in range(world_size))

    def __str__(self) -> str:
        return f"{self.variable}={self.value!r}"


def _bad(variable: str, value: str, why: str) -> UsageError:
    return UsageError(f"{variable}={value!r}: {why}")


def _c_int(variable: str, value: str, digits: str) -> int:
    """The operand as nccl-tests' parseInt reads it (strtoul base 0, or base 2 after '0b'), checked."""
    text = digits.strip()
    for prefix, base in (("0b", 2), ("0x", 16)):
        if text[:2].lower() == prefix:
            text, number_base = text[2:], base
            break
    else:
        number_base = 8 if len(text) > 1 and text.startswith("0") else 10
    if text.startswith(("-", "+")):
        raise _bad(variable, value, "the value must be >= 0 (nccl-tests reads it unsigned and would wrap it)")
    try:
        number = int(text, number_base) if text else None
    except ValueError:
        number = None
    if number is None:
        raise _bad(variable, value, f"{digits.strip()!r} is not a number; expected {_SYNTAX}")
    if number > _INT_MAX:
        raise _bad(variable, value, f"the value must be <= {_INT_MAX} (nccl-tests keeps it in a C int)")
    return number


def parse_split(value: str, variable: str = SPLIT_VAR) -> Split:
    """``NCCL_TESTS_SPLIT``'s value as nccl-tests reads it; a UsageError naming the variable otherwise."""
    for spelling, op in _OPERATIONS:
        if value[:len(spelling)].upper() == spelling:
            operand = _c_int(variable, value, value[len(spelling):])
            if op in ("mod", "div") and operand == 0:
                raise _bad(variable, value, f"{spelling} 0 divides by zero")
            return Split(variable, value, op, operand)
    raise _bad(variable, value, f"expected {_SYNTAX} (nccl-tests would quietly run one group)")


def parse_mask(value: str, variable: str = MASK_VAR) -> Split:
    """``NCCL_TESTS_SPLIT_MASK``'s value: a hexadecimal mask (``strtoul(value, NULL, 16)``); empty is 0."""
    if not value.strip():
        return Split(variable, value, "and", 0)
    m = _HEX.fullmatch(value)
    if m is None:
        raise _bad(variable, value, "expected a hexadecimal mask, e.g. 0x1 or 7 (nccl-tests reads it in base 16)")
    mask = int(m.group(1), 16)
    if mask > _INT_MAX:
        raise _bad(variable, value, f"the mask must be <= {_INT_MAX:#x}")
    return Split(variable, value, "and", mask)


def from_env(environ: Mapping[str, str] | None = None) -> Split | None:
    """The split the environment asks for (the mask first, as nccl-tests reads it); None for none."""
    env = os.environ if environ is None else environ
    if MASK_VAR in env:
        return parse_mask(env[MASK_VAR])
    if env.get(SPLIT_VAR):  # empty: nccl-tests matches no operation, one group
        return parse_split(env[SPLIT_VAR])
    return None


@dataclass(frozen=True)
class Groups:
    """The groups of a job: every rank's color. A group's ranks are in world order (the split's key)."""

    colors: tuple[int, ...]

    def members(self, rank: int) -> tuple[int, ...]:
        """The world ranks in ``rank``'s group, in order (a group rank is an index here)."""
        return tuple(r for r, c in enumerate(self.colors) if c == self.colors[rank])

    @property
    def by_color(self) -> dict[int, tuple[int, ...]]:
        """Each color's ranks, colors in ascending order (the order every rank creates the groups in)."""
        return {c: tuple(r for r, k in enumerate(self.colors) if k == c) for c in sorted(set(self.colors))}

    @property
    def count(self) -> int:
        return len(set(self.colors))

    @property
    def smallest(self) -> int:
        return min(len(m) for m in self.by_color.values())

    def describe(self) -> str:
        """'2 groups: 0 = ranks 0,2; 1 = ranks 1,3'."""
        parts = "; ".join(f"{c} = rank{'s' if len(m) > 1 else ''} {','.join(map(str, m))}"
                          for c, m in self.by_color.items())
        return f"{self.count} group{'s' if self.count > 1 else ''}: {parts}"


def groups_of(split: Split | None, world_size: int, ranks_per_proc: int = 1) -> Groups:
    """The job's groups under ``split`` (None: one group of every rank, color 0)."""
    if split is None:
        return Groups((0,) * world_size)
    return Groups(split.colors(world_size, ranks_per_proc))
