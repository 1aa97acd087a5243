#!/usr/bin/env bash
# nccl-tests against `ccltune bench` on one GPU, eager and with CUDA graphs, run alternately
# (ABBA order: nccl-tests, ccltune, ccltune, nccl-tests, ...), REPS runs of each, then
# bench/compare_repeated.py per mode: both medians, their ratio (ccltune / nccl-tests) per size,
# and each program's run-to-run spread (slowest / fastest run - 1). The eager rows show whether
# ccltune's launch loop (native/) issues calls as cheaply as nccl-tests' own loop. Results and how
# to read them: docs/performance.md, "Eager calls issued from C" (five runs: REPS=5).
#
#   bench/eager_vs_ncclt.sh OUTDIR
#
# Environment:
#   NCCL_TESTS_DIR  nccl-tests source tree     (default: <repo>/.cache/ncclt-src/v2.19.6)
#   NCCLT_BUILD     where it is built           (default: <repo>/.cache/ncclt-build-v2.19.6)
#   COLLS           collectives                 (default: the nine)
#   SIZES           the size flags of both      (default: -b 8 -e 1M -f 32 -n 1000 -w 50)
#   REPS            runs of each program a mode (default: 3)
#   GRAPH           the -G of the graph mode    (default: 10)
#   MODES           which modes                 (default: eager graph)
#   PIN             a prefix for both programs  (e.g. "taskset -c 0-7"; default: none)
#   CCLTUNE_FLAGS   more flags for ccltune      (e.g. "--warmup-mode nccl-tests"; default: none)
#   CCL_PROCESSES   each: a ccltune process per collective, as nccl-tests runs one per collective
#                   (default); one: every collective in one ccltune run
# Needs: one GPU, nvcc and mpicc (bench/nccl_tests_build.sh), ccltune's native/ and plugin/
# built (make -C native; make -C plugin), PYTHONPATH=src. NCCL_NVLS_ENABLE=0 and friends are
# set here as scripts/device.sh sets them.
set -u
OUTDIR="${1:?usage: bench/eager_vs_ncclt.sh OUTDIR}"
source "$(dirname "${BASH_SOURCE[0]}")/ncclt_env.sh"
COLLS="${COLLS:-all_reduce all_gather broadcast reduce reduce_scatter alltoall gather scatter sendrecv}"
SIZES="${SIZES:--b 8 -e 1M -f 32 -n 1000 -w 50}"
REPS="${REPS:-3}"
GRAPH="${GRAPH:-10}"
MODES="${MODES:-eager graph}"
PIN="${PIN:-}"
CCLTUNE_FLAGS="${CCLTUNE_FLAGS:-}"
CCL_PROCESSES="${CCL_PROCESSES:-each}"
mkdir -p "$OUTDIR"

need_ncclt "$COLLS" "$OUTDIR/ncclt-build.log"

nt() {  # nccl-tests, one run of every collective: $1 mode dir, $2 run, $3 extra flags
  for c in $COLLS; do
    $PIN timeout 120 mpirun --allow-run-as-root --bind-to none -np 1 -x NCCL_NVLS_ENABLE "$B/${c}_perf" $SIZES -g 1 $3 \
      > "$1/ncclt-$2-$c.txt" 2>&1 || echo "nccl-tests $c run $2 failed: $(tail -2 "$1/ncclt-$2-$c.txt")"
  done
}
cc() {  # ccltune bench: a process per collective, as nccl-tests runs (CCL_PROCESSES=one: all in one run)
  if [ "$CCL_PROCESSES" = one ]; then
    $PIN timeout 240 python3 -m ccltune bench $COLLS $SIZES $3 $CCLTUNE_FLAGS --nproc 1 --db "$1/ccltune.db" --json "$1/ccl-$2.json" \
      > "$1/ccl-$2.txt" 2>&1 || echo "ccltune run $2 failed: $(tail -3 "$1/ccl-$2.txt")"
    return
  fi
  for c in $COLLS; do
    $PIN timeout 120 python3 -m ccltune bench $c $SIZES $3 $CCLTUNE_FLAGS --nproc 1 --db "$1/ccltune.db" --json "$1/ccl-$2-$c.json" \
      > "$1/ccl-$2-$c.txt" 2>&1 || echo "ccltune $c run $2 failed: $(tail -3 "$1/ccl-$2-$c.txt")"
  done
}
for mode in $MODES; do
  W="$OUTDIR/$mode"; mkdir -p "$W"; rm -f "$W"/ncclt-*.txt "$W"/ccl-*.json
  flags=""; [ $mode = graph ] && flags="-G $GRAPH"
  t0=$(date +%s)
  for r in $(seq 1 "$REPS"); do
    if [ $((r % 2)) = 1 ]; then nt "$W" $r "$flags"; cc "$W" $r "$flags"; else cc "$W" $r "$flags"; nt "$W" $r "$flags"; fi
  done
  echo "## $mode ($([ $mode = graph ] && echo "-G $GRAPH" || echo "no -G")): $REPS runs each, $(( $(date +%s) - t0 )) s; $SIZES${PIN:+; under $PIN}${CCLTUNE_FLAGS:+; ccltune $CCLTUNE_FLAGS}"
  python3 "$HERE/compare_repeated.py" "$W" | tee "$W/compare.txt"
done
