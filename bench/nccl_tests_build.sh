#!/usr/bin/env bash
# Build NVIDIA's nccl-tests (a local, untracked copy in .cache/nccl-tests) with
# MPI support, as an outside measurement reference for ccltune. Works offline:
# everything comes from the machine (nvcc, the nvidia-nccl wheel, Open MPI).
#
# Output: .cache/nccl-tests/build/<coll>_perf for the nine collectives below.
# Only those nine are built (explicit make targets): the copy holds no
# alltoallv.cu / hypercube.cu, so a bare `make` in src/ would fail.
#
# Environment overrides:
#   NCCL_TESTS_DIR  source tree            (default: <repo>/.cache/nccl-tests)
#   BUILDDIR        output dir             (default: $NCCL_TESTS_DIR/build)
#   CUDA_HOME       CUDA toolkit           (default: from nvcc on PATH, else /usr/local/cuda)
#   NCCL_HOME       dir with include/ lib/ (default: the nvidia.nccl Python wheel of python3)
#   MPI_HOME        Open MPI prefix        (default: derived from mpicc --showme)
#   MPICC           Open MPI C wrapper     (default: mpicc)
#   NVCC_GENCODE    target arch flags      (default: sm_90 only)
#   JOBS            make -j                (default: 16)
#   COLLS           benchmarks to build    (default: the nine below)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
SRC="${NCCL_TESTS_DIR:-$REPO/.cache/nccl-tests}"
die() { echo "nccl_tests_build: $*" >&2; exit 1; }

[ -f "$SRC/src/Makefile" ] && [ -f "$SRC/src/common.cu" ] || die \
  "nccl-tests source not found at $SRC (expected src/Makefile, src/common.cu).
  It is a local, git-ignored copy of NVIDIA/nccl-tests 2.19.0 (src/, verifiable/, os/),
  never committed; put it there (and carry .cache/nccl-tests to the GPU machine) first."

BUILDDIR="${BUILDDIR:-$SRC/build}"
mkdir -p "$BUILDDIR"
BUILDDIR="$(cd "$BUILDDIR" && pwd)"
COLLS="${COLLS:-all_reduce all_gather reduce_scatter broadcast reduce alltoall gather scatter sendrecv}"
NVCC_GENCODE="${NVCC_GENCODE:--gencode=arch=compute_90,code=sm_90}"
JOBS="${JOBS:-16}"

# --- CUDA -------------------------------------------------------------------
if [ -z "${CUDA_HOME:-}" ]; then
  if command -v nvcc >/dev/null 2>&1; then
    CUDA_HOME="$(cd "$(dirname "$(command -v nvcc)")/.." && pwd)"
  else
    CUDA_HOME=/usr/local/cuda
  fi
fi
[ -x "$CUDA_HOME/bin/nvcc" ] || die "nvcc not found at $CUDA_HOME/bin/nvcc (set CUDA_HOME)"
CUDA_LIB="${CUDA_LIB:-}"
if [ -z "$CUDA_LIB" ]; then
  for d in "$CUDA_HOME/lib64" "$CUDA_HOME/lib" "$CUDA_HOME/targets/x86_64-linux/lib"; do
    if ls "$d"/libcudart.so* >/dev/null 2>&1; then CUDA_LIB="$d"; break; fi
  done
fi
[ -n "$CUDA_LIB" ] || die "libcudart not found under $CUDA_HOME (set CUDA_LIB)"

# --- NCCL (from the wheel; it ships libnccl.so.2 but no libnccl.so) ----------
if [ -z "${NCCL_HOME:-}" ]; then
  NCCL_HOME="$(python3 -c "import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__) if nvidia.nccl.__file__ else list(nvidia.nccl.__path__)[0])" 2>/dev/null)" \
    || die "NCCL_HOME not set and python3 cannot import nvidia.nccl"
fi
[ -f "$NCCL_HOME/include/nccl.h" ] || die "nccl.h not found under $NCCL_HOME/include"
NCCL_SO=""
for f in "$NCCL_HOME/lib/libnccl.so" "$NCCL_HOME/lib/libnccl.so.2"; do
  [ -e "$f" ] && { NCCL_SO="$(readlink -f "$f")"; break; }
