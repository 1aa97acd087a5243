#!/usr/bin/env bash
# One rank, all_reduce with CUDA graphs: which steps before a size's graph make its 1,000 captured
# calls (on one rank NCCL's all_reduce is a cudaMemcpyAsync) run at one speed or the other. Each
# variant is a program and its flags; every variant runs REPS times, variants interleaved, and the
# table gives each run's out-of-place time per size (us). docs/performance.md, "With CUDA graphs".
#
#   bench/graph_first_size.sh OUTDIR
#
# Environment: SIZES (default -b 8 -e 1M -f 32 -n 1000 -w 50 -G 10), REPS (default 2), NCCLT_BUILD
# and NCCL_TESTS_DIR as bench/eager_vs_ncclt.sh (all_reduce_perf is built there when missing).
set -u
OUTDIR="${1:?usage: bench/graph_first_size.sh OUTDIR}"
source "$(dirname "${BASH_SOURCE[0]}")/ncclt_env.sh"
SIZES="${SIZES:--b 8 -e 1M -f 32 -n 1000 -w 50 -G 10}"
REPS="${REPS:-2}"
mkdir -p "$OUTDIR"
need_ncclt all_reduce "$OUTDIR/ncclt-build.log"
# name|program|flags
VARIANTS=(
  "nccl-tests|nt|"
  "nccl-tests -w 0|nt|-w 0"
  "nccl-tests -c 0|nt|-c 0"
  "ccltune|cc|"
  "ccltune -w 0|cc|-w 0"
  "ccltune --warmup-mode nccl-tests|cc|--warmup-mode nccl-tests"
  "ccltune --warmup-mode nccl-tests -c 0|cc|--warmup-mode nccl-tests -c 0"
  "ccltune --buffers torch|cc|--buffers torch"
)
for r in $(seq 1 "$REPS"); do
  for k in "${!VARIANTS[@]}"; do
    IFS='|' read -r name prog flags <<< "${VARIANTS[$k]}"
    out="$OUTDIR/v$k-r$r.txt"
    if [ "$prog" = nt ]; then
      timeout 120 mpirun --allow-run-as-root --bind-to none -np 1 -x NCCL_NVLS_ENABLE "$B/all_reduce_perf" $SIZES -g 1 $flags > "$out" 2>&1
    else
      timeout 120 python3 -m ccltune bench all_reduce $SIZES $flags --nproc 1 --db "$OUTDIR/ccltune.db" > "$out" 2>&1
    fi
    echo "$name" > "$OUTDIR/v$k.name"
  done
done
python3 - "$OUTDIR" "$REPS" "${#VARIANTS[@]}" <<'PY'
import re, sys
from pathlib import Path
d, reps, n = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
print(f"# all_reduce, one rank, out-of-place time per size (us), each run; {reps} runs per variant")
sizes = None
for k in range(n):
    name = (d / f"v{k}.name").read_text().strip()
    runs = []
    for r in range(1, reps + 1):
        got = {}
        for line in (d / f"v{k}-r{r}.txt").read_text().splitlines():
            f = line.split()
            if len(f) > 6 and re.fullmatch(r"\d+", f[0]) and not line.startswith("#"):
                try:
                    got[int(f[0])] = float(f[5])
                except ValueError:
                    pass
        runs.append(got)
    sizes = sizes or sorted(set().union(*runs))
    if sizes and all(runs):
        print(f"  {name:40s}" + "  ".join(f"{s:>7d} B: " + "/".join(f"{g.get(s, float('nan')):.2f}" for g in runs)
                                        for s in sizes))
    else:
        print(f"  {name:40s} no table (see {d}/v{k}-r*.txt)")
PY
