"""The in-run arms schedule and period detection, the Python twin of the tuner plugin's
``plugin/src/arms_schedule.c`` (pure; tests/plugin/test_arms.py checks the two agree).

Block ``b`` (0-based, counted from the first call after the period is known) runs arm 0 while
``b < warmup_blocks``; then one warm-up round (arms 0..K-1 in order, each one block, discarded by the
analysis); then rounds r = 0, 1, ...: the arms in the order of a Fisher-Yates shuffle of 0..K-1 driven by
splitmix64 seeded with ``seed ^ r`` (i from K-1 down to 1: j = next() % (i + 1), swap). Format of the
arms file and the arm log: docs/plugin.md, "In-run arms".
"""

from __future__ import annotations

from collections.abc import Sequence

MASK64 = (1 << 64) - 1
MAX_ARMS = 32  # CCLT_ARMS_MAX
FIRST_CHECK = 1024  # CCLT_ARMS_FIRST_CHECK: period=auto is checked at 1024 * 4**k calls ...
KEY_CAP = 1 << 18  # CCLT_ARMS_KEY_CAP: ... up to 262,144 calls


def splitmix64(state: int) -> tuple[int, int]:
    """(next state, output) of splitmix64: the state advances by the golden gamma, the output is its mix."""
    state = (state + 0x9E3779B97F4A7C15) & MASK64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return state, z ^ (z >> 31)


def round_order(n_arms: int, seed: int, round_: int) -> list[int]:
    """The arms of round ``round_`` (0-based, after the warm-up round) in the order they run."""
    order = list(range(n_arms))
    state = (seed ^ round_) & MASK64
    for i in range(n_arms - 1, 0, -1):
        state, out = splitmix64(state)
        j = out % (i + 1)
        order[i], order[j] = order[j], order[i]
    return order


WARMUP = -2          # round_of: a warm-up block on arm 0
WARMUP_ROUND = -1    # round_of: the warm-up round (each arm once, in order)


def round_of(block: int, n_arms: int, warmup_blocks: int) -> tuple[int, int]:
    """(round, place in the round) of ``block``: round WARMUP for the first ``warmup_blocks`` blocks,
    WARMUP_ROUND for the next ``n_arms``, then 0, 1, ..."""
    if block < warmup_blocks:
        return WARMUP, block
    b = block - warmup_blocks
    return b // n_arms - 1, b % n_arms


def arm_at(block: int, n_arms: int, seed: int, warmup_blocks: int) -> int:
    """The arm block ``block`` runs (module doc)."""
    if not 1 <= n_arms <= MAX_ARMS:
        raise ValueError(f"n_arms must be 1 to {MAX_ARMS}, got {n_arms}")
    if block < 0 or warmup_blocks < 0:
        raise ValueError(f"block and warmup_blocks must be >= 0, got {block} and {warmup_blocks}")
    if block < warmup_blocks:
        return 0
    b = block - warmup_blocks
    if b < n_arms:
        return b  # the warm-up round
    round_, pos = divmod(b - n_arms, n_arms)
    return round_order(n_arms, seed, round_)[pos]


def detect_period(keys: Sequence[object]) -> int | None:
    """The smallest p <= len(keys) // 3 such that the last max(3p, ceil(n/2)) keys repeat with period p,
    or None: what the plugin finds when its call count reaches len(keys) (a check point). O(n): the
    Z-function of the reversed keys (p is a period of r[:L] exactly when z[p] >= L - p)."""
    r = list(reversed(keys))
    n = len(r)
    if n < 3:
        return None
    z = [0] * n
    z[0] = n
    left = right = 0
    for i in range(1, n):
        zi = min(right - i, z[i - left]) if i < right else 0
        while i + zi < n and r[zi] == r[i + zi]:
            zi += 1
        z[i] = zi
        if i + zi > right:
            left, right = i, i + zi
    half = (n + 1) // 2
    for p in range(1, n // 3 + 1):
        if z[p] >= max(3 * p, half) - p:
            return p
    return None


def checks() -> list[int]:
    """The call counts at which period=auto is checked."""
    out, n = [], FIRST_CHECK
    while n <= KEY_CAP:
        out.append(n)
        n *= 4
    return out


def step_period(p: int, step_calls: int | None) -> int:
    """The period blocks are made of from the sequence's own period ``p``: ``p``, or with ``step_calls`` (the
    arms file's step_calls) the multiple of ``p`` nearest to it, at least ``p`` (``ccl_arms_step_period``)."""
    if not p or not step_calls or step_calls <= 0:
        return p
    return p * max(1, (step_calls + p // 2) // p)


def find_period(keys: Sequence[object], step_calls: int | None = None) -> tuple[int, int] | None:
    """(period, period_found_at) as the plugin finds them over a communicator's calls in order, or None
    (period=none): the first check point within ``keys`` whose prefix has a period, that period raised to
    its multiple nearest to ``step_calls`` when given."""
    for n in checks():
        if n > len(keys):
            return None
        p = detect_period(keys[:n])
        if p is not None:
            return step_period(p, step_calls), n
    return None