done
[ -n "$NCCL_SO" ] || die "libnccl.so(.2) not found under $NCCL_HOME/lib"
NCCL_LIBDIR="$(dirname "$NCCL_SO")"

# Link-time view: include/ of the wheel, lib/ holding libnccl.so (and
# libcudart.so if the toolkit only has the versioned name).
SHIM="$(mktemp -d "${TMPDIR:-/tmp}/nccl_tests_build.XXXXXX")"
trap 'rm -rf "$SHIM"' EXIT
mkdir -p "$SHIM/nccl/lib" "$SHIM/cuda"
ln -s "$NCCL_HOME/include" "$SHIM/nccl/include"
ln -s "$NCCL_SO" "$SHIM/nccl/lib/libnccl.so"
if [ ! -e "$CUDA_LIB/libcudart.so" ]; then
  CUDART_SO="$(ls "$CUDA_LIB"/libcudart.so.* 2>/dev/null | head -1)"
  ln -s "$CUDART_SO" "$SHIM/cuda/libcudart.so"
  CUDA_LINK_LIB="$SHIM/cuda"
else
  CUDA_LINK_LIB="$CUDA_LIB"
fi

# --- Open MPI ---------------------------------------------------------------
MPICC="${MPICC:-mpicc}"
if [ -z "${MPI_HOME:-}" ]; then
  command -v "$MPICC" >/dev/null 2>&1 || die "$MPICC not found (set MPI_HOME or MPICC)"
  for inc in $("$MPICC" --showme:incdirs 2>/dev/null); do
    if [ -f "$inc/mpi.h" ]; then MPI_HOME="$(cd "$inc/.." && pwd)"; break; fi
  done
  if [ -z "${MPI_HOME:-}" ] || [ ! -f "$MPI_HOME/include/mpi.h" ]; then
    MPI_HOME="$(cd "$(dirname "$(command -v "$MPICC")")/.." && pwd)"
  fi
fi
[ -f "$MPI_HOME/include/mpi.h" ] || die "mpi.h not found at $MPI_HOME/include (set MPI_HOME)"
[ -e "$MPI_HOME/lib/libmpi.so" ] || [ -e "$MPI_HOME/lib64/libmpi.so" ] \
  || die "libmpi.so not found in $MPI_HOME/lib or $MPI_HOME/lib64 (set MPI_HOME)"
MPI_LIBDIRS="$("$MPICC" --showme:libdirs 2>/dev/null | tr ' ' ':' || true)"

# No -rpath in nccl-tests' link line, so ld takes the run path from LD_RUN_PATH.
export LD_RUN_PATH="$NCCL_LIBDIR:$MPI_HOME/lib${MPI_LIBDIRS:+:$MPI_LIBDIRS}:$CUDA_LIB"

echo "source:       $SRC"
echo "build dir:    $BUILDDIR"
echo "nvcc:         $CUDA_HOME/bin/nvcc ($("$CUDA_HOME/bin/nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'))"
echo "NCCL_HOME:    $NCCL_HOME (lib $NCCL_SO)"
echo "MPI_HOME:     $MPI_HOME"
echo "NVCC_GENCODE: $NVCC_GENCODE"
echo "run path:     $LD_RUN_PATH"

TARGETS=()
for c in $COLLS; do TARGETS+=("$BUILDDIR/${c}_perf"); done

set -x
make -C "$SRC/src" -j"$JOBS" \
  MPI=1 MPI_HOME="$MPI_HOME" \
  CUDA_HOME="$CUDA_HOME" CUDA_LIB="$CUDA_LINK_LIB" \
  NCCL_HOME="$SHIM/nccl" \
  NVCC_GENCODE="$NVCC_GENCODE" \
  BUILDDIR="$BUILDDIR" \
  "${TARGETS[@]}"
{ set +x; } 2>/dev/null

missing=0
for t in "${TARGETS[@]}"; do
  if [ -x "$t" ]; then
    if ldd "$t" 2>/dev/null | grep -q "not found"; then
      echo "warning: unresolved libraries for $t:" >&2
      ldd "$t" | grep "not found" >&2
    fi
  else
    echo "missing: $t" >&2; missing=1
  fi
done
[ "$missing" = 0 ] || die "some benchmarks were not built"
echo "built nccl-tests binaries in $BUILDDIR:"
for t in "${TARGETS[@]}"; do echo "  $t"; done
