"""Datatypes and reduction ops, with nccl-tests' spellings and NCCL's enum values."""

from __future__ import annotations

from dataclasses import dataclass

from ccltune.errors import unknown_name


@dataclass(frozen=True)
class DType:
    name: str          # nccl-tests' spelling, printed in the 'type' column
    torch_name: str    # attribute of the torch module
    nccl: int          # ncclDataType_t
    size: int          # bytes per element
    is_float: bool


DTYPES: dict[str, DType] = {d.name: d for d in (
    DType("int8", "int8", 0, 1, False),
    DType("uint8", "uint8", 1, 1, False),
    DType("int32", "int32", 2, 4, False),
    DType("uint32", "uint32", 3, 4, False),
    DType("int64", "int64", 4, 8, False),
    DType("uint64", "uint64", 5, 8, False),
    DType("half", "float16", 6, 2, True),
    DType("float", "float32", 7, 4, True),
    DType("double", "float64", 8, 8, True),
    DType("bfloat16", "bfloat16", 9, 2, True),
)}
_DTYPE_ALIASES = {
    "char": "int8", "int": "int32", "float32": "float", "fp32": "float", "float16": "half",
    "fp16": "half", "float64": "double", "fp64": "double", "bf16": "bfloat16",
}

OPS = {"sum": 0, "prod": 1, "max": 2, "min": 3, "avg": 4}


def dtype(name: str, where: str = "-d/--datatype") -> DType:
    key = name.strip().lower()
    key = _DTYPE_ALIASES.get(key, key)
    if key not in DTYPES:
        raise unknown_name("datatype", name, DTYPES, where)
    return DTYPES[key]


def op(name: str, where: str = "-o/--op") -> str:
    key = name.strip().lower()
    if key not in OPS:
        raise unknown_name("op", name, OPS, where)
    return key
