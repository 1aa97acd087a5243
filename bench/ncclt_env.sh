# Sourced by the scripts that run nccl-tests beside ccltune on one GPU (eager_vs_ncclt.sh,
# graph_first_size.sh): the environment of every process they start (NVLink multicast off, as
# scripts/device.sh sets it; ccltune from this checkout), where nccl-tests' source and build are
# (NCCL_TESTS_DIR, NCCLT_BUILD), and need_ncclt, which builds the missing benchmarks.
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH="$REPO/src${PYTHONPATH:+:$PYTHONPATH}"
SRC="${NCCL_TESTS_DIR:-$REPO/.cache/ncclt-src/v2.19.6}"
B="${NCCLT_BUILD:-$REPO/.cache/ncclt-build-$(basename "$SRC")}"

need_ncclt() {  # $1: the collectives, $2: the build log; exits when the build fails
  local c missing=0
  for c in $1; do [ -x "$B/${c}_perf" ] || missing=1; done
  [ $missing = 0 ] && return 0
  NCCL_TESTS_DIR="$SRC" BUILDDIR="$B" COLLS="$1" bash "$HERE/nccl_tests_build.sh" > "$2" 2>&1 \
    || { echo "$(basename "$0"): building nccl-tests failed:"; tail -15 "$2"; exit 1; }
}
