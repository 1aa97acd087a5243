#!/usr/bin/env bash
# nccl-tests against `ccltune bench` on several GPUs, each a process per GPU: nccl-tests built with MPI
# (bench/nccl_tests_build.sh) under `mpirun -np N`, ccltune under `--nproc N` (torchrun), eager and with CUDA
# graphs, run alternately (ABBA order: nccl-tests, ccltune, ccltune, nccl-tests, ...), REPS runs of each per
# rank count and mode; then bench/compare_repeated.py per (rank count, mode): per size both programs' medians,
# each one's run-to-run spread (slowest / fastest run - 1), whether their ranges of runs overlap, and the
# sizes outside the targets beyond both spreads. The one-GPU script is bench/eager_vs_ncclt.sh.
#
#   bench/eager_vs_ncclt_mpi.sh OUTDIR
#
# Environment:
#   NPROCS          rank counts                 (default: 2 4)
#   COLLS           collectives                 (default: all_reduce all_gather sendrecv)
#   SIZES           the size flags of both      (default: -b 8 -e 1G -f 4)
#   EAGER           eager mode's flags          (default: -n 100 -w 20)
#   GRAPH           graph mode's flags          (default: -n 20 -w 5 -G 10)
#   MODES           which modes                 (default: eager graph)
#   GRAPH_NPROCS    rank counts of graph mode   (default: NPROCS)
#   REPS            runs of each program        (default: 4)
#   NCCL_TESTS_DIR, NCCLT_BUILD: nccl-tests' source and build (bench/ncclt_env.sh)
# ccltune runs every collective of a repeat in one process (its start-up is seconds: a process per
# collective would double the wall time); nccl-tests runs one process per collective, as it must.
# Needs: N GPUs, nvcc, mpicc/mpirun, ccltune's native/ and plugin/ built, PYTHONPATH=src (set here).
set -u
OUTDIR="${1:?usage: bench/eager_vs_ncclt_mpi.sh OUTDIR}"
source "$(dirname "${BASH_SOURCE[0]}")/ncclt_env.sh"
NPROCS="${NPROCS:-2 4}"
COLLS="${COLLS:-all_reduce all_gather sendrecv}"
SIZES="${SIZES:--b 8 -e 1G -f 4}"
EAGER="${EAGER:--n 100 -w 20}"
GRAPH="${GRAPH:--n 20 -w 5 -G 10}"
MODES="${MODES:-eager graph}"
GRAPH_NPROCS="${GRAPH_NPROCS:-$NPROCS}"
REPS="${REPS:-4}"
mkdir -p "$OUTDIR"
need_ncclt "$COLLS" "$OUTDIR/ncclt-build.log"
MPI=(mpirun --allow-run-as-root --bind-to none -x NCCL_NVLS_ENABLE -x TORCH_SYMM_MEM_DISABLE_MULTICAST -x NVSHMEM_DISABLE_NVLS)

nt() {  # nccl-tests, one run of every collective: $1 dir, $2 run, $3 ranks, $4 flags
  for c in $COLLS; do
    timeout 120 "${MPI[@]}" -np "$3" "$B/${c}_perf" $SIZES $4 -g 1 > "$1/ncclt-$2-$c.txt" 2>&1 \
      || echo "nccl-tests $c np $3 run $2 failed: $(tail -2 "$1/ncclt-$2-$c.txt")"
  done
}
cc() {  # ccltune bench, every collective in one process per GPU: $1 dir, $2 run, $3 ranks, $4 flags
  timeout 240 python3 -m ccltune bench $COLLS $SIZES $4 --nproc "$3" --db "$1/ccltune.db" --json "$1/ccl-$2.json" \
    > "$1/ccl-$2.txt" 2>&1 || echo "ccltune np $3 run $2 failed: $(tail -3 "$1/ccl-$2.txt")"
}
for mode in $MODES; do
  flags="$EAGER"; counts="$NPROCS"
  [ "$mode" = graph ] && { flags="$GRAPH"; counts="$GRAPH_NPROCS"; }
  for n in $counts; do
    W="$OUTDIR/np$n-$mode"; mkdir -p "$W"; rm -f "$W"/ncclt-*.txt "$W"/ccl-*.json
    t0=$(date +%s)
    for r in $(seq 1 "$REPS"); do
      if [ $((r % 2)) = 1 ]; then nt "$W" $r $n "$flags"; cc "$W" $r $n "$flags"; else cc "$W" $r $n "$flags"; nt "$W" $r $n "$flags"; fi
    done
    echo "## $n ranks, $mode ($flags): $REPS runs each, $(( $(date +%s) - t0 )) s; $SIZES; $COLLS"
    python3 "$HERE/compare_repeated.py" "$W" | tee "$W/compare.txt"
  done
done
