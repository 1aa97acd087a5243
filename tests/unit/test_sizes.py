"""Byte sizes as typed on the command line, and the series of sizes nccl-tests visits."""

from __future__ import annotations

import pytest

from ccltune.errors import UsageError
from ccltune.sizes import format_size, parse_size, size_series


@pytest.mark.parametrize("text, value", [
    ("8", 8), ("0", 0), ("64K", 65536), ("64k", 65536), ("1M", 1 << 20), ("2G", 2 << 30), ("1T", 1 << 40),
    ("128KB", 128 << 10), ("1MiB", 1 << 20), ("8B", 8), (" 16M ", 16 << 20), ("3 K", 3 << 10),
])
def test_parse_size(text, value):
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["", "abc", "-1", "1X", "K", "1KK", "0x10", "1e3"])
def test_parse_size_rejects_and_names_flag_and_value(text):
    with pytest.raises(UsageError) as ei:
        parse_size(text, "-b/--minbytes")
    assert str(ei.value).startswith("-b/--minbytes: ")
    assert repr(text) in str(ei.value)


@pytest.mark.parametrize("n, text", [(8, "8"), (1024, "1K"), (1536, "1536"), (65536, "64K"), (1 << 20, "1M"),
                                     (3 << 30, "3G"), (1 << 40, "1T"), (1025 << 10, "1025K"), (0, "0")])
def test_format_size(n, text):
    assert format_size(n) == text


@pytest.mark.parametrize("n", [1, 8, 1000, 4096, 3 << 20, 12 << 30])
def test_format_parse_round_trip(n):
    assert parse_size(format_size(n)) == n


def test_series_by_factor_like_nccl_tests():
    assert size_series(8, 4096, factor=8) == [8, 64, 512, 4096]
    assert size_series(8, 128, factor=2) == [8, 16, 32, 64, 128]
    assert size_series(8, 100, factor=2) == [8, 16, 32, 64]   # the last size never exceeds -e
    assert size_series(1024, 1024, factor=2) == [1024]


def test_series_by_increment():
    assert size_series(100, 400, increment=100) == [100, 200, 300, 400]
    assert size_series(100, 350, factor=0, increment=100) == [100, 200, 300]


def test_series_from_zero_still_advances():
    assert size_series(0, 4, factor=2) == [0, 1, 2, 4]


def test_series_non_integer_factor():
    assert size_series(8, 64, factor=2.5) == [8, 20, 50]


@pytest.mark.parametrize("kwargs, needle", [
    (dict(min_bytes=64, max_bytes=8, factor=2), "-b/--minbytes must be <= -e/--maxbytes, got 64 > 8"),
    (dict(min_bytes=8, max_bytes=64, factor=1.5), "-f/--stepfactor must be >= 2 (or 0 or 1: step by -i), got 1.5"),
    (dict(min_bytes=8, max_bytes=64, factor=0, increment=0), "-i/--stepbytes must be > 0, got 0"),
    (dict(min_bytes=8, max_bytes=64, factor=-2), "-f/--stepfactor must be >= 2 (or 0 or 1: step by -i), got -2"),
])
def test_series_errors(kwargs, needle):
    with pytest.raises(UsageError) as ei:
        size_series(**kwargs)
    assert needle in str(ei.value)


def test_nccl_tests_size_grammar():
    """nccl-tests' parsesize: a fraction before a binary suffix, truncated to whole bytes."""
    assert parse_size("1.5M") == 1572864 and parse_size("0.5K") == 512 and parse_size(".5k") == 512
    assert parse_size("1.7") == 1


def test_step_factor_one_steps_by_increment():
    assert size_series(8, 32, factor=1, increment=8) == [8, 16, 24, 32]


@pytest.mark.parametrize("text", ["1.5M", " 8", "8 ", "64KiB", "0x10", "", "1e3", "１２"])
def test_rule_grammar_is_the_plugins(text):
    """One parse_size, two grammars: the rule-file grammar is the C plugin's (digits, one suffix,
    an optional B), stricter than nccl-tests' command-line grammar, because the plugin reads the
    same rule file inside NCCL and must not drop a line that Python accepted."""
    from ccltune.sizes import RULE_FILE

    with pytest.raises(ValueError, match="invalid size"):
        parse_size(text, "minbytes", grammar=RULE_FILE)


def test_both_grammars_agree_on_plain_sizes():
    from ccltune.sizes import RULE_FILE

    for text in ("8", "64K", "1m", "2GB", "3t", "4096b"):
        assert parse_size(text, grammar=RULE_FILE) == parse_size(text)
    with pytest.raises(ValueError, match="does not fit in 64 bits"):
        parse_size("99999999999T", grammar=RULE_FILE)
