"""nccl-tests' parallel groups: the color of each rank from NCCL_TESTS_SPLIT / NCCL_TESTS_SPLIT_MASK, as
nccl-tests 2.19.6 computes it (src/common.cu, run(): the operations, parseInt, strtoul(mask, 16)), and the
examples of its README ("Running multiple operations in parallel")."""

from __future__ import annotations

import pytest

from ccltune import groups
from ccltune.errors import UsageError


def _partition(colors):
    """The groups as sets of ranks (README examples agree on the grouping, not the color values)."""
    return sorted(sorted(r for r, c in enumerate(colors) if c == k) for k in set(colors))


def _colors(value, n=16, variable=groups.SPLIT_VAR):
    return groups.groups_of(groups.from_env({variable: value}), n).colors


@pytest.mark.parametrize("a, b", [("AND 0x7", "MOD 8"), ("OR 0x7", "DIV 8"), ("AND 0x1", "MOD 2")])
def test_the_readme_examples_pair_up_on_two_nodes_of_8_gpus(a, b):
    assert _partition(_colors(a)) == _partition(_colors(b))


def test_the_readme_examples_mean_what_it_says():
    # AND 0x7 / MOD 8: 8 groups, each one GPU per node (ranks r and r + 8)
    assert _partition(_colors("MOD 8")) == [[r, r + 8] for r in range(8)]
    # OR 0x7 / DIV 8: one group per node (colors 7 and 15 with OR, 0 and 1 with DIV)
    assert _colors("OR 0x7") == (7,) * 8 + (15,) * 8 and _colors("DIV 8") == (0,) * 8 + (1,) * 8
    # AND 0x1 / MOD 2: every other rank
    assert _partition(_colors("AND 0x1")) == [list(range(0, 16, 2)), list(range(1, 16, 2))]


@pytest.mark.parametrize("value, colors", [
    ("AND 0x1", (0, 1, 0, 1)), ("&1", (0, 1, 0, 1)), ("and 0b10", (0, 0, 2, 2)),
    ("OR 4", (4, 5, 6, 7)), ("|0x4", (4, 5, 6, 7)),
    ("MOD 2", (0, 1, 0, 1)), ("%3", (0, 1, 2, 0)), ("mod\t3  ", (0, 1, 2, 0)),
    ("DIV 2", (0, 0, 1, 1)), ("/ 2", (0, 0, 1, 1)), ("Div 010", (0, 0, 0, 0)),  # 010: octal 8, as strtoul reads it
    ("MOD 0B11", (0, 1, 2, 0)), ("DIV 0X2", (0, 0, 1, 1)),
])
def test_every_spelling_nccl_tests_accepts(value, colors):
    assert _colors(value, 4) == colors


@pytest.mark.parametrize("value, colors", [("0x1", (0, 1, 0, 1)), ("1", (0, 1, 0, 1)), ("2", (0, 0, 2, 2)),
                                           ("10", (0,) * 4), ("0X3", (0, 1, 2, 3)), ("", (0,) * 4)])
def test_the_mask_is_hexadecimal_as_nccl_tests_reads_it(value, colors):
    """strtoul(mask, NULL, 16): '10' is 16 (nccl-tests' README says '&<value>', which reads decimal)."""
    assert _colors(value, 4, groups.MASK_VAR) == colors


def test_the_mask_wins_over_the_split_and_empty_means_none():
    assert groups.from_env({groups.MASK_VAR: "1", groups.SPLIT_VAR: "DIV 2"}).variable == groups.MASK_VAR
    assert groups.from_env({groups.SPLIT_VAR: ""}) is None and groups.from_env({}) is None


def test_a_process_of_several_gpus_is_colored_once():
    """-g 2: nccl-tests colors each MPI process; ccltune's ranks 2p and 2p+1 are its process p."""
    assert groups.groups_of(groups.parse_split("MOD 2"), 8, 2).colors == (0, 0, 1, 1, 0, 0, 1, 1)


@pytest.mark.parametrize("variable, value, why", [
    (groups.SPLIT_VAR, "0x1", "expected '<op><value>'"),       # no operation: nccl-tests runs one group
    (groups.SPLIT_VAR, "XOR 1", "expected '<op><value>'"),
    (groups.SPLIT_VAR, " MOD 2", "expected '<op><value>'"),    # nccl-tests compares the very start
    (groups.SPLIT_VAR, "MOD", "'' is not a number"),
    (groups.SPLIT_VAR, "MOD two", "'two' is not a number"),
    (groups.SPLIT_VAR, "MOD 2x", "'2x' is not a number"),      # nccl-tests would read 2 and drop the rest
    (groups.SPLIT_VAR, "AND 0b", "'0b' is not a number"),
    (groups.SPLIT_VAR, "MOD 0", "MOD 0 divides by zero"),      # nccl-tests: SIGFPE
    (groups.SPLIT_VAR, "/0x0", "/ 0 divides by zero"),
    (groups.SPLIT_VAR, "OR -1", "must be >= 0"),
    (groups.SPLIT_VAR, "AND 4294967296", "must be <= 2147483647"),
    (groups.MASK_VAR, "0xg", "expected a hexadecimal mask"),
    (groups.MASK_VAR, "MOD 2", "expected a hexadecimal mask"),
    (groups.MASK_VAR, "0x80000000", "must be <= 0x7fffffff"),
])
def test_a_bad_value_is_refused_naming_the_variable_and_the_value(variable, value, why):
    with pytest.raises(UsageError) as err:
        groups.from_env({variable: value})
    assert str(err.value).startswith(f"{variable}={value!r}: ") and why in str(err.value)


def test_groups_keep_world_order_and_describe_themselves():
    job = groups.groups_of(groups.parse_split("DIV 3"), 5)
    assert job.colors == (0, 0, 0, 1, 1) and job.members(4) == (3, 4) and job.smallest == 2
    assert job.describe() == "2 groups: 0 = ranks 0,1,2; 1 = ranks 3,4"
    assert groups.groups_of(None, 3).describe() == "1 group: 0 = ranks 0,1,2"
