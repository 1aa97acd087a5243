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
    min_nccl: int = 0  # the NCCL_VERSION_CODE that first has it (0: every version ccltune runs)
    min_sm: int = 0    # the compute capability (major*10+minor) NCCL needs to reduce it


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
    # NCCL 2.24 added FP8; nccl-tests runs them only on sm_90 and newer (common.cu filters them
    # out of -d all below 900), and NCCL 2.28.9 refuses avg on them ('invalid argument')
    DType("f8e4m3", "float8_e4m3fn", 10, 1, True, min_nccl=22400, min_sm=90),
    DType("f8e5m2", "float8_e5m2", 11, 1, True, min_nccl=22400, min_sm=90),
)}
_DTYPE_ALIASES = {
    "char": "int8", "int": "int32", "float32": "float", "fp32": "float", "float16": "half",
    "fp16": "half", "float64": "double", "fp64": "double", "bf16": "bfloat16",
    "float8e4m3": "f8e4m3", "float8_e4m3": "f8e4m3", "float8_e4m3fn": "f8e4m3", "fp8e4m3": "f8e4m3",
    "float8e5m2": "f8e5m2", "float8_e5m2": "f8e5m2", "fp8e5m2": "f8e5m2",
}

# ncclRedOp_t; mulsum is NCCL's pre-multiplied sum (ncclRedOpCreatePreMulSum, NCCL >= 2.11): each
# rank's input is multiplied by that rank's scalar (MULSUM_SCALAR) before the sum. Its op handle
# is made per communicator at run time, so it has no fixed enum value here.
OPS = {"sum": 0, "prod": 1, "max": 2, "min": 3, "avg": 4, "mulsum": None}
ALL = "all"  # -d all, -o all, -r all: every value, in nccl-tests' order (DTYPES' and OPS' order)


def mulsum_scalar(rank: int) -> int:
    """Rank ``rank``'s mulsum scalar: 1 or 2, exact in every datatype (even FP8), so the expected
    result stays an exact small integer."""
    return 1 + rank % 2


def dtypes(name: str, where: str = "-d/--datatype") -> list[DType]:
    """-d: one datatype, or 'all' (every datatype, in nccl-tests' order)."""
    return list(DTYPES.values()) if name.strip().lower() == ALL else [dtype(name, where)]


def ops(name: str, where: str = "-o/--op") -> list[str]:
    """-o: one op, or 'all' (sum, prod, max, min, avg, mulsum: nccl-tests' order)."""
    return list(OPS) if name.strip().lower() == ALL else [op(name, where)]


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
