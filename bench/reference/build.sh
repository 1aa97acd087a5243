#!/usr/bin/env bash
# Build bench/reference/build/nccl_ref.
#
# Environment overrides:
#   NVCC        nvcc to use            (default: nvcc on PATH, else /usr/local/cuda/bin/nvcc)
#   NCCL_HOME   dir with include/ lib/ (default: the nvidia.nccl Python wheel of python3)
#   MPICXX      Open MPI C++ wrapper   (default: mpicxx)
#   ARCH        GPU arch               (default: sm_90)
#   COMPILE_ONLY=1  only produce the object file (no GPU/MPI libs needed to link)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OUT="$HERE/build"
mkdir -p "$OUT"

NVCC="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
MPICXX="${MPICXX:-mpicxx}"
ARCH="${ARCH:-sm_90}"

if [ -z "${NCCL_HOME:-}" ]; then
  NCCL_HOME="$(python3 -c "import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__) if nvidia.nccl.__file__ else list(nvidia.nccl.__path__)[0])")"
fi
[ -f "$NCCL_HOME/include/nccl.h" ] || { echo "nccl.h not found under $NCCL_HOME/include" >&2; exit 1; }

# MPI flags from the Open MPI wrapper, as plain -I / -L / -l so nvcc accepts them.
MPI_INC=()
for d in $("$MPICXX" --showme:incdirs); do MPI_INC+=("-I$d"); done
MPI_LIB=()
for d in $("$MPICXX" --showme:libdirs); do MPI_LIB+=("-L$d" "-Xlinker" "-rpath=$d"); done
for l in $("$MPICXX" --showme:libs); do MPI_LIB+=("-l$l"); done

echo "nvcc:      $NVCC"
echo "NCCL_HOME: $NCCL_HOME"
echo "MPI:       ${MPI_INC[*]} ${MPI_LIB[*]}"

set -x
"$NVCC" -O2 -std=c++17 -arch="$ARCH" \
  -I"$NCCL_HOME/include" "${MPI_INC[@]}" \
  -c "$HERE/nccl_ref.cu" -o "$OUT/nccl_ref.o"

if [ "${COMPILE_ONLY:-0}" = 1 ]; then exit 0; fi

"$NVCC" -O2 -arch="$ARCH" "$OUT/nccl_ref.o" -o "$OUT/nccl_ref" \
  -L"$NCCL_HOME/lib" -Xlinker -rpath="$NCCL_HOME/lib" -Xlinker -l:libnccl.so.2 \
  "${MPI_LIB[@]}"
{ set +x; } 2>/dev/null
echo "built $OUT/nccl_ref"
