"""Datatypes and ops: nccl-tests' spellings, NCCL's enum values, did-you-mean errors."""

from __future__ import annotations

import pytest
import torch

from ccltune import datatypes
from ccltune.errors import UsageError


def test_dtypes_match_ncclDataType_t_and_torch():
    assert {d.name: d.nccl for d in datatypes.DTYPES.values()} == {
        "int8": 0, "uint8": 1, "int32": 2, "uint32": 3, "int64": 4, "uint64": 5,
        "half": 6, "float": 7, "double": 8, "bfloat16": 9, "f8e4m3": 10, "f8e5m2": 11}
    for d in datatypes.DTYPES.values():
        t = getattr(torch, d.torch_name)
        assert torch.empty(0, dtype=t).element_size() == d.size, d.name
        assert t.is_floating_point == d.is_float, d.name


def test_ops_match_ncclRedOp_t():
    assert datatypes.OPS == {"sum": 0, "prod": 1, "max": 2, "min": 3, "avg": 4, "mulsum": None}  # made per comm


@pytest.mark.parametrize("alias, name", [("fp16", "half"), ("float16", "half"), ("bf16", "bfloat16"),
                                         ("FP32", "float"), ("int", "int32"), ("char", "int8"),
                                         ("float64", "double"), (" Float ", "float")])
def test_dtype_aliases(alias, name):
    assert datatypes.dtype(alias).name == name


@pytest.mark.parametrize("text, suggestion", [("flaot", "float"), ("bfloat61", "bfloat16"), ("int33", "int32")])
def test_unknown_dtype_names_value_valid_ones_and_suggestion(text, suggestion):
    with pytest.raises(UsageError) as ei:
        datatypes.dtype(text)
    msg = str(ei.value)
    assert f"unknown datatype {text!r} in -d/--datatype" in msg
    assert f"did you mean {suggestion!r}" in msg
    assert all(d in msg for d in datatypes.DTYPES)


def test_unknown_dtype_without_close_match_has_no_suggestion():
    with pytest.raises(UsageError) as ei:
        datatypes.dtype("complex128")
    assert "did you mean" not in str(ei.value) and "valid: int8" in str(ei.value)


@pytest.mark.parametrize("text, suggestion", [("summ", "sum"), ("mx", "max"), ("prd", "prod")])
def test_unknown_op(text, suggestion):
    with pytest.raises(UsageError) as ei:
        datatypes.op(text)
    msg = str(ei.value)
    assert f"unknown op {text!r} in -o/--op" in msg and f"did you mean {suggestion!r}" in msg
    assert "valid: sum, prod, max, min, avg" in msg


def test_op_is_case_insensitive():
    assert datatypes.op("MAX") == "max"


@pytest.mark.parametrize("coll", ["all_reduce", "reduce_scatter", "reduce"])
def test_every_type_and_op_is_checked_exactly(coll):
    """mulsum, f8e4m3 and f8e5m2 included: the right result gives 0 wrong, one changed element 1."""
    import torch

    from ccltune import collectives, datatypes
    from ccltune.measure import buffers

    c = collectives.REGISTRY[coll]
    for d in datatypes.DTYPES.values():
        for op in datatypes.OPS:
            lay = c.layout(4096, d.size, 4, 0)
            exp = c.expected(torch, lay, 0, 4, op, 0, "cpu")
            bad = exp.clone()
            bad[0] += 50
            for value, wrong in ((exp, 0), (bad, 1)):
                got = buffers.Buffers(torch.empty(1), value.to(getattr(torch, d.torch_name)))
                assert buffers.count_wrong(torch, got, c, lay, d, 0, 4, op, 0) == wrong, (d.name, op)


def test_all_values_in_nccl_tests_order():
    from ccltune import datatypes

    assert [d.name for d in datatypes.dtypes("all")][-3:] == ["bfloat16", "f8e4m3", "f8e5m2"]
    assert datatypes.ops("ALL") == ["sum", "prod", "max", "min", "avg", "mulsum"]
    assert datatypes.mulsum_scalar(0) == 1 and datatypes.mulsum_scalar(3) == 2
