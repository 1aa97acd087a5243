"""The in-run arms' schedule (pure): which arm a block runs, the Python twin of the tuner plugin's C
(``plugin/src/arms*.c``; the contract: /work/CONTRACTS.md section 2, docs/ab.md "In-run arms").

Block ``b`` (0-based, counted from a communicator's first tuner call after its period is known):
``b < warmup_blocks``: arm 0 (NCCL's default); then one warm-up round (arms 0..K-1 in order, discarded by
the analysis); then rounds r = 0, 1, ...: the arms in the order of a Fisher-Yates shuffle of 0..K-1 driven by
splitmix64 seeded with ``seed ^ r`` (j = next() % (i + 1), i from K-1 down to 1). Every rank computes the
same arm for the same block: nothing here reads a clock."""

from __future__ import annotations

MASK = (1 << 64) - 1
WARMUP = -2          # round_of: a warm-up block on arm 0
WARMUP_ROUND = -1    # round_of: the warm-up round (each arm once, in order)


class SplitMix64:
    """splitmix64 (Steele, Lea, Flood 2014), as the C: state += golden gamma, then the mix."""

    def __init__(self, state: int):
        self.state = state & MASK

    def next(self) -> int:
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)


def round_order(seed: int, rnd: int, n_arms: int) -> list[int]:
    """Round ``rnd``'s (>= 0) order of the arms 0..n_arms-1."""
    order = list(range(n_arms))
    rng = SplitMix64((seed ^ rnd) & MASK)
    for i in range(n_arms - 1, 0, -1):
        j = rng.next() % (i + 1)
        order[i], order[j] = order[j], order[i]
    return order


def round_of(block: int, n_arms: int, warmup_blocks: int) -> tuple[int, int]:
    """(round, place in the round) of ``block``: round WARMUP for the first ``warmup_blocks`` blocks,
    WARMUP_ROUND for the next ``n_arms``, then 0, 1, ..."""
    if block < warmup_blocks:
        return WARMUP, block
    b = block - warmup_blocks
    return b // n_arms - 1, b % n_arms


def arm_at(block: int, n_arms: int, seed: int, warmup_blocks: int) -> int:
    """The arm (0 = NCCL's default) of ``block``."""
    if n_arms < 1 or block < 0:
        raise ValueError(f"arm_at needs n_arms >= 1 and block >= 0, got {n_arms}, {block}")
    rnd, place = round_of(block, n_arms, warmup_blocks)
    if rnd == WARMUP:
        return 0
    if rnd == WARMUP_ROUND:
        return place
    return round_order(seed, rnd, n_arms)[place]
