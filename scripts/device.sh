#!/usr/bin/env bash
# One entry point for the GPU machine (the device tool runs it from the repo root).
# Usage: scripts/device.sh PHASE...   (phases below; results and logs go to $OUT)
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
# Everything is written to a work folder; pack() tars it into $OUT/pack.tgz, the one file in
# $OUT (a device call returns at most 8 files, and the first 8 by name are not the ones we need).
RESULT=${OUT:-/tmp/ccltune-result}; OUT=/tmp/ccltune-out; mkdir -p "$OUT" "$RESULT"
DB="$OUT/ccltune.db"
NGPU=${NGPU_USE:-$(nvidia-smi -L 2>/dev/null | wc -l)}
step() { echo; echo "=== $* ($(date +%T))"; }
run() { local t=$1; shift; local s=$(date +%s%N); timeout -k 5 "$t" "$@"; local rc=$?; echo "--- rc=$rc wall=$(( ($(date +%s%N) - s) / 1000000 ))ms: $*"; return 0; }
ct() { run "$1" python3 -m ccltune "${@:2}"; }
# Phases that validate against stored sweeps (--best-from) read them from $BENCH_DATA: the
# measurements left the tree after commit da923a0 and stay in git history. Unpack them with
#   git archive da923a0 bench/data | tar x -C /tmp/raw   and run with BENCH_DATA=/tmp/raw/bench/data
need_bench_data() {
  local f
  for f in "$@"; do
    if [ -z "${BENCH_DATA:-}" ] || [ ! -f "$BENCH_DATA/$f" ]; then
      echo "device.sh: this phase needs $f of the stored measurements: git archive da923a0 bench/data | tar x -C DIR," \
           "then BENCH_DATA=DIR/bench/data scripts/device.sh PHASE" >&2
      return 1
    fi
  done
}

phase_info() {
  step info
  nvidia-smi -L; nvidia-smi topo -m 2>&1 | head -12
  python3 -c "import torch; print('torch', torch.__version__, 'gpus', torch.cuda.device_count(), 'nccl', torch.cuda.nccl.version())"
}
phase_build() {
  step build plugin
  if [ -f plugin/Makefile ]; then make -C plugin -j8 >"$OUT/plugin-build.log" 2>&1; echo "plugin build rc=$?"; tail -3 "$OUT/plugin-build.log"; fi
  step build launch loop  # the nccl engine refuses to run without it
  make -C native -j8 >"$OUT/native-build.log" 2>&1; echo "native build rc=$?"; tail -3 "$OUT/native-build.log"
}
phase_smoke() {
  step smoke
  ct 120 bench all_reduce -b 8 -e 512M -f 4 -G 10 --nproc $NGPU --db "$DB"
  ct 90 bench all_reduce -b 8 -e 64M -f 8 -G 100 --symmetric --nproc $NGPU --db "$DB"
  ct 120 bench all -b 8 -e 64M -f 64 --nproc $NGPU --db "$DB"
  ct 90 bench all_reduce -b 8 -e 64M -f 8 -G 10 --engine torch --nproc $NGPU --db "$DB"
  ct 60 bench all_gather reduce_scatter -b 1M -e 4M -f 4 --algo ring --proto LL --channels 8 -G 10 --nproc $NGPU --db "$DB"
  ct 60 bench all_gather -b 1M -e 1M --algo tree --proto LL -G 10 --nproc $NGPU --db "$DB"
}
phase_quick() {
  step quick nccl engine
  ct 100 bench all_reduce -b 8 -e 512M -f 8 -G 10 --nproc $NGPU --db "$DB"
  ct 60 bench all_reduce -b 8 -e 8 -G 100 --symmetric --nproc $NGPU --db "$DB"
  ct 90 bench all -b 8 -e 16M -f 64 -G 10 --nproc $NGPU --db "$DB"
  ct 60 bench all_gather -b 1M -e 4M -f 4 --algo tree --proto LL -G 10 --nproc $NGPU --db "$DB"
  step plugin load
  NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING NCCL_TUNER_PLUGIN=$PWD/plugin/build/libnccl-tuner-ccltune.so \
    CCLTUNE_RULES=$PWD/tests/fixtures/rules/none.conf timeout 60 python3 -m ccltune bench all_reduce -b 64M -e 64M -G 5 --nproc $NGPU --db "$DB" 2>&1 | grep -i "tuner\|ccltune\|version" | head -20
  step links
  ct 60 links --db "$DB" --json "$OUT/links.json"
}
phase_figures() {
  step bench all, 8 B to 1 G, graph mode: the nccl-tests comparison and the 3-minute target
  ct 400 bench all -b 8 -e 1G -f 2 -G 10 --nproc $NGPU --db "$DB" --json "$OUT/bench_all_graph.json" > "$OUT/bench_all_graph.txt"
  tail -4 "$OUT/bench_all_graph.txt"; grep -E "^ +(8|536870912) " "$OUT/bench_all_graph.txt" | head -4
  step symmetric 8 B
  ct 60 bench all_reduce -b 8 -e 8 -n 50 -G 100 --symmetric --nproc $NGPU --db "$DB" | grep -E "^ +8 "
  ct 60 bench all_reduce -b 8 -e 512M -f 64 -G 10 --symmetric --nproc $NGPU --db "$DB" | grep -E "^ +[0-9]"
  step torch engine, graph and eager
  ct 60 bench all_reduce -b 8 -e 512M -f 64 -G 10 --engine torch --nproc $NGPU --db "$DB" | grep -E "^ +[0-9]"
  ct 60 bench all_reduce -b 8 -e 8 --engine torch --nproc $NGPU --db "$DB" | grep -E "^ +[0-9]"
  step reference program
  bench/reference/build.sh > "$OUT/ref-build.log" 2>&1 || tail -5 "$OUT/ref-build.log"
  for c in all_reduce all_gather reduce_scatter alltoall sendrecv; do
    timeout 120 mpirun --allow-run-as-root -np $NGPU -x NCCL_NVLS_ENABLE=0 bench/reference/build/nccl_ref -c $c -b 8 -e 1G -f 2 -G 10 > "$OUT/ref_$c.txt" 2>&1; echo "ref $c rc=$?"
  done
}
phase_plugin() {
  step plugin: log, forced ring/LL, channels, no-rule overhead
  P=$PWD/plugin/build/libnccl-tuner-ccltune.so; R=$OUT/rules; mkdir -p $R
  echo "allreduce,64M,64M,ring,ll,-1,-1,-1" > $R/ringll.conf
  echo "allreduce,64M,64M,default,default,2,-1,-1" > $R/ch2.conf
  : > $R/empty.conf
  for cfg in none empty ringll ch2; do
    if [ $cfg = none ]; then E="NCCL_TUNER_PLUGIN="; else E="NCCL_TUNER_PLUGIN=$P CCLTUNE_RULES=$R/$cfg.conf"; fi
    echo "## $cfg"
    env $E NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING,COLL timeout 60 python3 -m ccltune bench all_reduce -b 64M -e 64M -G 10 --nproc $NGPU --db "$DB" > $R/$cfg.log 2>&1
    grep -E "^ +67108864" $R/$cfg.log; grep -m8 -iE "TUNER/Plugin|ccltune tuner|tuning|algo|nchannels|channels" $R/$cfg.log
  done
  for i in 1 2 3; do for cfg in none empty; do
    if [ $cfg = none ]; then E="NCCL_TUNER_PLUGIN="; else E="NCCL_TUNER_PLUGIN=$P CCLTUNE_RULES=$R/empty.conf"; fi
    echo "## 8B $cfg $i $(env $E timeout 60 python3 -m ccltune bench all_reduce -b 8 -e 8 -n 100 -G 20 --nproc $NGPU --db "$DB" | grep -E '^ +8 ')"
  done; done
  make -C plugin bench 2>&1 | tail -4
  pack
}
phase_diag() {
  step links topo doctor check
  ct 60 links --db "$DB" --json "$OUT/links.json" | grep -v "^#  \|^$" | tail -40
  ct 30 topo --db "$DB" | head -30
  ct 120 doctor --db "$DB" --json "$OUT/doctor.json" | tail -30
  ct 90 check --profile h200-4 --db "$DB" --json "$OUT/check.json" | tail -12; pack
}
phase_eager() {  # issue 24, one GPU: the eager launch loop (native/) in bench, sweep and validate; then nccl-tests vs ccltune, eager and -G 10
  phase_build
  step eager smoke: every collective, an NCCL refusal, sweep and validate without graphs
  ct 120 bench all -b 8 -e 1M -f 32 -n 100 --nproc 1 --db "$DB" | grep -vE "^(Warning|$)"
  ct 60 bench all_gather -b 1M -e 1M --algo tree --proto LL --nproc 1 --db "$DB" | grep -E "^ +[0-9]|error"
  ct 180 sweep all_reduce -b 1K -e 1M -f 32 --reps 3 --algos ring,tree --protos ll,simple --channels 8 --no-graph --nproc 1 --db "$OUT/eager.db" | tail -6
  ct 30 tune --db "$OUT/eager.db" --out "$OUT/eager_rules.conf" | tail -3
  ct 120 validate "$OUT/eager_rules.conf" all_reduce -b 1K -e 1M -f 32 --reps 3 --no-graph --nproc 1 --db "$OUT/eager.db" 2>&1 | grep -v "Warning\|capture_end" | tail -12
  pack
  step nccl-tests vs ccltune bench, eager and -G 10, three runs each, alternating
  bash bench/eager_vs_ncclt.sh "$OUT/eager-vs-ncclt"
  pack
}
phase_sweepsmoke() {
  step sweep smoke
  ct 120 sweep all_reduce all_gather -b 1M -e 4M -f 4 --reps 3 --channels 8 --nproc $NGPU --db "$OUT/smoke.db"
  ct 30 tune --db "$OUT/smoke.db" --out "$OUT/smoke_rules.conf"; cat "$OUT/smoke_rules.conf"
  ct 120 validate "$OUT/smoke_rules.conf" all_reduce all_gather -b 1M -e 4M -f 4 --reps 3 --nproc $NGPU --db "$OUT/smoke.db"
}
phase_verify() {
  step plugin verify: NCCL TUNING lines under rules
  local R=$OUT/verify; mkdir -p $R
  echo "allreduce,64M,64M,ring,ll,-1,-1,-1" > $R/ringll.conf
  echo "allreduce,64M,64M,default,default,2,-1,-1" > $R/ch2.conf
  echo "allgather,1M,16M,tree,ll,-1,-1,-1" > $R/ag_tree.conf
  for r in ringll ch2; do ct 120 plugin verify $R/$r.conf all_reduce -b 64M -e 64M --save-log $R/$r.log --json $R/$r.json; done
  ct 120 plugin verify $R/ag_tree.conf all_gather -b 1M -e 4M --save-log $R/ag_tree.log --json $R/ag_tree.json
  ct 150 plugin verify docs/results/h200x4-sweep-rules-ag-rs.conf all_gather reduce_scatter -b 1M -e 16M --save-log $R/agrs.log --json $R/agrs.json
  pack
}
phase_aa() {
  step A/A: validate with an empty rule file, both sides NCCL default on separate communicators
  : > $OUT/empty.conf
  ct 150 validate $OUT/empty.conf all_reduce all_gather reduce_scatter -b 64K -e 64M -f 4 --reps 7 --nproc $NGPU --db "$OUT/aa.db" --json "$OUT/aa.json" 2>&1 | grep -v "^validate:\|Warning\|capture_end" | tail -40
  pack
}
phase_doctor2() {
  step doctor with NCCL_P2P_LEVEL=LOC in the environment: SHM between NVLink GPUs, re-run with SYS
  NCCL_P2P_LEVEL=LOC ct 200 doctor --db "$DB" --json "$OUT/doctor_p2p_loc.json" | tail -25
  step doctor on 2 of the GPUs: channel recommendation
  ct 200 doctor --nproc 2 --db "$DB" --json "$OUT/doctor_nproc2.json" | tail -8
  pack
}
phase_gputests() {
  step pytest -m gpu
  timeout 300 python3 -m pytest -m gpu tests/gpu -q -x -p no:cacheprovider --junitxml "$OUT/gpu-tests.xml" > "$OUT/gpu-tests.txt" 2>&1; echo "gpu tests rc=$?"
  tail -15 "$OUT/gpu-tests.txt"; pack
}
phase_gpudiag() {
  step pytest -m gpu tests/gpu/test_diag_gpu.py
  timeout 240 python3 -m pytest -m gpu tests/gpu/test_diag_gpu.py -q -p no:cacheprovider --junitxml "$OUT/gpu-diag-tests.xml" > "$OUT/gpu-diag-tests.txt" 2>&1; echo "gpu diag tests rc=$?"
  tail -5 "$OUT/gpu-diag-tests.txt"; pack
}
phase_why() {
  step why all_reduce 1-16 MB differs from nccl-tests: choices of NCCL and graph registration
  bash bench/nccl_tests_build.sh > "$OUT/ncclt-build.log" 2>&1; echo "build rc=$?"
  local B=.cache/nccl-tests/build W=$OUT/why; mkdir -p $W
  for reg in 1 0; do
    timeout 60 mpirun --allow-run-as-root --bind-to none -np $NGPU -x NCCL_NVLS_ENABLE=0 -x NCCL_GRAPH_REGISTER=$reg -x NCCL_DEBUG=INFO -x NCCL_DEBUG_SUBSYS=TUNING $B/all_reduce_perf -b 1M -e 16M -f 2 -g 1 -G 10 > $W/ncclt-reg$reg.txt 2>&1
    NCCL_GRAPH_REGISTER=$reg NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING timeout 90 python3 -m ccltune bench all_reduce -b 1M -e 16M -f 2 -G 10 --nproc $NGPU --db "$DB" > $W/ccl-reg$reg.txt 2>&1
    echo "## NCCL_GRAPH_REGISTER=$reg nccl-tests"; grep -E "^ +[0-9]+ " $W/ncclt-reg$reg.txt
    echo "## NCCL_GRAPH_REGISTER=$reg ccltune"; grep -E "^ +[0-9]+ " $W/ccl-reg$reg.txt
  done
  for f in $W/ncclt-reg1.txt $W/ccl-reg1.txt; do echo "## choices in $f"; grep -o "AllReduce: [0-9]* Bytes -> Algo [A-Z_]* proto [A-Z0-9]* channel{Lo..Hi}={[0-9]*..[0-9]*}" $f | sort | uniq -c | sort -k3n | head -12; done
  pack
}
phase_why2() {
  step why all_gather and alltoall 16-256 MB differ from nccl-tests
  bash bench/nccl_tests_build.sh > "$OUT/ncclt-build.log" 2>&1; echo "build rc=$?"
  local B=.cache/nccl-tests/build W=$OUT/why2; mkdir -p $W
  for c in all_gather alltoall; do
    timeout 60 mpirun --allow-run-as-root --bind-to none -np $NGPU -x NCCL_NVLS_ENABLE=0 $B/${c}_perf -b 16M -e 256M -f 2 -g 1 -G 10 > $W/ncclt-$c.txt 2>&1
    echo "## $c nccl-tests"; grep -E "^ +[0-9]+ " $W/ncclt-$c.txt
  done
  ct 120 bench all_gather alltoall -b 16M -e 256M -f 2 -G 10 --nproc $NGPU --db "$DB" > $W/ccl.txt 2>&1
  echo "## ccltune"; grep -E "^ +[0-9]+ " $W/ccl.txt
  pack
}
phase_ncclt() {
  step nccl-tests, built from source here, against ccltune bench
  bash bench/nccl_tests_build.sh > "$OUT/ncclt-build.log" 2>&1; echo "build rc=$?"; tail -3 "$OUT/ncclt-build.log"
  local B=.cache/nccl-tests/build; mkdir -p "$OUT/ncclt"
  for c in all_reduce all_gather reduce_scatter alltoall sendrecv broadcast; do
    [ -x $B/${c}_perf ] || { echo "no $B/${c}_perf"; continue; }
    timeout 90 mpirun --allow-run-as-root --bind-to none -np $NGPU -x NCCL_NVLS_ENABLE=0 $B/${c}_perf -b 8 -e 1G -f 2 -g 1 -G 10 > "$OUT/ncclt/${c}_perf.txt" 2>&1; echo "$c rc=$?"
  done
  for buf in ncclmem torch; do
    ct 240 bench all_reduce all_gather reduce_scatter alltoall sendrecv broadcast -b 8 -e 1G -f 2 -G 10 --buffers $buf --nproc $NGPU --db "$DB" --json "$OUT/bench6-$buf.json" > "$OUT/bench6-$buf.txt"
    python3 bench/compare_reference.py "$OUT/bench6-$buf.json" "$OUT"/ncclt/*_perf.txt > "$OUT/ncclt-compare-$buf.txt" 2>&1
    echo "## buffers $buf"; grep -E "^# [0-9]+ of" "$OUT/ncclt-compare-$buf.txt"
  done
  grep "outside" "$OUT/ncclt-compare-ncclmem.txt" | head -40; pack
}
phase_inter() {  # ABBA-interleaved repeats of nccl-tests and ccltune bench: bounds each one's run-to-run spread
  step repeated interleaved comparison with nccl-tests
  bash bench/nccl_tests_build.sh > "$OUT/ncclt-build.log" 2>&1; echo "build rc=$?"; tail -2 "$OUT/ncclt-build.log"
  local B=.cache/nccl-tests/build W=$OUT/inter C="all_reduce all_gather reduce_scatter alltoall sendrecv"; mkdir -p $W
  nt() { local t0=$(date +%s); for c in $C; do timeout 90 mpirun --allow-run-as-root --bind-to none -np $NGPU -x NCCL_NVLS_ENABLE=0 $B/${c}_perf -b 8 -e 1G -f 2 -g 1 -G 10 > $W/ncclt-$1-$c.txt 2>&1; echo "nccl-tests $1 $c rc=$?"; done; echo "nccl-tests rep $1: $(( $(date +%s) - t0 ))s"; }
  cc() { ct 240 bench $C -b 8 -e 1G -f 2 -G 10 --nproc $NGPU --db "$DB" --json $W/ccl-$1.json > $W/ccl-$1.txt 2>&1; }
  nt 1; cc 1; pack; cc 2; nt 2; pack; nt 3; cc 3; pack
  python3 bench/compare_repeated.py $W > $W/compare.txt 2>&1; tail -25 $W/compare.txt
}
phase_inter2() {  # is nccl-tests' mid-size gap its buffer/warm-up size? nccl-tests at other -b/-e; ccltune --buffers ncclmem-max
  step nccl-tests all_reduce at other ranges, and ccltune with nccl-tests\' buffer layout
  bash bench/nccl_tests_build.sh > "$OUT/ncclt-build.log" 2>&1; echo "build rc=$?"
  local B=.cache/nccl-tests/build W=$OUT/inter2 C="all_reduce all_gather reduce_scatter alltoall sendrecv"; mkdir -p $W
  for r in "1M 16M" "1M 1G" "8 16M"; do set -- $r
    timeout 60 mpirun --allow-run-as-root --bind-to none -np $NGPU -x NCCL_NVLS_ENABLE=0 $B/all_reduce_perf -b $1 -e $2 -f 2 -g 1 -G 10 > $W/ar-$1-$2.txt 2>&1
    echo "## nccl-tests all_reduce -b $1 -e $2"; grep -E "^ +(1048576|2097152|4194304|16777216) " $W/ar-$1-$2.txt
  done
  nt() { local t0=$(date +%s); for c in $C; do timeout 90 mpirun --allow-run-as-root --bind-to none -np $NGPU -x NCCL_NVLS_ENABLE=0 $B/${c}_perf -b 8 -e 1G -f 2 -g 1 -G 10 > $W/ncclt-$1-$c.txt 2>&1; echo "nccl-tests $1 $c rc=$?"; done; echo "nccl-tests rep $1: $(( $(date +%s) - t0 ))s"; }
  cc() { ct 240 bench $C -b 8 -e 1G -f 2 -G 10 --buffers ncclmem-max --nproc $NGPU --db "$DB" --json $W/ccl-$1.json > $W/ccl-$1.txt 2>&1; }
  cc 1; grep -E "^ +(8|2097152) " $W/ccl-1.txt | head -4; nt 1; pack; nt 2; cc 2; pack
  python3 bench/compare_repeated.py $W > $W/compare.txt 2>&1; tail -12 $W/compare.txt
}
phase_inter3() {  # ccltune with nccl-tests' whole procedure (buffers once at the largest size, warm-up over the series), interleaved
  step ccltune with nccl-tests\' warm-up over the series, against nccl-tests
  bash bench/nccl_tests_build.sh > "$OUT/ncclt-build.log" 2>&1; echo "build rc=$?"
  local B=.cache/nccl-tests/build W=$OUT/inter3 C="all_reduce all_gather reduce_scatter alltoall sendrecv"; mkdir -p $W
  nt() { local t0=$(date +%s); for c in $C; do timeout 90 mpirun --allow-run-as-root --bind-to none -np $NGPU -x NCCL_NVLS_ENABLE=0 $B/${c}_perf -b 8 -e 1G -f 2 -g 1 -G 10 > $W/ncclt-$1-$c.txt 2>&1; done; echo "nccl-tests rep $1: $(( $(date +%s) - t0 ))s"; }
  cc() { ct 240 bench $C -b 8 -e 1G -f 2 -G 10 -w 1 --warmup-mode series --buffers ncclmem-max --nproc $NGPU --db "$DB" --json $W/ccl-$1.json > $W/ccl-$1.txt 2>&1; }
  cc 1; grep -E "^ +(8|2097152) " $W/ccl-1.txt | head -4; nt 1; pack; nt 2; cc 2; pack
  python3 bench/compare_repeated.py $W > $W/compare.txt 2>&1; grep outside $W/compare.txt | head -30; tail -12 $W/compare.txt
  step series warm-up with per-size buffers, -b 1M -e 16M and -e 1G
  ct 120 bench all_reduce -b 1M -e 1G -f 2 -G 10 -w 1 --warmup-mode series --nproc $NGPU --db "$DB" | grep -E "^ +(1048576|2097152|4194304|16777216) "
  ct 120 bench all_reduce -b 1M -e 16M -f 2 -G 10 -w 1 --warmup-mode series --nproc $NGPU --db "$DB" | grep -E "^ +(1048576|2097152|4194304|16777216) "
}
phase_modelflow() { mflow $NGPU; }  # sweep --mode model (five collectives, 8 B-1 GB) -> tune -> validate, timed, on all GPUs
mflow() {  # mflow NGPUS: the model-guided flow, its validate with the sweep's best candidates as a third arm
  local n=$1 D="$OUT/model$1.db" t0=$(date +%s)
  local V=""; [ "$n" != "$NGPU" ] && V="CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((n - 1)))"
  step "model-guided flow on $n GPUs"
  env $V timeout -k 5 300 python3 -m ccltune sweep --mode model ${SWEEP_EXTRA:-} -b 8 -e 1G -f 2 --reps 5 --nproc $n --db "$D" > "$OUT/msweep$n.txt" 2>&1; echo "sweep rc=$? at $(( $(date +%s) - t0 ))s"
  tail -3 "$OUT/msweep$n.txt"
  python3 -m ccltune tune --db "$D" --out "$OUT/mrules$n.conf" > "$OUT/mtune$n.txt" 2>&1; echo "tune rc=$?"; tail -8 "$OUT/mtune$n.txt"; grep -v "^#" "$OUT/mrules$n.conf"
  env $V timeout -k 5 240 python3 -m ccltune validate "$OUT/mrules$n.conf" -b 8 -e 1G -f 2 --reps 7 --best-from "$D" --nproc $n --db "$D" --json "$OUT/mvalidate$n.json" > "$OUT/mvalidate$n.txt" 2>&1
  echo "validate rc=$? at $(( $(date +%s) - t0 ))s: model flow total" | tee "$OUT/mflow$n-time.txt"
  grep -v "^validate:\|Warning\|capture_end" "$OUT/mvalidate$n.txt" | grep -v "no rule applies" | tail -30; pack
  prune "$V" $n "$D" mrules$n mvalidate$n $t0
}
prune() {  # prune ENV NGPUS DB RULES VALIDATE T0: when validate failed, re-tune without the failed sizes and validate that
  python3 -c 'import json, sys; sys.exit(json.load(open(sys.argv[1]))["status"] != "FAIL")' "$OUT/$5.json" 2>/dev/null || return 0
  step "validate failed: tune --exclude-failed, validate the pruned rules"
  python3 -m ccltune tune --db "$3" --runs 1 --exclude-failed "$OUT/$5.json" --out "$OUT/$4-pruned.conf" > "$OUT/$4-pruned-tune.txt" 2>&1; echo "tune rc=$?"
  diff <(grep -v "^#" "$OUT/$4.conf") <(grep -v "^#" "$OUT/$4-pruned.conf")
  env $1 timeout -k 5 240 python3 -m ccltune validate "$OUT/$4-pruned.conf" -b 8 -e 1G -f 2 --reps 7 --best-from "$3" --nproc $2 --db "$3" --json "$OUT/$5-pruned.json" > "$OUT/$5-pruned.txt" 2>&1
  echo "validate rc=$? at $(( $(date +%s) - $6 ))s: flow total with the pruning round" | tee -a "$OUT/$5-time.txt"
  grep -v "^validate:\|Warning\|capture_end" "$OUT/$5-pruned.txt" | grep "FAIL\|retest\|verdict\|capture:" | tail -12; pack
}
phase_gpubench() {
  step pytest -m gpu tests/gpu/test_bench_gpu.py
  timeout 240 python3 -m pytest -m gpu tests/gpu/test_bench_gpu.py -q -p no:cacheprovider --junitxml "$OUT/gpu-bench-tests.xml" > "$OUT/gpu-bench-tests.txt" 2>&1; echo "gpu bench tests rc=$?"
  tail -6 "$OUT/gpu-bench-tests.txt"; pack
}
phase_why3() {  # which part of nccl-tests' procedure slows its 1-16 MB results when -e is 1G
  step nccl-tests all_reduce -b 1M -e 1G with the warm-up and the check switched off in turn
  bash bench/nccl_tests_build.sh > "$OUT/ncclt-build.log" 2>&1; echo "build rc=$?"
  local B=.cache/nccl-tests/build W=$OUT/why3; mkdir -p $W
  for v in "-e 16M" "-e 1G" "-e 1G -w 0" "-e 1G -c 0" "-e 1G -w 0 -c 0" "-e 16M -w 0 -c 0"; do
    local f=$W/ar$(echo "$v" | tr -d ' ').txt
    timeout 60 mpirun --allow-run-as-root --bind-to none -np $NGPU -x NCCL_NVLS_ENABLE=0 $B/all_reduce_perf -b 1M $v -f 2 -g 1 -G 10 > $f 2>&1
    echo "## all_reduce_perf -b 1M $v"; grep -E "^ +(1048576|2097152|4194304|8388608|16777216) " $f | awk '{print $1, $6, $10}'
  done
}
phase_why4() {  # ccltune timing nccl-tests' way (first graph launch timed, buffers once at the largest size, series warm-up)
  step nccl-tests against ccltune --warmup-mode nccl-tests --buffers ncclmem-max
  bash bench/nccl_tests_build.sh > "$OUT/ncclt-build.log" 2>&1; echo "build rc=$?"
  local B=.cache/nccl-tests/build W=$OUT/why4; mkdir -p $W
  for r in "8 1G" "1M 16M"; do set -- $r
    for c in all_reduce reduce_scatter; do
      timeout 60 mpirun --allow-run-as-root --bind-to none -np $NGPU -x NCCL_NVLS_ENABLE=0 $B/${c}_perf -b $1 -e $2 -f 2 -g 1 -G 10 > $W/ncclt-$1-$2-$c.txt 2>&1
    done
    ct 100 bench all_reduce reduce_scatter -b $1 -e $2 -f 2 -G 10 -w 1 --warmup-mode nccl-tests --buffers ncclmem-max --nproc $NGPU --db "$DB" --json $W/ccl-$1-$2.json > $W/ccl-$1-$2.txt 2>&1
    python3 bench/compare_reference.py $W/ccl-$1-$2.json $W/ncclt-$1-$2-*.txt > $W/compare-$1-$2.txt 2>&1
    echo "## -b $1 -e $2"; grep -E "^ +(1048576|2097152|4194304|8388608|16777216) " $W/ncclt-$1-$2-all_reduce.txt | awk '{print "ncclt", $1, $6, $10}'
    grep -E "^ +(1048576|2097152|4194304|8388608|16777216) " $W/ccl-$1-$2.txt | head -5 | awk '{print "ccl  ", $1, $6, $10}'
    grep -E "^# [0-9]+ of" $W/compare-$1-$2.txt
  done
}
phase_series() {  # --warmup-mode series with per-size buffers at -e 1G (it ran past 120 s when the warm-up allocated a pair per size)
  step series warm-up, per-size ncclmem buffers, -b 1M -e 1G
  ct 100 bench all_reduce -b 1M -e 1G -f 2 -G 10 -w 1 --warmup-mode series --buffers ncclmem --nproc $NGPU --db "$DB" > "$OUT/series.txt" 2>&1
  grep -E "^ +[0-9]+ |skip|rror" "$OUT/series.txt" | head -14
}
phase_why5() {  # is nccl-tests' slower 1-16 MB at -e 1G its graph registration of the 1 GB buffers?
  step nccl-tests and ccltune all_reduce 1-16 MB: graph registration on/off, graph/eager, -e 16M/1G
  bash bench/nccl_tests_build.sh > "$OUT/ncclt-build.log" 2>&1; echo "build rc=$?"
  local B=.cache/nccl-tests/build W=$OUT/why5; mkdir -p $W
  sel() { grep -E "^ +(1048576|2097152|4194304|8388608|16777216) " "$1" | awk '{print $1, $6, $10}' | tr '\n' ';'; echo; }
  for v in "1 16M 10" "1 1G 10" "0 1G 10" "0 16M 10" "1 1G 0" "1 16M 0"; do set -- $v
    local f=$W/ncclt-reg$1-e$2-G$3.txt
    timeout 60 mpirun --allow-run-as-root --bind-to none -np $NGPU -x NCCL_NVLS_ENABLE=0 -x NCCL_GRAPH_REGISTER=$1 -x NCCL_DEBUG=INFO -x NCCL_DEBUG_SUBSYS=REG $B/all_reduce_perf -b 1M -e $2 -f 2 -g 1 -G $3 > $f 2>&1
    echo "ncclt reg=$1 -e $2 -G $3: $(sel $f) reglines=$(grep -c 'NCCL INFO' $f)"
  done
  for v in "1 1G 10" "0 1G 10" "1 16M 10"; do set -- $v
    local f=$W/ccl-reg$1-e$2-G$3.txt
    NCCL_GRAPH_REGISTER=$1 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=REG timeout 90 python3 -m ccltune bench all_reduce -b 1M -e $2 -f 2 -G $3 --buffers ncclmem-max --nproc $NGPU --db "$DB" > $f 2>&1
    echo "ccl   reg=$1 -e $2 -G $3: $(sel $f) reglines=$(grep -c 'NCCL INFO' $f)"
  done
  pack
}
phase_inter4() { inter_defaults inter4; }  # ccltune 2026-11-22 00:11: calls stepping through the buffers, point warm-up
phase_inter5() { inter_defaults inter5; }  # bench's defaults from 2026-11-22 00:30: stepping, nccl-tests warm-up and timing
inter_defaults() {  # ABBA repeats against nccl-tests with `ccltune bench`'s defaults, into $OUT/$1
  step repeated interleaved comparison with nccl-tests, bench defaults, into $1
  bash bench/nccl_tests_build.sh > "$OUT/ncclt-build.log" 2>&1; echo "build rc=$?"
  local B=.cache/nccl-tests/build W=$OUT/$1 C="all_reduce all_gather reduce_scatter alltoall sendrecv"; mkdir -p $W
  nt() { local t0=$(date +%s); for c in $C; do timeout 90 mpirun --allow-run-as-root --bind-to none -np $NGPU -x NCCL_NVLS_ENABLE=0 $B/${c}_perf -b 8 -e 1G -f 2 -g 1 -G 10 > $W/ncclt-$1-$c.txt 2>&1; done; echo "nccl-tests rep $1: $(( $(date +%s) - t0 ))s"; }
  cc() { local t0=$(date +%s); ct 240 bench $C -b 8 -e 1G -f 2 -G 10 --nproc $NGPU --db "$DB" --json $W/ccl-$1.json > $W/ccl-$1.txt 2>&1; echo "ccltune rep $1: $(( $(date +%s) - t0 ))s"; }
  nt 1; cc 1; pack; cc 2; nt 2; pack
  python3 bench/compare_repeated.py $W > $W/compare.txt 2>&1; grep -i "outside" $W/compare.txt | head -30; tail -14 $W/compare.txt; pack
}
phase_steptest() {  # the GPU test of the buffer stepping alone (stack dump if it hangs)
  step GPU test: calls step through the largest buffers
  timeout 150 python3 -m pytest -m gpu tests/gpu/test_bench_gpu.py -k step_through -q -p no:cacheprovider -o faulthandler_timeout=60 --durations=0 > "$OUT/gpu-step.txt" 2>&1; echo "rc=$?"; tail -8 "$OUT/gpu-step.txt"
}
phase_stepgpu() {  # that test, then bench all's wall time
  phase_steptest
  step bench all 8 B-1 GB, graph mode, bench defaults: the 3-minute target
  ct 300 bench all -b 8 -e 1G -f 2 -G 10 --nproc $NGPU --db "$DB" --json "$OUT/bench_all.json" > "$OUT/bench_all.txt"
  tail -3 "$OUT/bench_all.txt"; grep -E "^ +(8|536870912) " "$OUT/bench_all.txt" | head -3; pack
}
phase_retest() {  # validate's retest on the GPU, and the exhaustive flow's rules of 00:32 validated again
  step GPU test: validate retests a failing size
  timeout 120 python3 -m pytest -m gpu tests/gpu/test_bench_gpu.py -k retest -q -p no:cacheprovider > "$OUT/gpu-retest.txt" 2>&1; echo "rc=$?"; tail -3 "$OUT/gpu-retest.txt"
  step validate docs/results/h200x4-flow2-rules.conf, all_gather and broadcast, with --retest 1
  ct 200 validate docs/results/h200x4-flow2-rules.conf all_gather broadcast -b 8 -e 1G -f 2 --reps 7 --nproc $NGPU --db "$OUT/val2.db" --json "$OUT/validate-flow2-agbc.json" > "$OUT/validate-flow2-agbc.txt" 2>&1
  grep -v "^validate:\|Warning\|capture_end" "$OUT/validate-flow2-agbc.txt" | grep -i "retest\|FAIL\|verdict" | head -20; pack
}
phase_reval() {  # the exhaustive flow's rules of 00:32 validated again, five collectives, with --retest 1
  step validate docs/results/h200x4-flow2-rules.conf again
  ct 200 validate docs/results/h200x4-flow2-rules.conf -b 8 -e 1G -f 2 --reps 7 --nproc $NGPU --db "$OUT/reval.db" --json "$OUT/revalidate-flow2.json" > "$OUT/revalidate-flow2.txt" 2>&1
  grep -v "^validate:\|Warning\|capture_end" "$OUT/revalidate-flow2.txt" | grep -i "retest\|FAIL\|verdict" | head -20; pack
}
phase_armtest() {  # the GPU tests of validate's third arm and retest
  step GPU tests: validate --best-from, --retest
  timeout 200 python3 -m pytest -m gpu tests/gpu/test_bench_gpu.py -k "third_arm or retest" -q -p no:cacheprovider > "$OUT/gpu-arm.txt" 2>&1; echo "rc=$?"; tail -5 "$OUT/gpu-arm.txt"
}
phase_cap4() {  # validates with the sweep's best candidates as a third arm: capture inside one run
  need_bench_data h200x4-flow2.sqlite h200x4-modelflow2.sqlite || return 1
  step "validate the pruned exhaustive rules of 2026-11-22 (flow2, --exclude-failed) with --best-from"
  ct 300 validate docs/results/h200x4-flow2-pruned-rules.conf -b 8 -e 1G -f 2 --reps 7 --best-from "$BENCH_DATA"/h200x4-flow2.sqlite --nproc $NGPU --db "$OUT/cap4.db" --json "$OUT/cap4-flow2-pruned.json" > "$OUT/cap4-flow2-pruned.txt" 2>&1
  grep -v "^validate:\|Warning\|capture_end" "$OUT/cap4-flow2-pruned.txt" | grep -v "no rule applies" | tail -40; pack
  step "validate the model flow's rules of 2026-11-22 with --best-from"
  ct 300 validate docs/results/h200x4-modelflow2-rules.conf -b 8 -e 1G -f 2 --reps 7 --best-from "$BENCH_DATA"/h200x4-modelflow2.sqlite --nproc $NGPU --db "$OUT/cap4m.db" --json "$OUT/cap4-modelflow2.json" > "$OUT/cap4-modelflow2.txt" 2>&1
  grep -v "^validate:\|Warning\|capture_end" "$OUT/cap4-modelflow2.txt" | grep -v "no rule applies" | tail -40; pack
}
phase_rs1m() {  # reduce_scatter out-of-place 1 MB: ccltune 2.9% under nccl-tests twice; ABBA, then graph registration off
  step "reduce_scatter 256 KB-1 GB: nccl-tests and ccltune, ABBA; then NCCL_GRAPH_REGISTER=0 for both"
  bash bench/nccl_tests_build.sh > "$OUT/ncclt-build.log" 2>&1; echo "build rc=$?"
  local B=.cache/nccl-tests/build W=$OUT/rs1m; mkdir -p $W
  nt() { timeout 60 mpirun --allow-run-as-root --bind-to none -np $NGPU -x NCCL_NVLS_ENABLE=0 -x NCCL_GRAPH_REGISTER=${2:-1} $B/reduce_scatter_perf -b 256K -e 1G -f 2 -g 1 -G 10 > $W/nt-$1.txt 2>&1; }
  cc() { NCCL_GRAPH_REGISTER=${2:-1} ct 120 bench reduce_scatter -b 256K -e 1G -f 2 -G 10 ${3:-} --nproc $NGPU --db "$DB" > $W/cc-$1.txt 2>&1; }
  nt a; cc a; cc b; nt b; nt r0 0; cc r0 0
  for f in $W/*.txt; do echo "$(basename $f): $(grep -E '^ +(524288|1048576|2097152) ' $f | awk '{printf "%s oop %s ip %s | ", $1, $6, $10}')"; done
  step "NCCL's choice for reduce_scatter 1 MB in each (NCCL_DEBUG_SUBSYS=TUNING)"
  timeout 60 mpirun --allow-run-as-root --bind-to none -np $NGPU -x NCCL_NVLS_ENABLE=0 -x NCCL_DEBUG=INFO -x NCCL_DEBUG_SUBSYS=TUNING $B/reduce_scatter_perf -b 1M -e 1G -f 1024 -g 1 -G 10 > $W/dbg-nt.log 2>&1
  NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING ct 120 bench reduce_scatter -b 1M -e 1G -f 1024 -G 10 --nproc $NGPU --db "$DB" > $W/dbg-cc.log 2>&1
  for f in $W/dbg-*.log; do echo "$f: $(wc -l < $f) lines"; grep "1048576" $f | sed -E 's/^[^:]*:[0-9]+:[0-9]+ //; s/0x[0-9a-f]+/PTR/g; s/opCount [0-9a-f]+/opCount N/' | sort | uniq -c | sort -rn | head -4; done
  pack
}
phase_cap4b() {  # the same two rule sets re-derived with the A/A gap counted beyond its noise (aa_margin)
  need_bench_data h200x4-flow2.sqlite h200x4-modelflow2.sqlite || return 1
  for r in flow2:h200x4-flow2 modelflow2:h200x4-modelflow2; do
    step "validate docs/results/${r%%:*} aamargin rules with --best-from"
    ct 300 validate docs/results/h200x4-${r%%:*}-aamargin-rules.conf -b 8 -e 1G -f 2 --reps 7 --best-from "$BENCH_DATA"/${r##*:}.sqlite --nproc $NGPU --db "$OUT/cap4b.db" --json "$OUT/cap4b-${r%%:*}.json" > "$OUT/cap4b-${r%%:*}.txt" 2>&1
    grep -v "^validate:\|Warning\|capture_end" "$OUT/cap4b-${r%%:*}.txt" | grep "FAIL\|retest\|verdict\|capture:" | tail -12; pack
  done
}
phase_rsb8() {  # reduce_scatter from 8 B (as inter4 ran it): is 1 MB out-of-place still 2.9% apart?
  step "reduce_scatter 8 B-1 GB: nccl-tests and ccltune, ABBA"
  bash bench/nccl_tests_build.sh > "$OUT/ncclt-build.log" 2>&1; echo "build rc=$?"
  local B=.cache/nccl-tests/build W=$OUT/rsb8; mkdir -p $W
  nt() { timeout 60 mpirun --allow-run-as-root --bind-to none -np $NGPU -x NCCL_NVLS_ENABLE=0 $B/reduce_scatter_perf -b 8 -e 1G -f 2 -g 1 -G 10 > $W/nt-$1.txt 2>&1; }
  cc() { ct 120 bench reduce_scatter -b 8 -e 1G -f 2 -G 10 --nproc $NGPU --db "$DB" > $W/cc-$1.txt 2>&1; }
  nt a; cc a; cc b; nt b
  for f in $W/*.txt; do echo "$(basename $f): $(grep -E '^ +(524288|1048576|2097152) ' $f | awk '{printf "%s oop %s ip %s | ", $1, $6, $10}')"; done
  pack
}
phase_r8() {  # 4-GPU reduce at 8-64 B: 16 channels won by 36% in the model sweep, lost by 40% in validate (twice)
  step "reduce 8-64 B, default and --channels 16, twice each, interleaved; then validate that one rule with 15 reps"
  local W=$OUT/r8; mkdir -p $W
  printf 'platform,gpu=h200,nvlranks=4\nreduce,8,11,default,default,16,1,4,-1,-1\n' > $W/r8.conf
  for i in 1 2; do
    ct 60 bench reduce -b 8 -e 64 -f 2 -G 10 --nproc $NGPU --db "$DB" > $W/d$i.txt 2>&1
    ct 60 bench reduce -b 8 -e 64 -f 2 -G 10 --channels 16 --nproc $NGPU --db "$DB" > $W/c$i.txt 2>&1
  done
  for f in $W/d1.txt $W/c1.txt $W/d2.txt $W/c2.txt; do echo "$(basename $f): $(grep -E '^ +(8|16|32|64) ' $f | awk '{printf "%s %s | ", $1, $6}')"; done
  ct 120 validate $W/r8.conf reduce -b 8 -e 64 -f 2 --reps 15 --nproc $NGPU --db "$W/v.db" --json $W/v.json > $W/v.txt 2>&1
  grep -v "^validate:\|Warning\|capture_end" $W/v.txt | grep -E "^ +reduce|verdict"; pack
}
phase_iters() {  # first sizes (01:53): the CCLTUNE_EXP_* toggles it sets were in an experimental build only; now every run is "common-1"
  step "sweep reduce + all_reduce 8 B-4 KB: CCLTUNE_EXP_ITERS each|common x CCLTUNE_EXP_WARMFIRST; then validate the r8 rule"
  local W=$OUT/iters; mkdir -p $W
  printf 'platform,gpu=h200,nvlranks=4\nreduce,8,11,default,default,16,1,4,-1,-1\n' > $W/r8.conf
  for k in each-0 common-0 common-1 each-1 each-0b common-0b common-1b each-1b; do
    local m=${k%%-*} w=${k#*-}; w=${w%b}; [ "$w" = 0 ] && w=""
    CCLTUNE_TRACE=1 CCLTUNE_EXP_ITERS=$m CCLTUNE_EXP_WARMFIRST=$w ct 120 sweep reduce all_reduce -b 8 -e 4K -f 2 --reps 5 --nproc $NGPU --db $W/s-$k.db > $W/s-$k.txt 2>&1
  done
  pack
  for k in each-0 common-1 each-0b common-1b; do
    local m=${k%%-*} w=${k#*-}; w=${w%b}; [ "$w" = 0 ] && w=""
    CCLTUNE_TRACE=1 CCLTUNE_EXP_ITERS=$m CCLTUNE_EXP_WARMFIRST=$w ct 120 validate $W/r8.conf reduce all_reduce -b 8 -e 4K -f 2 --reps 7 --retest 1 --nproc $NGPU --db $W/v-$k.db --json $W/v-$k.json > $W/v-$k.txt 2>&1
    grep -E "verdict|^ +reduce +(8|16) " $W/v-$k.txt | head -4
  done
  for g in 10 100; do ct 60 bench reduce all_reduce -b 8 -e 64 -f 2 -n 200 -G $g --nproc $NGPU --db "$DB" > $W/bench-G$g.txt 2>&1; grep -E "^ +(8|64) " $W/bench-G$g.txt; done
  pack
}
phase_gpusweep() {  # the GPU tests of sweep, tune and validate (one call count per size, the warm-up size)
  step "GPU tests: sweep, tune, validate"
  timeout 240 python3 -m pytest -m gpu tests/gpu/test_bench_gpu.py -k "${GPU_K:-sweep or validate or refused}" -q -p no:cacheprovider > "$OUT/gpu-sweep.txt" 2>&1; echo "rc=$?"; tail -4 "$OUT/gpu-sweep.txt"; pack
}
phase_reval5() {  # the flow5 rules (02:19-02:26) validated a second time, each with its sweep's best candidates
  need_bench_data h200x4-flow5.sqlite h200x4-modelflow5.sqlite h200x2-flow5.sqlite || return 1
  for r in h200x4-flow5:4 h200x4-modelflow5:4 h200x2-flow5:2; do
    local f=${r%%:*} n=${r##*:} V=""; [ "$n" != "$NGPU" ] && V="CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((n - 1)))"
    step "validate docs/results/$f-rules.conf again, --best-from $BENCH_DATA/$f.sqlite"
    env $V timeout -k 5 100 python3 -m ccltune validate docs/results/$f-rules.conf -b 8 -e 1G -f 2 --reps 7 --best-from "$BENCH_DATA"/$f.sqlite --nproc $n --db "$OUT/reval5.db" --json "$OUT/reval5-$f.json" > "$OUT/reval5-$f.txt" 2>&1; echo "validate rc=$?"
    grep "^# verdict\|^# capture: the rules\|FAIL" "$OUT/reval5-$f.txt" | head -6; pack
  done
}
phase_vnodes() {  # --virtual-nodes 2 on 4 GPUs: sweep, tune, validate, and what the plugin sees (never run yet)
  local D="$OUT/vnodes.db"
  step "sweep all_reduce 1 MB-64 MB with --virtual-nodes 2, tune, validate with the plugin's log"
  ct 200 sweep all_reduce -b 1M -e 64M -f 4 --reps 3 --virtual-nodes 2 --nproc $NGPU --db "$D" > "$OUT/vnodes-sweep.txt" 2>&1; tail -2 "$OUT/vnodes-sweep.txt"
  ct 30 tune --db "$D" --out "$OUT/vnodes.conf" | tail -4; grep -v "^#" "$OUT/vnodes.conf"
  NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING ct 120 validate "$OUT/vnodes.conf" all_reduce -b 1M -e 64M -f 4 --virtual-nodes 2 --nproc $NGPU --db "$D" --json "$OUT/vnodes-validate.json" > "$OUT/vnodes-validate.txt" 2>&1
  grep "verdict\|FAIL" "$OUT/vnodes-validate.txt" | head -8
  grep -m6 -i "ccltune tuner\|nNodes" "$OUT/vnodes-validate.txt"; pack
}
phase_failnproc() {  # a validate FAIL under --nproc: exit code 1 from ccltune, no torchrun "Root Cause" block
  step "validate FAIL under --nproc (ring/LL forced at 64 MB)"
  echo "allreduce,64M,64M,ring,ll,-1,-1,-1" > "$OUT/fail.conf"
  timeout -k 5 120 python3 -m ccltune validate "$OUT/fail.conf" all_reduce -b 64M -e 64M --reps 5 --retest 0 \
    --nproc $NGPU --db "$OUT/fail.db" --json "$OUT/fail.json" > "$OUT/failnproc.txt" 2>&1; echo "validate exit code $?"
  grep -c "Root Cause\|ChildFailedError" "$OUT/failnproc.txt"; grep -v "^validate:" "$OUT/failnproc.txt" | tail -8; pack
}
phase_sweeptime() {  # the exhaustive sweep on all GPUs with the time by phase (the model's is in mflow)
  local D="$OUT/xsweep$NGPU.db" t0=$(date +%s)
  step "exhaustive sweep on $NGPU GPUs, time by phase"
  timeout -k 5 300 python3 -m ccltune sweep ${SWEEP_EXTRA:-} -b 8 -e 1G -f 2 --reps 5 --nproc $NGPU --db "$D" > "$OUT/xsweep$NGPU.txt" 2>&1
  echo "sweep rc=$? at $(( $(date +%s) - t0 ))s"; tail -2 "$OUT/xsweep$NGPU.txt"; pack
}
phase_startup() {  # where a command's start-up goes: the torch import, CUDA's first call, torchrun, a whole tiny bench
  step "start-up costs"
  for c in "import torch" "import torch; torch.cuda.is_available(); torch.cuda.device_count()" "import ccltune.cli"; do
    local s=$(date +%s%N); python3 -c "$c"; echo "$(( ($(date +%s%N) - s) / 1000000 )) ms: python3 -c '$c'"
  done
  local s=$(date +%s%N); python3 -m torch.distributed.run --help > /dev/null; echo "$(( ($(date +%s%N) - s) / 1000000 )) ms: torchrun --help"
  ct 60 bench all_reduce -b 8 -e 8 -n 5 --nproc $NGPU --db "$OUT/startup.db" | tail -1
}
phase_gpuall() {  # every GPU test, and the parent's GPU count (no torch) against torch's
  step "GPU count without torch"
  for v in unset 0 1 0,5 "" ; do
    if [ "$v" = unset ]; then E=""; else E="CUDA_VISIBLE_DEVICES=$v"; fi
    echo "CUDA_VISIBLE_DEVICES=${v}: $(env $E python3 -c 'import sys; from ccltune import gpus; n = gpus.visible_count(); print(n, "torch imported" if "torch" in sys.modules else "no torch")') / torch: $(env $E python3 -c 'import torch; print(torch.cuda.device_count())')"
  done
  timeout 60 python3 -m pytest -q -p no:cacheprovider tests/unit/test_gpus.py 2>&1 | tail -1
  step "pytest -m gpu tests/gpu"
  timeout 420 python3 -m pytest -m gpu tests/gpu -q -p no:cacheprovider > "$OUT/gpu-all.txt" 2>&1; echo "rc=$?"; tail -5 "$OUT/gpu-all.txt"; pack
}
phase_badinput() {  # the audit's fixes where a GPU changes the path: pipe closed early, ranks vs GPUs, doctor's reading
  step "bench | head -3 on the nccl engine: the run completes"
  local D="$OUT/bad.db"
  python3 -m ccltune bench all_reduce -b 8 -e 64M --db "$D" | head -3; echo "pipe rc=${PIPESTATUS[0]}"
  python3 -m ccltune runs --db "$D" | tail -1
  step "refused before any process starts"
  ct 60 bench all_reduce -r 5 --db "$D" 2>&1 | tail -1
  ct 60 bench all_reduce --nproc $((NGPU + 1)) --db "$D" 2>&1 | tail -1
  ct 60 sweep all_reduce -e 1K --resume 1 --db "$D" 2>&1 | tail -1
  step "doctor reads NCCL_BUFFSIZE=0x100 as NCCL does"
  NCCL_BUFFSIZE=0x100 ct 120 doctor --no-run --db "$D" 2>&1 | grep -i "buffsize" | head -3
  pack
}
phase_zero() {  # a 0-byte size: the sweep times only NCCL's default (and its twin) there
  step "exhaustive full-grid sweep of all_gather 8-64 B on $NGPU GPUs: rows per size"
  ct 120 sweep all_gather -b 8 -e 64 --grid full --reps 2 --nproc $NGPU --db "$OUT/zero.db" | tail -1
  python3 -c 'import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); print(c.execute("SELECT size_bytes, COUNT(DISTINCT config), GROUP_CONCAT(DISTINCT config) FROM measurements GROUP BY size_bytes").fetchall())' "$OUT/zero.db"
  pack
}
phase_grid() {  # both flows over the whole algorithm x protocol x channels grid (sweep --grid full), and its GPU test
  step "GPU test of --grid full"
  timeout 120 python3 -m pytest -m gpu tests/gpu/test_bench_gpu.py -k full_grid -q -p no:cacheprovider 2>&1 | tail -2
  export SWEEP_EXTRA="--grid full" NO_VERIFY=1
  mflow $NGPU; flow $NGPU 590
}
phase_gridmem() {  # peak GPU memory of an all_reduce sweep, 8 B-1 GB, on the axes and on the full grid
  for g in axes full; do
    step "GPU memory, sweep all_reduce --grid $g"
    nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits -lms 250 > "$OUT/mem-$g.csv" 2>/dev/null & local mon=$!
    ct 200 sweep all_reduce -b 8 -e 1G -f 2 --reps 3 --grid $g --nproc $NGPU --db "$OUT/mem-$g.db" | tail -1
    kill $mon; sleep 0.5
    echo "peak MiB per GPU: $(awk -F', ' '{if ($2 > m[$1]) m[$1] = $2} END {for (i in m) printf "%s:%s ", i, m[i]}' "$OUT/mem-$g.csv")"
  done; pack
}
phase_loop4() { mflow $NGPU; NO_VERIFY=1 flow $NGPU 590; }  # both flows on all GPUs, with the pruning round
phase_flows2() { mflow 2; NO_VERIFY=1 flow 2 400; }  # the model-guided and the exhaustive flow on 2 GPUs
pack() { local t; t=$(mktemp /tmp/pack.XXXXXX); cp -f "$DB" "$OUT/" 2>/dev/null; (cd "$OUT" && tar czf "$t" . 2>/dev/null && mv "$t" "$RESULT/pack.tgz"); }
flow() {  # flow NGPUS LIMIT_S: sweep -> tune -> validate -> verify for the five collectives, timed
  local n=$1 lim=$2 D="$OUT/tune$1.db" t0=$(date +%s)
  local V=""; [ "$n" != "$NGPU" ] && V="CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((n - 1)))"
  step "flow on $n GPUs: sweep, tune, validate (limit ${lim}s)"
  env $V timeout -k 5 $lim python3 -m ccltune sweep ${SWEEP_EXTRA:-} -b 8 -e 1G -f 2 --reps 5 --nproc $n --db "$D" > "$OUT/sweep$n.txt" 2>&1; echo "sweep rc=$? at $(( $(date +%s) - t0 ))s"
  tail -2 "$OUT/sweep$n.txt"
  python3 -m ccltune tune --db "$D" --out "$OUT/rules$n.conf" > "$OUT/tune$n.txt" 2>&1; echo "tune rc=$? at $(( $(date +%s) - t0 ))s"
  tail -12 "$OUT/tune$n.txt"; grep -v "^#" "$OUT/rules$n.conf"
  env $V timeout -k 5 $lim python3 -m ccltune validate "$OUT/rules$n.conf" -b 8 -e 1G -f 2 --reps 7 --best-from "$D" --nproc $n --db "$D" --json "$OUT/validate$n.json" --junit "$OUT/validate$n.xml" > "$OUT/validate$n.txt" 2>&1
  echo "validate rc=$? at $(( $(date +%s) - t0 ))s: flow total" | tee "$OUT/flow$n-time.txt"
  grep -v "^validate:\|Warning\|capture_end" "$OUT/validate$n.txt" | grep -v "no rule applies" | tail -40
  pack
  prune "$V" $n "$D" rules$n validate$n $t0
  [ -n "${NO_VERIFY:-}" ] && return
  env $V timeout 200 python3 -m ccltune plugin verify "$OUT/rules$n.conf" -b 8 -e 1G -f 2 --nproc $n --json "$OUT/verify$n.json" --save-log "$OUT/verify$n.log" > "$OUT/verify$n.txt" 2>&1; echo "verify rc=$?"
  grep -v "NO RULE" "$OUT/verify$n.txt" | tail -30
  pack
}
phase_tune4() { flow $NGPU 590; }
phase_tune2() { flow 2 400; }
phase_capture() {  # real artifacts for parsers: nccl-tests of three versions, NCCL logs, a DDP job's COLL log and trace
  step capture: nccl-tests builds
  local W=$OUT/cap; mkdir -p $W/ncclt $W/logs $W/ddp $W/onegpu
  for v in v2.19.6 v2.17.10 v2.13.13; do
    NCCL_TESTS_DIR=$PWD/.cache/ncclt-src/$v COLLS="${NT_COLLS:-all_reduce all_gather sendrecv alltoall broadcast reduce_scatter}" \
      bash bench/nccl_tests_build.sh > "$W/ncclt/build-$v.log" 2>&1; echo "build $v rc=$?"; tail -2 "$W/ncclt/build-$v.log"
  done
  step capture: nccl-tests outputs on one GPU
  local B=.cache/ncclt-src/v2.19.6/build
  ($B/all_reduce_perf -h || true) > $W/ncclt/help-v2.19.6.txt 2>&1
  for v in v2.19.6 v2.17.10 v2.13.13; do
    local b=.cache/ncclt-src/$v/build
    [ -x $b/all_reduce_perf ] || continue
    timeout 60 $b/all_reduce_perf -b 8 -e 128M -f 4 -g 1 > $W/ncclt/ar-eager-$v.txt 2>&1; echo "$v eager rc=$?"
    timeout 60 $b/all_reduce_perf -b 8 -e 128M -f 4 -g 1 -G 10 > $W/ncclt/ar-graph-$v.txt 2>&1; echo "$v graph rc=$?"
    timeout 60 mpirun --allow-run-as-root -np 1 -x NCCL_NVLS_ENABLE=0 $b/all_gather_perf -b 1K -e 1M -f 8 -g 1 > $W/ncclt/ag-mpi-$v.txt 2>&1; echo "$v mpi rc=$?"
  done
  timeout 60 $B/all_reduce_perf -b 8 -e 1M -f 32 -g 1 -J $W/ncclt/ar-v2.19.6.json > $W/ncclt/ar-json-v2.19.6.txt 2>&1; echo "json rc=$?"
  timeout 60 $B/all_reduce_perf -b 8 -e 1M -f 32 -g 1 -I 1 -K 2 > $W/ncclt/ar-periter-v2.19.6.txt 2>&1; echo "periter rc=$?"
  timeout 60 $B/all_reduce_perf -b 8 -e 1M -f 32 -g 1 -I 1 -J $W/ncclt/ar-periter-v2.19.6.json > /dev/null 2>&1; echo "periter json rc=$?"
  timeout 60 $B/all_reduce_perf -b 8 -e 1M -f 32 -g 1 -S 1 -C 1 > $W/ncclt/ar-ts-cpu-v2.19.6.txt 2>&1; echo "ts rc=$?"
  timeout 60 $B/all_reduce_perf -b 8 -e 1M -f 32 -g 1 -c 0 -M 1 > $W/ncclt/ar-nocheck-mem-v2.19.6.txt 2>&1; echo "nocheck rc=$?"
  timeout 60 $B/all_reduce_perf -b 1K -e 1K -g 1 -o all -d all > $W/ncclt/ar-alltypes-v2.19.6.txt 2>&1; echo "alltypes rc=$?"
  timeout 60 $B/all_reduce_perf -b 1.5M -e 6M -i 1M -f 1 -g 1 -R 1 -u 4 > $W/ncclt/ar-step-v2.19.6.txt 2>&1; echo "step rc=$?"
  for c in sendrecv alltoall broadcast reduce_scatter all_gather; do timeout 60 $B/${c}_perf -b 8 -e 1M -f 32 -g 1 > $W/ncclt/$c-v2.19.6.txt 2>&1; done
  NCCL_TESTS_MIN_BW=100000 timeout 60 $B/all_reduce_perf -b 1M -e 1M -g 1 > $W/ncclt/ar-minbw-v2.19.6.txt 2>&1; echo "minbw rc=$? (nccl-tests exit status with NCCL_TESTS_MIN_BW unmet)"
  step capture: NCCL INIT/ENV log of a one-GPU bench, and doctor on it
  NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV,TUNING NCCL_DEBUG_FILE=$W/logs/bench-1gpu.%h.%p.log \
    timeout 90 python3 -m ccltune bench all_reduce -b 8 -e 1M -f 32 -G 10 --db "$DB" > $W/onegpu/bench-G10.txt 2>&1; echo "bench rc=$?"
  NCCL_DEBUG=INFO timeout 90 python3 -m ccltune bench all_reduce -b 8 -e 64K -f 32 --db "$DB" > $W/logs/bench-1gpu-stdout.log 2>&1; echo "bench info rc=$?"
  for f in $W/logs/bench-1gpu.*.log; do timeout 60 python3 -m ccltune doctor --nccl-log "$f" > $W/onegpu/doctor-on-log.txt 2>&1; echo "doctor rc=$?"; break; done
  timeout 120 python3 -m ccltune doctor > $W/onegpu/doctor.txt 2>&1; echo "doctor rc=$?"
  timeout 120 python3 -m ccltune check > $W/onegpu/check.txt 2>&1; echo "check rc=$?"
  timeout 120 python3 -m ccltune links --db "$DB" > $W/onegpu/links.txt 2>&1; echo "links rc=$?"
  timeout 120 python3 -m ccltune sweep all_reduce -b 8 -e 64K -f 32 --db "$W/onegpu/sweep.db" > $W/onegpu/sweep.txt 2>&1; echo "sweep rc=$?"
  NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING NCCL_TUNER_PLUGIN=$PWD/plugin/build/libnccl-tuner-ccltune.so CCLTUNE_RULES=$PWD/tests/fixtures/rules/basic.conf \
    timeout 60 python3 -m ccltune bench all_reduce -b 64K -e 64K -G 5 --db "$DB" > $W/logs/plugin-1gpu.log 2>&1; echo "plugin rc=$?"
  step capture: DDP transformer on one GPU, COLL log and torch traces
  NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL NCCL_DEBUG_FILE=$W/ddp/coll-ddp-1gpu.%h.%p.log timeout 180 torchrun --nproc-per-node 1 examples/train_transformer.py \
    --mode ddp --layers 4 --width 1024 --heads 8 --seq 256 --batch 4 --steps 6 --warmup 2 --profile-dir $W/ddp/trace-json --profile-steps 2 > $W/ddp/train-ddp.txt 2>&1; echo "ddp rc=$?"; tail -3 $W/ddp/train-ddp.txt
  timeout 180 torchrun --nproc-per-node 1 examples/train_transformer.py --mode ddp --layers 4 --width 1024 --heads 8 --seq 256 --batch 4 \
    --steps 4 --warmup 2 --profile-dir $W/ddp/trace-gz --profile-steps 2 --gzip > $W/ddp/train-ddp-gz.txt 2>&1; echo "ddp gz rc=$?"
  NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL timeout 180 torchrun --nproc-per-node 1 examples/train_transformer.py --mode ddp --layers 2 --width 512 --heads 8 --seq 128 \
    --steps 2 --warmup 1 > $W/ddp/coll-ddp-stdout.log 2>&1; echo "ddp stdout rc=$?"
  timeout 180 torchrun --nproc-per-node 1 examples/train_transformer.py --mode ddp --steps 10 --warmup 3 > $W/ddp/train-ddp-full.txt 2>&1; echo "ddp full rc=$?"; tail -1 $W/ddp/train-ddp-full.txt
  ls -la $W/*/ | head -80
  (cd $OUT && tar czf $RESULT/capture.tgz cap)
}
phase_readme() {  # the README's install line in the machine's own Python (its torch, scikit-build-core; no internet there), then its main command
  local W=$OUT/r6; mkdir -p $W
  step "the README as a new user: pip install . into the machine's Python, ccltune bench all"
  # a venv made from the image's python3 (itself a venv) would not see its packages: install into it
  (unset PYTHONPATH; python3 -m pip install -q --no-deps --no-build-isolation . > $W/install.log 2>&1; echo "install rc=$?"; tail -3 $W/install.log)
  (cd /tmp && unset PYTHONPATH && echo "ccltune is $(command -v ccltune)" && timeout 120 ccltune bench all > $W/bench-all.txt 2>&1; echo "bench all rc=$?"; echo "lines with warn: $(grep -ci warn $W/bench-all.txt)"; head -12 $W/bench-all.txt; ccltune plugin path)
  (cd /tmp && unset PYTHONPATH && timeout 60 ccltune bench all_reduce -b 8 -e 1M -f 32 -G 10 > $W/bench-G10-installed.txt 2>&1; echo "installed bench -G 10 rc=$?"; grep -E "^ +(8|262144) |rror" $W/bench-G10-installed.txt)
}
phase_round6() {  # one GPU: GPU tests, the README as a new user, check/doctor, the new bench flags, workload replay, capture cost
  local W=$OUT/r6; mkdir -p $W
  make -C native -s > $W/native-build.log 2>&1; echo "native build rc=$?"
  step GPU tests
  timeout 220 python3 -m pytest -m gpu -q -p no:cacheprovider -rs tests/gpu > $W/gpu-tests.txt 2>&1; echo "gpu tests rc=$?"; tail -30 $W/gpu-tests.txt
  phase_readme
  step check and doctor on one H100
  (cd /tmp && unset PYTHONPATH && timeout 90 ccltune check > $W/check.txt 2>&1; echo "check rc=$?"; cat $W/check.txt)
  ct 90 doctor > $W/doctor.txt 2>&1; grep -E "WARN|FAIL|overall" $W/doctor.txt
  NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV NCCL_DEBUG_FILE=$W/nccl.%p.log ct 60 bench all_reduce -b 8 -e 1M -f 32 -G 10 --db "$DB" > $W/bench-G10.txt 2>&1
  echo "bench -G 10 lines with warn: $(grep -ci warn $W/bench-G10.txt)"; grep -E "^ +(8|1048576) " $W/bench-G10.txt
  for f in $W/nccl.*.log; do ct 60 doctor --nccl-log $f > $W/doctor-log.txt 2>&1; grep -E "WARN|overall" $W/doctor-log.txt; break; done
  step bench flags on one GPU
  local B="bench all_reduce --engine nccl -b 8 -e 1M -f 32 -n 50 --db $DB"
  for f in "-m 4" "-z 3" "-C 1 -S 1" "-c 0 -M 1" "-I 1 -K 2 -J $W/pi.json" "-x 1" "-o mulsum" "-d f8e4m3" "-r all -N 2 -c 3"; do
    echo "## $f"; ct 45 $B $f > $W/f.txt 2>&1; grep -E "^ +(8|1048576) |agg iters|Blocking|memory|rror|refus" $W/f.txt | head -4
  done
  ct 45 bench all_reduce --engine nccl -b 1.5M -e 6M -i 1M -f 1 -R 1 -u 4 --db $DB | grep -E "^ +[0-9]|unalign" | head -6
  ct 45 bench alltoall gather scatter -b 8 -e 1M -f 32 --db $DB | grep -E "^ +(8|1048576) |rror"
  NCCL_TESTS_MIN_BW=100000 python3 -m ccltune bench all_reduce -b 1M -e 1M --db $DB > /dev/null 2>&1; echo "min_bw exit=$? (nccl-tests: 7)"
  step "workload on one GPU: import the DDP COLL log, replay (one rank: NCCL does no tuning), under load"
  ct 60 workload import tests/fixtures/workload/coll-ddp-1gpu.vm.4029.log --out $W/ddp.json | tail -3
  ct 90 replay $W/ddp.json --iters 5 --db $W/r.db > $W/replay.txt 2>&1; tail -22 $W/replay.txt
  ct 90 replay $W/ddp.json --iters 5 --rules tests/fixtures/rules/basic.conf --under-load 8192 --db $W/r.db > $W/replay-load.txt 2>&1; grep -E "WAIVED|under load|step" $W/replay-load.txt | head -5
  step "the plugin's capture cost (getCollInfo microbenchmark)"
  make -C plugin bench 2>&1 | tail -5
}

phase_refs() {
  step reference comparison after aligning the start of timing
  [ -x bench/reference/build/nccl_ref ] || bench/reference/build.sh > "$OUT/ref-build.log" 2>&1
  ct 200 bench all_reduce all_gather reduce_scatter alltoall sendrecv -b 8 -e 1G -f 2 -G 10 --nproc $NGPU --db "$DB" --json "$OUT/bench5.json" > "$OUT/bench5.txt"
  for c in all_reduce all_gather reduce_scatter alltoall sendrecv; do
    timeout 60 mpirun --allow-run-as-root -np $NGPU -x NCCL_NVLS_ENABLE=0 bench/reference/build/nccl_ref -c $c -b 8 -e 1G -f 2 -G 10 > "$OUT/ref_$c.txt" 2>&1
  done
  python3 bench/compare_reference.py "$OUT/bench5.json" "$OUT"/ref_*.txt | tail -3; pack
}
phase_last() {
  step 4 GPUs: all_gather and reduce_scatter around 4 MB, sweep tune validate
  local D="$OUT/tune4b.db"
  ct 100 sweep all_gather reduce_scatter -b 1M -e 16M -f 2 --reps 5 --nproc $NGPU --db "$D" > "$OUT/sweep4b.txt" 2>&1; tail -2 "$OUT/sweep4b.txt"
  ct 30 tune --db "$D" --out "$OUT/rules4b.conf" | tail -8; grep -v "^#" "$OUT/rules4b.conf"
  ct 60 validate "$OUT/rules4b.conf" all_gather reduce_scatter -b 1M -e 16M -f 2 --reps 7 --nproc $NGPU --db "$D" --json "$OUT/validate4b.json" --junit "$OUT/validate4b.xml" 2>&1 | grep -v "^validate:\|Warning\|capture_end" | tail -14
  pack
  step 2 GPUs: validate the 2-GPU rules from the earlier sweep, 1 M to 1 G
  CUDA_VISIBLE_DEVICES=0,1 ct 60 validate docs/results/h200x2-sweep-rules.conf all_reduce -b 1M -e 1G -f 2 --reps 7 --nproc 2 --db "$OUT/val2.db" --json "$OUT/validate2b.json" 2>&1 | grep -v "^validate:\|Warning\|capture_end" | tail -16
  pack
}
phase_graphs() {  # CUDA graphs made by the launch loop (2026-11-24): bench, -m, nccl-tests' procedure, the torch engine, sweep -> tune -> validate, the GPU tests
  phase_build
  step graphs: every collective, -m 2, nccl-tests procedure, torch engine
  ct 120 bench all -b 8 -e 1M -f 32 -n 100 -G 10 --nproc $NGPU --db "$DB" | grep -vE "^(Warning|$)"
  ct 60 bench all_reduce sendrecv -b 8 -e 1M -f 32 -n 100 -m 2 -G 5 --nproc $NGPU --db "$DB" | grep -E "^ +[0-9]|rror"
  ct 60 bench all_reduce -b 8 -e 1M -f 32 -n 100 -G 5 --warmup-mode nccl-tests --nproc $NGPU --db "$DB" | grep -E "^ +[0-9]|rror|warm"
  ct 60 bench all_reduce -b 8 -e 64M -f 8 -G 10 --engine torch --nproc $NGPU --db "$DB" | grep -E "^ +[0-9]|rror"
  if [ "$NGPU" -ge 2 ]; then  # a sweep needs 2 ranks (one rank: NCCL selects no algorithm)
    step graphs: sweep, tune, validate
    ct 180 sweep all_reduce -b 1K -e 1M -f 32 --reps 3 --algos ring,tree --protos ll,simple --channels 8 --nproc $NGPU --db "$OUT/graphs.db" | tail -6
    ct 30 tune --db "$OUT/graphs.db" --out "$OUT/graphs_rules.conf" | tail -3
    ct 120 validate "$OUT/graphs_rules.conf" all_reduce -b 1K -e 1M -f 32 --reps 3 --nproc $NGPU --db "$OUT/graphs.db" 2>&1 | tail -12
  fi
  step the GPU tests this machine can run
  run 300 python3 -m pytest -m gpu -q tests/gpu 2>&1 | tail -15
  pack
}
phase_cap7() {  # 2026-11-26, 2/4 GPUs: real fixtures (topology, NVML, links twice, nvbandwidth, nccl-tests MPI, SHM/TUNING logs, jobs' COLL logs and traces, Inspector), then the GPU tests
  local W=$OUT/cap; mkdir -p $W; phase_build
  step topology as the host reports it
  nvidia-smi -L > $W/smi_L.txt; nvidia-smi topo -m > $W/smi_topo_m.txt 2>&1; nvidia-smi nvlink -s > $W/smi_nvlink_s.txt 2>&1
  python3 - > $W/nvml.json 2>$W/nvml.err <<'PY'
import dataclasses, json
from ccltune.diagnose.probes import nvml
t = nvml.read_nvml()
print(json.dumps(dataclasses.asdict(t) if t else None, indent=1, default=str))
PY
  ct 60 topo > $W/topo.txt 2>&1; tail -5 $W/topo.txt
  ct 60 topo --json $W/topo.json > /dev/null 2>&1
  step links twice, then check with no built-in profile when none matches
  ct 120 links --db "$DB" --json $W/links1.json > $W/links1.txt 2>&1; grep -E "WARN|PASS|FAIL" $W/links1.txt | head
  ct 120 links --db "$DB" --json $W/links2.json > $W/links2.txt 2>&1; grep -E "WARN|PASS|FAIL" $W/links2.txt | head
  ct 150 check --db "$DB" --json $W/check.json > $W/check.txt 2>&1; tail -8 $W/check.txt
  step nvbandwidth from its public source
  (cd .cache/nvbandwidth && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release > $W/nvbw-build.log 2>&1 && make -C build -j16 >> $W/nvbw-build.log 2>&1); echo "nvbandwidth build rc=$?"; tail -2 $W/nvbw-build.log
  if [ -x .cache/nvbandwidth/build/nvbandwidth ]; then
    for i in 1 2; do timeout 120 .cache/nvbandwidth/build/nvbandwidth -t all_to_one_write_ce all_to_one_read_ce one_to_all_write_ce device_to_device_memcpy_write_ce device_to_device_bidirectional_memcpy_write_ce > $W/nvbw$i.txt 2>&1; echo "nvbw rc=$?"; done
    timeout 60 .cache/nvbandwidth/build/nvbandwidth -j -t device_to_device_memcpy_write_ce > $W/nvbw.json 2>&1
  fi
  step nccl-tests with MPI, one process per GPU, beside ccltune bench
  COLLS="all_reduce all_gather sendrecv" bash bench/nccl_tests_build.sh > $W/ncclt-build.log 2>&1; echo "nccl-tests build rc=$?"; tail -2 $W/ncclt-build.log
  local B=.cache/nccl-tests/build M="mpirun --allow-run-as-root -x NCCL_NVLS_ENABLE=0 -x TORCH_SYMM_MEM_DISABLE_MULTICAST=1 -x NVSHMEM_DISABLE_NVLS=1"
  for n in 2 $NGPU; do
    timeout 90 $M -np $n $B/all_gather_perf -b 8 -e 1G -f 4 > $W/ncclt_ag_np$n.txt 2>&1
    timeout 60 $M -np $n $B/sendrecv_perf -b 8 -e 1M -f 32 > $W/ncclt_sr_np$n.txt 2>&1
    timeout 60 $M -np $n $B/all_reduce_perf -b 8 -e 1M -f 32 -J $W/ncclt_ar_np$n.json > $W/ncclt_ar_J_np$n.txt 2>&1
    timeout 60 $M -np $n $B/all_reduce_perf -b 8 -e 1M -f 32 -I 1 > $W/ncclt_ar_I_np$n.txt 2>&1
    timeout 60 $M -np $n -x NCCL_TESTS_SPLIT="MOD 2" $B/all_reduce_perf -b 8 -e 1M -f 32 > $W/ncclt_ar_split_np$n.txt 2>&1
  done
  ct 120 bench all_gather -b 8 -e 1G -f 4 --nproc $NGPU --db "$DB" > $W/ccl_ag.txt 2>&1
  ct 60 bench sendrecv -b 8 -e 1M -f 32 --nproc $NGPU --db "$DB" > $W/ccl_sr.txt 2>&1
  grep -E "^ +(0|8|32|128|8192) " $W/ncclt_ag_np$NGPU.txt $W/ccl_ag.txt | head -12; grep -E "^ +(8|1048576) " $W/ncclt_sr_np$NGPU.txt $W/ccl_sr.txt
  pack
  step NCCL logs: SHM transport, capture cost
  NCCL_P2P_DISABLE=1 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV NCCL_DEBUG_FILE=$W/shm.%h.%p.log ct 60 bench all_reduce -b 1M -e 1M -n 20 --nproc $NGPU --db "$DB" > /dev/null 2>&1
  local P=$PWD/plugin/build/libnccl-tuner-ccltune.so; : > $W/none.conf; mkdir -p $W/capdir
  for r in 1 2 3; do for c in unset set; do
    if [ $c = set ]; then E="CCLTUNE_CAPTURE=$W/capdir"; else E="CCLTUNE_X=1"; fi
    env $E NCCL_TUNER_PLUGIN=$P CCLTUNE_RULES=$W/none.conf python3 -m ccltune bench all_reduce -b 8 -e 8 -n 2000 -G 10 --nproc $NGPU --db "$DB" 2>/dev/null | grep -E "^ +8 " | sed "s/^/capture-$c /"
  done; done
  step jobs: COLL logs and torch traces, 2 and 4 ranks, ddp fsdp2 tp-decode
  local T="torchrun --standalone"
  for n in 2 $NGPU; do for m in ddp fsdp2 tp-decode; do
    mkdir -p $W/job_${m}_$n
    NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,COLL NCCL_DEBUG_FILE=$W/job_${m}_$n/nccl.%p.log timeout 120 $T --nproc-per-node $n examples/train_transformer.py --mode $m --layers 2 --width 1024 --seq 256 --steps 6 --warmup 2 --profile-dir $W/job_${m}_$n --profile-steps 2 --gzip > $W/job_${m}_$n/out.txt 2>&1; echo "job $m $n rc=$?"; tail -1 $W/job_${m}_$n/out.txt
  done; done
  pack
  step "NCCL Inspector, built from NCCL's public source"
  (cd .cache/nccl-plugins/plugins/profiler/inspector && make -j16 CUDA_HOME=$(dirname $(dirname $(command -v nvcc))) > $W/inspector-build.log 2>&1); echo "inspector build rc=$?"; tail -3 $W/inspector-build.log
  local I=$(ls $PWD/.cache/nccl-plugins/plugins/profiler/inspector/*.so 2>/dev/null | head -1)
  if [ -n "$I" ]; then mkdir -p $W/inspector
    NCCL_PROFILER_PLUGIN=$I NCCL_INSPECTOR_ENABLE=1 NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS=500 NCCL_INSPECTOR_DUMP_DIR=$W/inspector timeout 120 $T --nproc-per-node $NGPU examples/train_transformer.py --mode ddp --layers 2 --width 1024 --seq 256 --steps 6 --warmup 2 > $W/inspector/out.txt 2>&1; echo "inspector job rc=$?"; ls -la $W/inspector | head
  fi
  pack
  step GPU tests on $NGPU GPUs
  timeout 240 python3 -m pytest -m gpu -q -p no:cacheprovider -rs tests/gpu > $W/gpu-tests.txt 2>&1; echo "gpu tests rc=$?"; tail -25 $W/gpu-tests.txt
  pack
}
phase_deploy() {  # issue 28 item 3: one candidate forced sweep's way (the communicator's config) and the plugin's way (a rule), the FSDP2 job's all_gather sizes, bf16, alternated
  local R=$OUT/deploy P=$PWD/plugin/build/libnccl-tuner-ccltune.so; mkdir -p $R
  printf 'allgather,100679680,100679680,default,default,32,-1,-1\nallgather,268443648,268443648,default,default,32,-1,-1\n' > $R/ch32.conf
  local S="all_gather -b 100679680 -e 268443648 -i 167763968 -d bfloat16 -G 10 -n 20 -w 5 --nproc $NGPU --db $R/deploy.db"
  step "deploy: NCCL default / --channels 32 (communicator config) / rule channels=32 (tuner plugin), 3 rounds"
  for r in 1 2 3; do
    ct 60 bench $S | grep -E "^ +[0-9]" | sed "s/^/default  r$r /"
    ct 60 bench $S --channels 32 | grep -E "^ +[0-9]" | sed "s/^/config   r$r /"
    NCCL_TUNER_PLUGIN=$P CCLTUNE_RULES=$R/ch32.conf ct 60 bench $S | grep -E "^ +[0-9]" | sed "s/^/plugin   r$r /"
  done 2>&1 | grep -v "^---"
}
phase_prof() {  # issue 29: the profiler plugin in the example job (ddp, fsdp2, tp-decode; ddp with a rule forcing another algo/proto/channels)
  local W=$OUT/prof T="timeout -k 5 100 torchrun --standalone --nproc-per-node $NGPU" L=$PWD/profiler/build/libnccl-profiler-ccltune.so
  local A="--layers 2 --width 1024 --seq 256 --steps 6 --warmup 2" D="--batch 64 --width 2048 --layers 2 --steps 6 --warmup 2"
  mkdir -p $W; step "prof: build (make -C profiler, plugin) and the C harness"
  timeout 120 make -C profiler -j8 check > $W/build.log 2>&1; echo "profiler build+check rc=$?"; grep -E "OK:|FAIL" $W/build.log | head -5
  [ -f plugin/build/libnccl-tuner-ccltune.so ] || timeout 60 make -C plugin -j8 > $W/plugin-build.log 2>&1
  timeout 60 python3 bench/profiler_cost.py --rounds 100 2>&1 | tail -8
  # a rule NCCL can honour for DDP's all_reduce buckets: tree/simple on 4 channels, else (tree not offered) ring/LL128 on 4
  printf 'allreduce,0,18446744073709551615,tree,simple,4,-1,-1\nallreduce,0,18446744073709551615,ring,ll128,4,-1,-1\n' > $W/force.conf
  local mode args
  for mode in ddp fsdp2 tp-decode ddp-forced; do
    step "prof: $mode on $NGPU GPUs with the profiler"
    mkdir -p $W/$mode; args="$A"; [ $mode = tp-decode ] && args="$D"
    local E="NCCL_PROFILER_PLUGIN=$L CCLTUNE_PROFILE=$W/$mode NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV NCCL_DEBUG_FILE=$W/$mode/nccl.%h.%p.log"
    [ $mode = ddp-forced ] && E="$E NCCL_TUNER_PLUGIN=$PWD/plugin/build/libnccl-tuner-ccltune.so CCLTUNE_RULES=$W/force.conf"
    env $E $T examples/train_transformer.py --mode ${mode%-forced} $args --profile-dir $W/$mode/trace --profile-steps 2 --gzip \
      > $W/$mode/out.txt 2>&1; echo "$mode rc=$? $(tail -1 $W/$mode/out.txt)"
    grep -h -m2 -E "profiler plugin|ccltune profiler" $W/$mode/nccl.*.log 2>/dev/null | sed 's/^[^ ]* //' | sort -u | head -3
    for f in $(ls $W/$mode/ccltune-profile.*.txt 2>/dev/null | head -2); do echo "-- $(basename $f)"; grep -v "^call " $f | head -14; done
  done
  step "prof: per mode, the collective entries (kind op count datatype algo proto nch nwarps peer calls timed sum p10 p50 p90 max) of rank 0"
  for mode in ddp fsdp2 tp-decode ddp-forced; do
    echo "## $mode: $(ls $W/$mode/ccltune-profile.*.txt 2>/dev/null | wc -l) files, $(cat $W/$mode/ccltune-profile.*.txt 2>/dev/null | grep -c '^# end') complete"
    cat $(ls $W/$mode/ccltune-profile.*.0.txt 2>/dev/null) /dev/null | grep -E "^(coll|p2p) " | sort -k10,10nr | head -6
  done
  pack
}
phase_prof2() {  # issue 29 (branch prof2), 2 GPUs, ~2 min: the GPUs' globaltimer vs the host clock; DDP on 2 ranks with the profiler, NCCL's default and a rule forcing TREE/SIMPLE/4, each against torch.profiler per rank; the 2-rank fixture for tests/fixtures/workload/profile-ddp-2
  local t0=$(date +%s) W=$OUT/prof2 L=$PWD/profiler/build/libnccl-profiler-ccltune.so mode E
  local T="timeout -k 5 75 torchrun --standalone --nproc-per-node 2" A="--layers 2 --width 1024 --seq 256 --steps 6 --warmup 2 --profile-steps 2 --gzip"
  mkdir -p $W; step "prof2: build the profiler and tuner plugins; each GPU's %globaltimer against the host clock"
  timeout 60 make -C profiler -j8 > $W/build.log 2>&1; echo "profiler build rc=$?"
  timeout 60 make -C plugin -j8 > $W/plugin-build.log 2>&1; echo "tuner build rc=$?"
  timeout 60 nvcc -O2 -o $W/globaltimer_skew bench/globaltimer_skew.cu > $W/nvcc.log 2>&1 && timeout 20 $W/globaltimer_skew | tee $W/globaltimer.txt
  printf 'allreduce,0,18446744073709551615,tree,simple,4,-1,-1\n' > $W/force.conf
  for mode in ddp ddp-tree; do
    step "prof2: $mode on GPUs 0,1 with the profiler and torch.profiler (wall $(( $(date +%s) - t0 )) s)"
    mkdir -p $W/$mode; E="NCCL_PROFILER_PLUGIN=$L CCLTUNE_PROFILE=$W/$mode NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV NCCL_DEBUG_FILE=$W/$mode/nccl.%h.%p.log"
    [ $mode = ddp-tree ] && E="$E NCCL_TUNER_PLUGIN=$PWD/plugin/build/libnccl-tuner-ccltune.so CCLTUNE_RULES=$W/force.conf"
    env $E CUDA_VISIBLE_DEVICES=0,1 $T examples/train_transformer.py --mode ddp $A --profile-dir $W/$mode/trace > $W/$mode/out.txt 2>&1
    echo "$mode rc=$? $(tail -1 $W/$mode/out.txt)"; grep -h "Trees \[0\]" $W/$mode/nccl.*.log | sed 's/^[^ ]* //; s/\[1\].*//'
    grep -h "^coll AllReduce" $W/$mode/ccltune-profile.*.0.txt | awk '{print "  rank 0 ran:", $5, $6, $7, "calls", $10}' | sort | uniq -c | head -4
    timeout 30 python3 bench/profiler_vs_trace.py $W/$mode $W/$mode/trace
  done
  step "prof2: the 2-rank fixture (profile-ddp-2) through the generic fixture tests and the import"
  rm -rf tests/fixtures/workload/profile-ddp-2 $W/profile-ddp-2; mkdir -p $W/profile-ddp-2
  cp $W/ddp/ccltune-profile.*.txt $W/profile-ddp-2/ && cp -r $W/profile-ddp-2 tests/fixtures/workload/
  timeout 60 python3 -m pytest tests/unit/test_profile_fixtures.py -q -p no:cacheprovider 2>&1 | tail -3
  ct 30 workload import $W/profile-ddp-2 --out $W/ddp2.json > /dev/null 2>&1; ct 30 workload show $W/ddp2.json | grep -vE "^# source" | head -12
  ct 30 workload import $W/ddp-tree --out $W/tree2.json > /dev/null 2>&1; ct 30 workload show $W/tree2.json | grep -E "warning: .*TREE" | cut -c1-200
  rm -rf tests/fixtures/workload/profile-ddp-2; echo "phase prof2 wall $(( $(date +%s) - t0 )) s"; pack
}
phase_wl() {  # branch wl (issues 28.4, 29, 30), 2+ GPUs: import log+trace merged with steps, show's job/idle ratio, sweep in the job's datatype and under load when the job is far slower than idle, tune's job-slow rule, replay's paired interval and rows-vs-rounds line
  local W=$OUT/wl; mkdir -p $W; phase_build
  local T="torchrun --standalone"
  for m in tp-decode fsdp2; do
    step "workload loop: $m on $NGPU GPUs"
    mkdir -p $W/$m
    NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,COLL NCCL_DEBUG_FILE=$W/$m/nccl.%p.log timeout 120 $T --nproc-per-node $NGPU examples/train_transformer.py --mode $m --layers 2 --width 1024 --seq 256 --steps 6 --warmup 2 --profile-dir $W/$m --profile-steps 2 --gzip > $W/$m/out.txt 2>&1; echo "job $m rc=$?"; tail -1 $W/$m/out.txt
    ct 60 workload import $W/$m/nccl.*.log $W/$m/trace_rank*.json.gz --out $W/$m/w.json 2>/dev/null | grep -v "^# source" | head -12
    ct 240 sweep --workload $W/$m/w.json --idle --reps 3 --nproc $NGPU --db $W/$m/s.db 2>&1 | grep -E "^# |complete" | head -6
    ct 30 workload show $W/$m/w.json --db $W/$m/s.db | grep -vE "^# (source|warning)" | tail -10
    ct 300 sweep --workload $W/$m/w.json --reps 3 --nproc $NGPU --db $W/$m/s.db 2>&1 | grep -E "^# |complete" | head -6
    ct 30 tune --db $W/$m/s.db --out $W/$m/rules.conf --workload $W/$m/w.json 2>&1 | head -14
    ct 30 tune --db $W/$m/s.db --out $W/$m/rules_load.conf --workload $W/$m/w.json --under-load 8192 2>&1 | head -8
    ct 240 replay $W/$m/w.json --rules $W/$m/rules.conf --iters 5 --nproc $NGPU --db $W/$m/s.db 2>&1 | grep -v "^# not replayed" | head -16
  done
  pack
}
phase_r7b() {  # 2026-11-27 call 2 (4 GPUs, ~9 min): the profiler in the jobs, sweep's vs the plugin's forcing, nccl-tests vs ccltune on 4 ranks (eager all_reduce+sendrecv, -G all_reduce), 0-byte rows, split, check without a profile
  local t0=$(date +%s) W=$OUT/g31; mkdir -p $W
  export NCCL_TESTS_DIR=$PWD/.cache/nccl-tests NCCLT_BUILD=$PWD/.cache/nccl-tests/build
  phase_build; phase_prof; echo "wall $(( $(date +%s) - t0 )) s"
  phase_deploy; echo "wall $(( $(date +%s) - t0 )) s"; pack
  step "nccl-tests (MPI) vs ccltune on $NGPU ranks, ABBA, 4 runs each: eager all_reduce+sendrecv, -G 10 all_reduce"
  NPROCS="$NGPU" COLLS="all_reduce sendrecv" MODES=eager REPS=4 timeout 200 bash bench/eager_vs_ncclt_mpi.sh $W/cmp > $W/cmp-eager.txt 2>&1
  NPROCS="$NGPU" COLLS="all_reduce" MODES=graph REPS=4 timeout 100 bash bench/eager_vs_ncclt_mpi.sh $W/cmp > $W/cmp-graph.txt 2>&1
  grep -E "^##|sizes outside|outside" $W/cmp-eager.txt $W/cmp-graph.txt | head -20; echo "wall $(( $(date +%s) - t0 )) s"; pack
  local B=.cache/nccl-tests/build M="mpirun --allow-run-as-root --bind-to none -x NCCL_NVLS_ENABLE -x TORCH_SYMM_MEM_DISABLE_MULTICAST -x NVSHMEM_DISABLE_NVLS"
  step "0-byte rows and in-place sendrecv: ccltune (nccl-tests' rows: .cache/cap/ncclt_ag_np4.txt)"
  ct 40 bench all_gather -b 8 -e 128 -f 4 --nproc $NGPU --db "$DB" > $W/ccl_ag0.txt 2>&1
  ct 40 bench sendrecv -b 8 -e 1M -f 32 --nproc $NGPU --db "$DB" > $W/ccl_sr.txt 2>&1
  grep -hE "^ +(0|8|32|128|1048576) " $W/ccl_ag0.txt $W/ccl_sr.txt
  step "NCCL_TESTS_SPLIT=\"MOD 2\": ccltune"
  NCCL_TESTS_SPLIT="MOD 2" ct 40 bench all_reduce -b 8 -e 1M -f 32 --nproc $NGPU --db "$DB" > $W/ccl_split.txt 2>&1; grep -hE "Rank|^ +(8|1048576) |rror" $W/ccl_split.txt | head -8
  step "check on $((NGPU - 1)) GPUs: no built-in profile"
  CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((NGPU - 2))) ct 60 check --db "$DB" --json $W/check.json > $W/check.txt 2>&1; tail -6 $W/check.txt
  echo "phase r7b wall $(( $(date +%s) - t0 )) s"; pack
}
phase_ab() {  # issue 28: ccltune ab on the example job (ddp, fsdp2, tp-decode), a candidate rule file, and a node made slow on purpose
  local W=$OUT/ab; mkdir -p $W; phase_build
  # a candidate that forces ring/LL everywhere: LL is built for small messages, so the job should not gain
  printf '# phase_ab candidate: ring/LL for every size\nallreduce,0,1T,ring,ll,-1,-1,-1\nallgather,0,1T,ring,ll,-1,-1,-1\nreducescatter,0,1T,ring,ll,-1,-1,-1\n' > $W/cand.conf
  local J="torchrun --standalone --nproc-per-node $NGPU examples/train_transformer.py --layers 2 --width 1024 --seq 256 --steps 8 --warmup 2"
  local A=(--metric 'step +[0-9]+ +([0-9.]+) ms' --rounds 4 --seed 28 --run-timeout 60 --db "$DB")
  step "ab ddp: default, A/A, the candidate rules, NCCL_P2P_DISABLE=1 (slow on purpose), 4 rounds"
  run 420 python3 -m ccltune ab "${A[@]}" --rules $W/cand.conf --env NCCL_P2P_DISABLE=1 --json $W/ddp.json -- $J --mode ddp > $W/ddp.txt 2>&1
  step "ab fsdp2 and tp-decode: default vs the candidate rules (no A/A, to fit the time), 4 rounds"
  for m in fsdp2 tp-decode; do
    run 200 python3 -m ccltune ab "${A[@]}" --no-aa --rules $W/cand.conf --json $W/$m.json -- $J --mode $m > $W/$m.txt 2>&1
  done
  step "doctor on the slow node's log: does it name the fix and the ab line?"
  NCCL_P2P_DISABLE=1 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV NCCL_DEBUG_FILE=$W/slow.%p.log timeout 120 $J --mode ddp --steps 2 > /dev/null 2>&1
  cat $W/slow.*.log > $W/slow.log 2>/dev/null; ct 60 doctor --nccl-log $W/slow.log --db "$DB" > $W/doctor.txt 2>&1; grep -E "FAIL|WARN|fix:|prove" $W/doctor.txt | head -8
  step "verdict tables (ratio = arm / default; lower is faster)"
  for m in ddp fsdp2 tp-decode; do echo "## $m"; grep -E "^# (arm|ratio)|^  [^ ]|^# (run failed|failed run)" $W/$m.txt; done
  pack
}
phase_abcomm() {  # issue 28 (a) and the fix's proof: on a node slowed by NCCL_P2P_DISABLE=1, ab with the profiler's in-job comm time proves doctor's fix (unset it) on ddp
  local W=$OUT/abcomm; mkdir -p $W; phase_build; timeout 120 make -C profiler -j8 > $W/prof-build.log 2>&1; echo "profiler build rc=$?"
  local J="torchrun --standalone --nproc-per-node $NGPU examples/train_transformer.py --layers 2 --width 1024 --seq 256 --steps 8 --warmup 2 --mode ddp"
  step "ab ddp, --metric comm, NCCL_P2P_DISABLE=1 in the environment: default (slowed) vs doctor's fix (unset it), 4 rounds"
  NCCL_P2P_DISABLE=1 run 240 python3 -m ccltune ab --metric comm --no-aa --rounds 4 --seed 28 --run-timeout 60 --db "$DB" --arm fix:unset:NCCL_P2P_DISABLE --json $W/comm.json -- $J > $W/comm.txt 2>&1
  grep -E "^# (metric|arm|ratio|note)|^  [^ ]|^# (run failed|failed run)" $W/comm.txt
  pack
}
phase_r7c() {  # 2026-11-27 call 3 (4 GPUs, ~8 min): ccltune ab on the example job: DDP on a node made slow on purpose (NCCL_P2P_DISABLE=1) and its fix, FSDP2's A/A and the profiler's cost, TP-decode with a candidate rule and --prune; then the split GPU tests if time is left
  local t0=$(date +%s) W=$OUT/ab; mkdir -p $W
  phase_build; timeout 120 make -C profiler -j8 > $W/prof-build.log 2>&1; echo "profiler build rc=$?"
  local L=$PWD/profiler/build/libnccl-profiler-ccltune.so
  local J="torchrun --standalone --nproc-per-node $NGPU examples/train_transformer.py --layers 2 --width 1024 --seq 256 --steps 8 --warmup 2"
  local A=(--metric 'step +[0-9]+ +([0-9.]+) ms' --rounds 6 --seed 27 --run-timeout 60 --db "$DB")
  step "ab ddp on a node made slow (NCCL_P2P_DISABLE=1 exported): the fix NCCL_P2P_DISABLE=0, with the A/A control"
  NCCL_P2P_DISABLE=1 timeout -s INT -k 10 170 python3 -m ccltune ab "${A[@]}" --budget 150 --env NCCL_P2P_DISABLE=0 --json $W/ddp_fix.json -- $J --mode ddp > $W/ddp_fix.txt 2>&1; echo "rc=$?"
  grep -vE "^# (run|arm |ccltune ab)" $W/ddp_fix.txt | tail -9; echo "wall $(( $(date +%s) - t0 )) s"; pack
  step "ab fsdp2: the A/A control and the profiler plugin loaded (its cost on the step)"
  timeout -s INT -k 10 180 python3 -m ccltune ab "${A[@]}" --budget 160 --arm profiler:env:NCCL_PROFILER_PLUGIN=$L --arm profiler:env:CCLTUNE_PROFILE=$W/fsdp2-prof --json $W/fsdp2_prof.json -- $J --mode fsdp2 > $W/fsdp2_prof.txt 2>&1; echo "rc=$?"
  grep -vE "^# (run|arm |ccltune ab)" $W/fsdp2_prof.txt | tail -9; echo "wall $(( $(date +%s) - t0 )) s"; pack
  step "ab tp-decode (256 KB bf16 all_reduces) --prune: a candidate rule (ring/SIMPLE at 256 KB)"
  printf 'allreduce,256K,256K,ring,simple,-1,-1,-1\n' > $W/cand.conf
  timeout -s INT -k 10 130 python3 -m ccltune ab "${A[@]}" --budget 110 --no-aa --rules $W/cand.conf --prune $W/kept.conf --json $W/tp.json -- $J --mode tp-decode --batch 64 --width 2048 > $W/tp.txt 2>&1; echo "rc=$?"
  grep -vE "^# (run|arm |ccltune ab)" $W/tp.txt | tail -9; grep -v "^#" $W/kept.conf 2>/dev/null; echo "(kept.conf: $(grep -vc '^#' $W/kept.conf 2>/dev/null) rules)"
  echo "wall $(( $(date +%s) - t0 )) s"; pack
  if [ $(( $(date +%s) - t0 )) -lt 420 ]; then
    step "GPU tests: split communicators on $NGPU GPUs"
    timeout 70 python3 -m pytest -m gpu -q -p no:cacheprovider -rs tests/gpu/test_bench_split_gpu.py > $W/gpu-split.txt 2>&1; echo "rc=$?"; tail -4 $W/gpu-split.txt
  fi
  echo "phase r7c wall $(( $(date +%s) - t0 )) s"; pack
}
phase_wl2() {  # branch wl2 (issues 28.4, 29, 30), 2 or 4 GPUs, < 3 min: FSDP2's avg reduce_scatter carried from its COLL log into the workload and sweep --workload's rows; --under-load sized from the job's trace; per rule, the calls it covered and what NCCL ran (plugin verify --profile, ab's table) with forced rules and the profiler loaded
  local W=$OUT/wl2 t0=$(date +%s); mkdir -p $W/job; phase_build
  timeout 120 make -C profiler -j8 > $W/prof-build.log 2>&1; echo "profiler build rc=$? at $(( $(date +%s) - t0 )) s"
  local L=$PWD/profiler/build/libnccl-profiler-ccltune.so P=$PWD/plugin/build/libnccl-tuner-ccltune.so
  local J="torchrun --standalone --nproc-per-node $NGPU examples/train_transformer.py --mode fsdp2 --layers 2 --width 1024 --seq 256"
  # line 1 NCCL can honour (ring/simple on 4 channels); line 2 it cannot (all_gather has no tree: the plugin skips it,
  # NCCL runs its own choice: NOT APPLIED); line 3 covers no call of the job (NEVER FIRED)
  printf 'reducescatter,0,1T,ring,simple,4,-1,-1\nallgather,0,1T,tree,simple,-1,-1,-1\nallreduce,1,2,tree,ll,-1,-1,-1\n' > $W/force.conf
  step "wl2: one FSDP2 job on $NGPU GPUs: COLL log, torch trace, the profiler and the tuner with force.conf"
  NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,COLL NCCL_DEBUG_FILE=$W/job/nccl.%p.log NCCL_PROFILER_PLUGIN=$L CCLTUNE_PROFILE=$W/job/prof \
    NCCL_TUNER_PLUGIN=$P CCLTUNE_RULES=$W/force.conf timeout 90 $J --steps 4 --warmup 1 --profile-dir $W/job/trace --profile-steps 2 --gzip \
    > $W/job/out.txt 2>&1; echo "job rc=$? at $(( $(date +%s) - t0 )) s: $(tail -1 $W/job/out.txt)"
  ct 60 workload import $W/job/nccl.*.log $W/job/trace/trace_rank*.json.gz --out $W/w.json > $W/import.txt 2>&1; grep -vE "^# (source|warning)" $W/import.txt | tail -9
  step "wl2: plugin verify --profile (the job's own profiler files against force.conf)"
  ct 30 plugin verify $W/force.conf --profile $W/job/prof > $W/verify.txt 2>&1; cat $W/verify.txt
  step "wl2: sweep --workload, reduce_scatter only (in the job's op), then show with the idle rows"
  ct 90 sweep reduce_scatter --workload $W/w.json --algos ring --protos simple --channels '' --grid axes --reps 2 --nproc $NGPU --db $W/s.db > $W/sweep.txt 2>&1
  grep -E "^# |complete" $W/sweep.txt | head -6
  python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); [print('rows', *r) for r in c.execute('select collective, size_bytes, dtype, op, count(*) from measurements group by 1,2,3,4')]" $W/s.db
  ct 30 workload show $W/w.json --db $W/s.db > $W/show.txt 2>&1; grep -vE "^# (source|warning)" $W/show.txt | tail -8
  echo "wall $(( $(date +%s) - t0 )) s"; pack
  step "wl2: ab --rules force.conf --metric comm, 1 round, no A/A (the table, not a verdict): the per-rule table"
  timeout -s INT -k 10 90 python3 -m ccltune ab --rules $W/force.conf --metric comm --rounds 1 --no-aa --seed 30 --run-timeout 45 --db "$DB" --json $W/ab.json -- $J --steps 2 --warmup 1 > $W/ab.txt 2>&1; echo "ab rc=$?"
  step "wl2 summary"
  echo "## op (workload show: reduce_scatter rows)"; grep -E "^  reduce_scatter" $W/show.txt
  echo "## sweep rows by op"; python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); [print('  ', *r) for r in c.execute('select collective, size_bytes, dtype, op, count(*) from measurements group by 1,2,3,4')]" $W/s.db
  echo "## sized load"; grep -h "under load, sized from the job\|under load:" $W/show.txt $W/sweep.txt
  echo "## plugin verify --profile"; grep -E "^ +[0-9]+  |applied," $W/verify.txt
  echo "## ab per-rule table"; grep -A8 "^# arm force" $W/ab.txt | grep -E "^ +[0-9]+  |applied,|no profiler"
  echo "phase wl2 wall $(( $(date +%s) - t0 )) s"; pack
}
phase_g31() {  # issue 31 on 2/4 GPUs in <= 5 min wall: nccl-tests (MPI) vs ccltune, ABBA, 4 runs each; check without a profile; capture cost; NCCL_TESTS_SPLIT
  local W=$OUT/g31 t0=$(date +%s); mkdir -p $W; phase_build
  export NCCL_TESTS_DIR=$PWD/.cache/nccl-tests NCCLT_BUILD=$PWD/.cache/nccl-tests/build  # cap7's build, else built here
  local c; for c in all_reduce all_gather sendrecv; do [ -x $NCCLT_BUILD/${c}_perf ] || break; done
  [ -x $NCCLT_BUILD/${c}_perf ] || { BUILDDIR=$NCCLT_BUILD COLLS="all_reduce all_gather sendrecv" bash bench/nccl_tests_build.sh > $W/ncclt-build.log 2>&1; echo "nccl-tests build rc=$?"; }
  step NVML answers as saved records, for the CPU tests of topo
  python3 -c "import json; from ccltune.diagnose.probes import nvml; t = nvml.read_nvml(); print(json.dumps(nvml.to_record(t) if t else None, indent=1))" > $W/nvml.json 2> $W/nvml.err
  ct 30 topo > $W/topo.txt 2>&1; grep -c NV $W/topo.txt
  step "nccl-tests vs ccltune, eager (-n 100 -w 20) on $NGPU and 2 GPUs, -G 10 (-n 20 -w 5) on $NGPU; 8 B-512 MB (-b 8 -e 1G -f 4)"
  # cut to fit 5 minutes: all_reduce and sendrecv (all_gather's sizes are pinned by CPU tests), -G on $NGPU GPUs only
  # and all_reduce only there
  NPROCS="$NGPU 2" COLLS="all_reduce sendrecv" MODES=eager REPS=4 bash bench/eager_vs_ncclt_mpi.sh $W/cmp > $W/cmp-eager.txt 2>&1
  NPROCS="$NGPU" COLLS="all_reduce" MODES=graph REPS=4 bash bench/eager_vs_ncclt_mpi.sh $W/cmp > $W/cmp-graph.txt 2>&1
  grep -E "^##|sizes outside" $W/cmp-eager.txt $W/cmp-graph.txt
  echo "wall so far $(( $(date +%s) - t0 )) s"
  step "0-byte rows and the first iterations: -C 1 and -I 1 in both (all_gather 8-128 B, sendrecv 8 B)"
  local M="mpirun --allow-run-as-root --bind-to none -x NCCL_NVLS_ENABLE -x TORCH_SYMM_MEM_DISABLE_MULTICAST -x NVSHMEM_DISABLE_NVLS"
  timeout 60 $M -np $NGPU $NCCLT_BUILD/all_gather_perf -b 8 -e 128 -f 4 -C 1 > $W/ncclt_ag0_C.txt 2>&1
  ct 60 bench all_gather -b 8 -e 128 -f 4 -C 1 --nproc $NGPU --db "$DB" > $W/ccl_ag0_C.txt 2>&1
  timeout 60 $M -np $NGPU $NCCLT_BUILD/sendrecv_perf -b 8 -e 8 -I 1 > $W/ncclt_sr_I.txt 2>&1
  ct 60 bench sendrecv -b 8 -e 8 -I 1 --nproc $NGPU --db "$DB" > $W/ccl_sr_I.txt 2>&1
  grep -hE "^ +(0|8|32|128) " $W/ncclt_ag0_C.txt $W/ccl_ag0_C.txt $W/ncclt_sr_I.txt $W/ccl_sr_I.txt
  step "check on $((NGPU - 1)) GPUs: no built-in profile, the gate from the links"
  CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((NGPU - 2))) ct 120 check --db "$DB" --json $W/check.json > $W/check.txt 2>&1; grep -vE "^links:" $W/check.txt | tail -8
  step "the plugin's capture cost: 8 B all_reduce -G 10 -n 2000, plugin loaded, CCLTUNE_CAPTURE unset then set"
  local P=$PWD/plugin/build/libnccl-tuner-ccltune.so; : > $W/none.conf; mkdir -p $W/capdir
  for c in unset set; do
    if [ $c = set ]; then E="CCLTUNE_CAPTURE=$W/capdir"; else E="CCLTUNE_X=1"; fi
    env $E NCCL_TUNER_PLUGIN=$P CCLTUNE_RULES=$W/none.conf python3 -m ccltune bench all_reduce -b 8 -e 8 -n 2000 -G 10 --nproc $NGPU --db "$DB" 2>/dev/null | grep -E "^ +8 " | sed "s/^/capture-$c /"
  done; ls $W/capdir | head -2
  step "NCCL_TESTS_SPLIT=\"MOD 2\" on NCCL: ccltune beside nccl-tests"
  NCCL_TESTS_SPLIT="MOD 2" ct 60 bench all_reduce -b 8 -e 1M -f 32 --nproc $NGPU --db "$DB" > $W/ccl_split.txt 2>&1
  timeout 60 $M -np $NGPU -x NCCL_TESTS_SPLIT="MOD 2" $NCCLT_BUILD/all_reduce_perf -b 8 -e 1M -f 32 > $W/ncclt_split.txt 2>&1
  grep -hE "Rank|^ +(8|1048576|262144) " $W/ncclt_split.txt $W/ccl_split.txt
  echo "phase g31 wall $(( $(date +%s) - t0 )) s"
  pack
}
loopjob() {  # loopjob MODE AB_BUDGET_S JOBARGS...: issue 28's whole loop on one job: capture (COLL log, profiler, trace), import, idle sweep, sweep (under load when the job is far slower), tune, ab --prune on the job's step time
  local m=$1 B=$2; shift 2; local W=$OUT/loop$NGPU/$m t0=$(date +%s); mkdir -p $W/prof $W/trace
  local L=$PWD/profiler/build/libnccl-profiler-ccltune.so
  local J="torchrun --standalone --nproc-per-node $NGPU examples/train_transformer.py --mode $m $*"
  step "loop $m on $NGPU GPUs: capture"
  NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,COLL NCCL_DEBUG_FILE=$W/nccl.%p.log NCCL_PROFILER_PLUGIN=$L CCLTUNE_PROFILE=$W/prof \
    timeout -k 5 150 $J --steps 6 --warmup 2 --profile-dir $W/trace --profile-steps 2 --gzip > $W/cap.txt 2>&1; echo "capture rc=$? $(tail -1 $W/cap.txt)"
  ct 60 workload import $W/nccl.*.log $W/prof/ccltune-profile.*.txt $W/trace/*.json.gz --out $W/w.json > $W/import.txt 2>&1
  [ -s $W/w.json ] || ct 60 workload import $W/nccl.*.log $W/trace/*.json.gz --out $W/w.json > $W/import.txt 2>&1
  grep -vE "^# (source|warning)" $W/import.txt | cut -c1-160 | head -12
  step "loop $m: sweep --idle, then sweep (NCCL's default idle vs the job decides: under load when >= 2x)"
  ct 200 sweep --workload $W/w.json --idle --reps 3 --nproc $NGPU --db $W/s.db > $W/sweep-idle.txt 2>&1; grep -E "^# (under|idle|job|sweep)|complete|rror" $W/sweep-idle.txt | head -4
  ct 240 sweep --workload $W/w.json --reps 3 --nproc $NGPU --db $W/s.db > $W/sweep.txt 2>&1; grep -E "^# (under|idle|job|sweep|load)|complete|rror" $W/sweep.txt | head -6
  ct 30 workload show $W/w.json --db $W/s.db 2>&1 | grep -vE "^# (source|warning)" | cut -c1-170 | tail -8
  ct 30 tune --db $W/s.db --workload $W/w.json --out $W/rules.conf > $W/tune.txt 2>&1; cut -c1-170 $W/tune.txt | head -16
  local n=$(grep -vcE '^(#|platform|$)' $W/rules.conf 2>/dev/null); echo "tune wrote ${n:-0} rule(s); loop so far $(( $(date +%s) - t0 )) s"
  if [ "${n:-0}" -gt 0 ] && [ "$B" -gt 0 ]; then
    step "loop $m: ab --rules (tune's candidates) --prune, until confident within ${B} s"
    timeout -s INT -k 10 $((B + 40)) python3 -m ccltune ab --metric 'step +[0-9]+ +([0-9.]+) ms' --until-confident --budget $B --seed 28 \
      --run-timeout 90 --db $W/ab.db --rules $W/rules.conf --prune $W/final.conf --json $W/ab.json -- $J --steps 10 --warmup 3 > $W/ab.txt 2>&1; echo "ab rc=$?"
    grep -vE "^# (arm |ccltune ab)" $W/ab.txt | cut -c1-200 | tail -8; echo "final rules kept: $(grep -vcE '^(#|platform|$)' $W/final.conf 2>/dev/null)"
  else
    [ "${n:-0}" -gt 0 ] && echo "loop $m: ${n} candidate rule(s) NOT A/B'd (no ab budget given)" || echo "loop $m: tune left no rule: the job keeps NCCL's default, nothing to A/B"
  fi
  echo "loop $m on $NGPU GPUs: $(( $(date +%s) - t0 )) s"; pack
}
FSDP="--layers 4 --width 2048 --seq 256 --batch 4"; DDP="--layers 2 --width 1024 --seq 256"; TPD="--layers 2 --width 2048 --batch 64"
phase_loop4a() {  # 2026-11-27 (4 GPUs, <= 10 min): the loop on FSDP2 and DDP, doctor on a node made slow
  local t0=$(date +%s); phase_build; timeout 120 make -C profiler -j8 > $OUT/prof-build.log 2>&1; echo "profiler build rc=$?"
  loopjob fsdp2 100 $FSDP; echo "wall $(( $(date +%s) - t0 )) s"
  loopjob ddp 80 $DDP; echo "wall $(( $(date +%s) - t0 )) s"
  step "doctor on a node made slow (NCCL_P2P_DISABLE=1): does it name it and print the ab line?"
  local W=$OUT/slow; mkdir -p $W
  NCCL_P2P_DISABLE=1 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV NCCL_DEBUG_FILE=$W/slow.%p.log timeout 100 torchrun --standalone --nproc-per-node $NGPU examples/train_transformer.py --mode ddp $DDP --steps 2 --warmup 1 > $W/job.txt 2>&1
  cat $W/slow.*.log > $W/slow.log 2>/dev/null; ct 60 doctor --nccl-log $W/slow.log > $W/doctor.txt 2>&1; grep -E "FAIL|WARN|fix|prove|ab " $W/doctor.txt | cut -c1-220 | head -10
  echo "phase loop4a wall $(( $(date +%s) - t0 )) s"; pack
}
phase_loop4b() {  # 2026-11-27 (4 GPUs, <= 10 min): the loop on TP-decode; the profiler's cost on the FSDP2 step by ab (>= 6 rounds)
  local t0=$(date +%s); phase_build; timeout 120 make -C profiler -j8 > $OUT/prof-build.log 2>&1; echo "profiler build rc=$?"
  loopjob tp-decode 80 $TPD; echo "wall $(( $(date +%s) - t0 )) s"
  local W=$OUT/profcost L=$PWD/profiler/build/libnccl-profiler-ccltune.so; mkdir -p $W
  step "ab fsdp2: the profiler plugin loaded vs not (its cost on the step), A/A control, budget $((540 - $(date +%s) + t0)) s"
  timeout -s INT -k 10 $((560 - $(date +%s) + t0)) python3 -m ccltune ab --metric 'step +[0-9]+ +([0-9.]+) ms' --rounds 8 --budget $((530 - $(date +%s) + t0)) --seed 29 --run-timeout 90 --db $W/ab.db \
    --arm profiler:env:NCCL_PROFILER_PLUGIN=$L --arm profiler:env:CCLTUNE_PROFILE=$W/files --json $W/ab.json -- torchrun --standalone --nproc-per-node $NGPU examples/train_transformer.py --mode fsdp2 $FSDP --steps 10 --warmup 3 > $W/ab.txt 2>&1
  echo "rc=$?"; grep -vE "^# (arm |ccltune ab)" $W/ab.txt | cut -c1-200 | tail -9
  echo "phase loop4b wall $(( $(date +%s) - t0 )) s"; pack
}
phase_loop2() {  # the loop on 2 GPUs of a bigger machine (CUDA_VISIBLE_DEVICES=0,1 NGPU_USE=2), ab only when LOOP2_AB seconds are given
  local t0=$(date +%s); phase_build; timeout 120 make -C profiler -j8 > $OUT/prof-build.log 2>&1
  loopjob tp-decode ${LOOP2_AB:-0} $TPD; loopjob ddp ${LOOP2_AB:-0} $DDP; loopjob fsdp2 ${LOOP2_AB:-0} $FSDP; echo "phase loop2 wall $(( $(date +%s) - t0 )) s"; pack
}
phase_handab() {  # issue 28: ab's verdict against a hand-run interleaved A/B (bench/hand_ab.py), >= 10 runs per arm, FSDP2, the issue's candidate (32 channels for the big all_gathers)
  local t0=$(date +%s) W=$OUT/handab P=$PWD/plugin/build/libnccl-tuner-ccltune.so; mkdir -p $W; phase_build
  printf '# the issue-28 candidate: 32 channels for all_gathers of 64 MB-1 GB\nallgather,64M,1G,default,default,32,-1,-1\n' > $W/cand.conf
  [ -n "${HAND_RULES:-}" ] && cp $HAND_RULES $W/cand.conf
  local J="torchrun --standalone --nproc-per-node $NGPU examples/train_transformer.py --mode ${HAND_MODE:-fsdp2} ${HAND_ARGS:-$FSDP} --steps 10 --warmup 3"
  step "hand-run A/B: default vs the candidate through the plugin, ${HAND_RUNS:-10} runs each"
  timeout -k 5 ${HAND_S:-300} python3 bench/hand_ab.py --runs ${HAND_RUNS:-10} --metric 'step +[0-9]+ +([0-9.]+) ms' --seed 5 \
    --arm cand:NCCL_TUNER_PLUGIN=$P,CCLTUNE_RULES=$W/cand.conf -- $J > $W/hand.txt 2>&1; echo "rc=$?"; tail -4 $W/hand.txt
  echo "wall $(( $(date +%s) - t0 )) s"; pack
  step "ccltune ab: the same two arms, ${HAND_RUNS:-10} rounds (no A/A)"
  timeout -s INT -k 10 ${AB_S:-300} python3 -m ccltune ab --metric 'step +[0-9]+ +([0-9.]+) ms' ${AB_ROUNDS:---rounds ${HAND_RUNS:-10}} --no-aa --seed 6 --run-timeout 90 \
    --db $W/ab.db --rules $W/cand.conf --json $W/ab.json -- $J > $W/ab.txt 2>&1; echo "rc=$?"; grep -vE "^# (arm |ccltune ab)" $W/ab.txt | cut -c1-200 | tail -5
  echo "phase handab wall $(( $(date +%s) - t0 )) s"; pack
}
phase_opts() {  # issue 33: bench and validate on typed options; the workers' argv written from the options
  step "opts: bench on $NGPU GPUs through torchrun; each worker parses BenchOptions.to_argv()"
  local D="$OUT/opts.db"; rm -f "$D"
  ct 120 bench all_reduce all_gather -b 8 -e 16M -f 16 -G 5 -n 5 -J "$OUT/opts.json" --nproc $NGPU --db "$D" | tail -4
  ct 60 bench all_reduce -b 1M -e 1M -G 10 --symmetric --nproc $NGPU --db "$D" | tail -3
  python3 - "$D" <<'PY'
import sys, ccltune
db = ccltune.open_db(sys.argv[1])
print("run kind status rows | what the user typed | what the workers ran")
for r in db.runs():
    print(r.id, r.kind, r.status, len(db.rows(r.id)), "|", r.command, "|", r.env.get("command"))
PY
  step "opts: the GPU tests of bench and of docs/api.md (ccltune.validate on typed options, run as a job)"
  run 480 python3 -m pytest -m gpu -q -x -p no:cacheprovider tests/gpu/test_api_gpu.py tests/gpu/test_bench_gpu.py 2>&1 | tail -12
}
phase_ab2() {  # 2026-11-27 (4-GPU machine, <= 9.5 min): GPUs 0,1: the whole loop on DDP with ab --prune (budget AB2_S, 360 s); GPUs 2,3 at the same time: pytest -m gpu tests/gpu on 2 GPUs
  local t0=$(date +%s); phase_build; timeout 120 make -C profiler -j8 > $OUT/prof-build.log 2>&1; echo "profiler build rc=$?"
  ( export CUDA_VISIBLE_DEVICES=2,3; timeout -k 5 ${GPU2_S:-520} python3 -m pytest -m gpu tests/gpu -q -p no:cacheprovider > $OUT/gpu2.txt 2>&1; echo "rc=$? wall $(( $(date +%s) - t0 )) s" >> $OUT/gpu2.txt ) &
  local bg=$!
  ( export CUDA_VISIBLE_DEVICES=0,1; NGPU=2; loopjob ddp ${AB2_S:-360} $DDP ); echo "wall $(( $(date +%s) - t0 )) s"
  wait $bg; step "pytest -m gpu tests/gpu on GPUs 2,3"; tail -6 $OUT/gpu2.txt
  echo "phase ab2 wall $(( $(date +%s) - t0 )) s"; pack
}
phase_gpu4() {  # every GPU test on all GPUs (the whole tests/gpu), after issue 33's typed options
  local t0=$(date +%s); phase_build
  # streamed (tee): if the device time runs out mid-run, the reply's tail still has what ran
  timeout -k 5 ${GPU4_S:-540} python3 -m pytest -m gpu tests/gpu -q -p no:cacheprovider --durations=15 2>&1 | tee $OUT/gpu$NGPU.txt; echo "rc=${PIPESTATUS[0]}"
  echo "phase gpu4 wall $(( $(date +%s) - t0 )) s"; pack
}
phase_final2() {  # 2026-11-27 (4-GPU machine, <= 7 min): GPUs 2,3 every GPU test (after issue 33's commands; doctor on 2 of 4 GPUs); GPUs 0,1 at the same time wl2 (never run yet), the cmds1 API table, the diagopts API table while time is left
  local t0=$(date +%s); phase_build; timeout 120 make -C profiler -j8 > $OUT/prof-build.log 2>&1; echo "profiler build rc=$?"
  ( export CUDA_VISIBLE_DEVICES=2,3; timeout -k 5 ${GPU2_S:-430} python3 -m pytest -m gpu tests/gpu -q -p no:cacheprovider --durations=8 > $OUT/gpu2.txt 2>&1; echo "rc=$? wall $(( $(date +%s) - t0 )) s" >> $OUT/gpu2.txt ) &
  local bg=$!
  ( export CUDA_VISIBLE_DEVICES=0,1; NGPU=2; phase_wl2; echo "wall $(( $(date +%s) - t0 )) s"; CMDS1_NO_PYTEST=1 phase_cmds1 > $OUT/cmds1.txt 2>&1; cat $OUT/cmds1.txt; echo "wall $(( $(date +%s) - t0 )) s"
    local left=$(( 330 - $(date +%s) + t0 )); [ $left -gt 60 ] && DIAG_NO_PYTEST=1 DIAG_S=$left phase_diagopts || echo "diagopts table skipped: ${left} s left" )
  wait $bg; step "pytest -m gpu tests/gpu on GPUs 2,3"; tail -16 $OUT/gpu2.txt
  echo "phase final2 wall $(( $(date +%s) - t0 )) s"; pack
}
phase_cmds1() {  # issue 33 (branch cmds1): plugin verify's GPU run through run_plugin_verify, from the CLI and from Python
  step "cmds1: plugin verify on $NGPU GPUs, the GPU test (CLI) and ccltune.plugin_verify (API)"
  [ -z "${CMDS1_NO_PYTEST:-}" ] && run 240 python3 -m pytest -m gpu -q -x -p no:cacheprovider tests/gpu/test_bench_gpu.py -k plugin_verify 2>&1 | tail -3
  echo "allreduce,1M,1M,ring,ll,-1,-1,-1" > "$OUT/cmds1.conf"
  run 200 python3 - "$OUT/cmds1.conf" "$NGPU" <<'PY'
import sys

import ccltune

v = ccltune.plugin_verify(sys.argv[1], "all_reduce", min_bytes="1M", max_bytes="2M", nproc=int(sys.argv[2]))
print(f"# {'size_bytes':>10} {'status':<11} what NCCL ran / why")
for c in v.checks:
    print(f"  {c.size_bytes:>10} {c.status:<11} {c.reason}")
print(f"# verdict {v.verdict} n_ranks {v.n_ranks} exit_code {v.exit_code} (expected: 1 MiB APPLIED, 2 MiB NO RULE, PASS)")
PY
}
# cmds2
phase_diagopts() {  # issue 33: links, topo, doctor, check on typed options: their GPU tests (the CLI and ccltune.links), docs/api.md, then the API's results
  local t0=$(date +%s); phase_build  # doctor's and check's bench runs use the nccl engine's launch loop (native/)
  step "diagopts: tests/gpu/test_diag_gpu.py (links, topo, doctor, check; ccltune.links) and tests/gpu/test_api_gpu.py (docs/api.md: ccltune.check measures)"
  [ -z "${DIAG_NO_PYTEST:-}" ] && run 360 python3 -m pytest -m gpu -q -p no:cacheprovider tests/gpu/test_diag_gpu.py tests/gpu/test_api_gpu.py 2>&1 | tail -15
  step "diagopts: what each API call returned (nothing printed; run ids from the store)"
  local D="$OUT/diagopts.db"; rm -f "$D"
  timeout ${DIAG_S:-180} python3 - "$D" <<'PY'
import sys, time, ccltune
db = sys.argv[1]
print(f"{'call':<34} {'status':<7} {'exit':>4} {'run':>4} {'findings':>8} {'wall_s':>6}  what")
for name, call, what in [
        ("topo()", lambda: ccltune.topo(db=db), lambda r: f"{len(r.topology.gpus)} GPUs via {r.topology.source}"),
        ("links(size='64M', method='ce')", lambda: ccltune.links(size="64M", method="ce", db=db),
         lambda r: f"{len(r.rows)} rows, ring ceiling {r.summary.get('ring_ceiling_gbps', 0):.1f} GB/s"),
        ("doctor(timeout=120)", lambda: ccltune.doctor(timeout=120, db=db),
         lambda r: ", ".join(f"{f.name} {f.status}" for f in r.findings if f.name.startswith(("log:transport", "transport")))),
        ("check(junit=...)", lambda: ccltune.check(db=db, junit=db + ".xml"),
         lambda r: f"profile {r.profile}, links run {r.links_run_id}")]:
    t = time.monotonic()
    try:
        r = call()
    except ccltune.errors.CcltuneError as exc:
        print(f"{name:<34} raised {type(exc).__name__}: {exc}")
        continue
    print(f"{name:<34} {r.status:<7} {r.exit_code:>4} {r.run_id or '-':>4} {len(r.findings):>8} {time.monotonic() - t:>6.1f}  {what(r)}")
print("runs stored:", [(x.id, x.kind) for x in ccltune.open_db(db).runs()])
PY
  echo "rc=$? phase diagopts wall $(( $(date +%s) - t0 )) s"
}
phase_r38() {  # issue 38 item 8 (2 GPUs, <= 6 min wall): nccl-tests (MPI) vs bench with all_gather to 1 GB, eager and -G; --warmup-mode nccl-tests; check with no profile
  local W=$OUT/r38 t0=$(date +%s); mkdir -p $W; phase_build
  export NCCL_TESTS_DIR=$PWD/.cache/nccl-tests NCCLT_BUILD=$PWD/.cache/nccl-tests/build
  BUILDDIR=$NCCLT_BUILD COLLS="all_reduce all_gather" JOBS=16 bash bench/nccl_tests_build.sh > $W/ncclt-build.log 2>&1; echo "nccl-tests build rc=$?"; tail -2 $W/ncclt-build.log
  step "nccl-tests vs ccltune on $NGPU GPUs, all_gather and all_reduce 8 B-1 GB, eager and -G 10, ABBA x2"
  NPROCS="$NGPU" COLLS="all_gather all_reduce" MODES="eager graph" REPS=2 bash bench/eager_vs_ncclt_mpi.sh $W/cmp > $W/cmp.txt 2>&1
  grep -E "^##|sizes outside|outside" $W/cmp.txt | head -30
  echo "wall so far $(( $(date +%s) - t0 )) s"
  step "--warmup-mode nccl-tests with -G 10 on $NGPU GPUs against nccl-tests -G 10"
  ct 150 bench all_gather all_reduce -b 8 -e 1G -f 4 -G 10 --warmup-mode nccl-tests --nproc $NGPU --db "$DB" --json $W/wm.json > $W/wm.txt 2>&1; tail -5 $W/wm.txt
  local M="mpirun --allow-run-as-root --bind-to none -x NCCL_NVLS_ENABLE -x TORCH_SYMM_MEM_DISABLE_MULTICAST -x NVSHMEM_DISABLE_NVLS"
  timeout 90 $M -np $NGPU $NCCLT_BUILD/all_gather_perf -b 8 -e 1G -f 4 -G 10 > $W/ncclt_ag_G.txt 2>&1
  timeout 90 $M -np $NGPU $NCCLT_BUILD/all_reduce_perf -b 8 -e 1G -f 4 -G 10 > $W/ncclt_ar_G.txt 2>&1
  python3 bench/compare_reference.py $W/wm.json $W/ncclt_ag_G.txt $W/ncclt_ar_G.txt > $W/wm-compare.txt 2>&1; grep -E "^# [0-9]+ of|outside" $W/wm-compare.txt | head -12
  step "check on this node (no built-in profile for it): the gate from the links"
  ct 150 check --db "$DB" --json $W/check.json > $W/check.txt 2>&1; grep -vE "^links:" $W/check.txt | tail -10
  echo "phase r38 wall $(( $(date +%s) - t0 )) s"
  pack
}
REAL_FSDP="--layers 16 --width 2048 --seq 1024 --batch 4"  # issue 39: GPT-style, width 2048, 16 blocks, bf16 params, fp32 reduction
STEPRE='step +[0-9]+ +([0-9.]+) ms'
tj() { echo "torchrun --standalone --nproc-per-node $1 examples/train_transformer.py ${@:2}"; }
inrun() {  # inrun NAME TIMEOUT_S AB_FLAGS... -- JOB...: one ab --in-run into $OUT/inrun/NAME
  local n=$1 t=$2; shift 2; local W=$OUT/inrun/$n; mkdir -p $W
  step "in-run $n"
  timeout -s INT -k 15 $t python3 -m ccltune ab --in-run --db $W/ab.db --json $W/ab.json "$@" > $W/out.txt 2>&1; echo "rc=$? $n"
  grep -vE "^# (arm |source)" $W/out.txt | cut -c1-220 | tail -22
}
phase_r39a() {  # issue 39 on 4 GPUs (<= 9.5 min): in-run arms on a real FSDP2 job (A/A and a planted slowdown in one run), then 20 short runs switching at every block
  local t0=$(date +%s); phase_build; timeout 120 make -C profiler -j8 > $OUT/prof-build.log 2>&1; echo "profiler build rc=$?"
  local R=$OUT/rules; mkdir -p $R
  printf 'reducescatter,0,1T,ring,simple,2,-1,-1\n' > $R/rs2ch.conf      # planted: FSDP2's reduce_scatter on 2 channels
  printf 'allreduce,0,1T,ring,simple,2,-1,-1\n' > $R/ar2ch.conf          # planted for DDP
  inrun smoke 120 --rules $R/ar2ch.conf --metric "$STEPRE" --block-steps 2 --seed 1 -- $(tj $NGPU --mode ddp --layers 4 --width 1024 --seq 256 --steps 250 --warmup 3)
  ls $OUT/inrun/smoke; echo "wall $(( $(date +%s) - t0 )) s"
  inrun fsdp2 240 --rules $R/rs2ch.conf --metric "$STEPRE" --block-steps 4 --seed 39 -- $(tj $NGPU --mode fsdp2 $REAL_FSDP --steps 300 --warmup 5)
  echo "wall $(( $(date +%s) - t0 )) s"
  step "20 runs switching at every block end (block = 2 steps), 10 on GPUs 0,1 and 10 on GPUs 2,3 at once"
  for half in 0 1; do
    ( for i in $(seq 1 10); do
        CUDA_VISIBLE_DEVICES=$((2*half)),$((2*half+1)) MASTER_PORT=$((29600+half)) timeout -s INT -k 10 90 python3 -m ccltune ab --in-run --rules $R/ar2ch.conf --metric "$STEPRE" --block-steps 2 --seed $i \
          --db $OUT/inrun/many$half.db -- torchrun --nproc-per-node 2 --master-port $((29600+half)) examples/train_transformer.py --mode ddp --layers 2 --width 1024 --seq 256 --steps 200 --warmup 2 > $OUT/inrun/many$half.$i.txt 2>&1
        echo "half $half run $i rc=$?"; done ) &
  done; wait
  grep -l "disagree\|Traceback" $OUT/inrun/many*.txt | head; grep -hE "^  default-2|^  ar2ch" $OUT/inrun/many*.txt | cut -c1-160 | head -6
  echo "phase r39a wall $(( $(date +%s) - t0 )) s"; pack
}
phase_r39b() {  # issue 39 on 4 GPUs (<= 9 min): FSDP2 (real shape) in ONE run of <= 3 min: A/A and a planted slowdown; 20 short runs switching every 2 steps
  local t0=$(date +%s); phase_build; timeout 120 make -C profiler -j8 > $OUT/prof-build.log 2>&1; echo "profiler build rc=$?"
  local R=$OUT/rules; mkdir -p $R
  printf 'reducescatter,0,1T,ring,simple,2,-1,-1\n' > $R/rs2ch.conf
  printf 'allreduce,0,1T,ring,simple,2,-1,-1\n' > $R/ar2ch.conf
  inrun fsdp2 200 --rules $R/rs2ch.conf --metric "$STEPRE" --block-steps 4 --seed 39 -- $(tj $NGPU --mode fsdp2 $REAL_FSDP --steps 800 --warmup 5)
  echo "wall $(( $(date +%s) - t0 )) s"
  step "20 runs switching every 2 steps, 10 on GPUs 0,1 and 10 on GPUs 2,3 at once"
  for half in 0 1; do
    ( for i in $(seq 1 10); do
        CUDA_VISIBLE_DEVICES=$((2*half)),$((2*half+1)) timeout -s INT -k 10 60 python3 -m ccltune ab --in-run --rules $R/ar2ch.conf --metric "$STEPRE" --block-steps 2 --seed $i \
          --db $OUT/inrun/many$half.db -- torchrun --nproc-per-node 2 --master-port $((29600+half)) examples/train_transformer.py --mode ddp --layers 2 --width 1024 --seq 256 --steps 400 --warmup 2 > $OUT/inrun/many$half.$i.txt 2>&1
        echo "half $half run $i rc=$? $(grep -cE '^  (default|default-2|ar2ch) ' $OUT/inrun/many$half.$i.txt) verdict lines"; done ) &
  done; wait
  grep -l "disagree\|Traceback\|error" $OUT/inrun/many*.txt | head; grep -hE "^  default-2|^  ar2ch" $OUT/inrun/many*.txt | cut -c1-160 | head -8
  echo "phase r39b wall $(( $(date +%s) - t0 )) s"; pack
}
phase_r39c() {  # 4-GPU machine (<= 9 min): GPUs 0,1: issue 38 item 8 (nccl-tests vs bench, -G --warmup-mode nccl-tests, check without a profile), then search on DDP; GPUs 2,3: DDP in-run vs whole-run ab, one rule arm
  local t0=$(date +%s); phase_build; timeout 120 make -C profiler -j8 > $OUT/prof-build.log 2>&1; echo "profiler build rc=$?"
  local R=$OUT/rules; mkdir -p $R; printf 'allreduce,0,1T,ring,simple,4,-1,-1\n' > $R/ar4ch.conf
  local D2="--mode ddp --layers 4 --width 1024 --seq 256"
  ( export CUDA_VISIBLE_DEVICES=2,3
    W=$OUT/agree; mkdir -p $W
    timeout -s INT -k 10 120 python3 -m ccltune ab --in-run --rules $R/ar4ch.conf --metric "$STEPRE" --block-steps 2 --seed 7 --db $W/inrun.db --json $W/inrun.json \
      -- torchrun --nproc-per-node 2 --master-port 29611 examples/train_transformer.py $D2 --steps 600 --warmup 3 > $W/inrun.txt 2>&1; echo "agree in-run rc=$?"
    timeout -s INT -k 10 330 python3 -m ccltune ab --rules $R/ar4ch.conf --no-aa --rounds 6 --metric "$STEPRE" --seed 7 --db $W/whole.db --json $W/whole.json \
      -- torchrun --nproc-per-node 2 --master-port 29612 examples/train_transformer.py $D2 --steps 200 --warmup 3 > $W/whole.txt 2>&1; echo "agree whole-run rc=$?"
    echo "agree wall $(( $(date +%s) - t0 )) s" ) > $OUT/agree.log 2>&1 &
  ( export CUDA_VISIBLE_DEVICES=0,1 NGPU=2
    phase_r38 > $OUT/r38.log 2>&1
    W=$OUT/search; mkdir -p $W/logs
    NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,COLL NCCL_DEBUG_FILE=$W/logs/nccl.%h.%p.log timeout 90 torchrun --nproc-per-node 2 --master-port 29621 examples/train_transformer.py $D2 --steps 20 --warmup 2 > $W/cap.txt 2>&1
    python3 -m ccltune workload import $W/logs/nccl.*.log --out $W/w.json > $W/import.txt 2>&1; echo "import rc=$?"
    timeout -s INT -k 10 200 python3 -m ccltune search --workload $W/w.json --metric "$STEPRE" --runs 2 --finalists 2 --block-steps 2 --seed 11 --out $W/kept.conf --db $W/search.db \
      -- torchrun --nproc-per-node 2 --master-port 29622 examples/train_transformer.py $D2 --steps 500 --warmup 3 > $W/search.txt 2>&1; echo "search rc=$?"
    echo "search wall $(( $(date +%s) - t0 )) s" ) > $OUT/left.log 2>&1 &
  wait
  cat $OUT/agree.log; grep -E "^  |error" $OUT/agree/*.txt | cut -c1-200
  grep -E "^===|rc=|outside|# [0-9]+ of|PASS|FAIL|wrong" $OUT/r38.log | cut -c1-200 | head -40; cat $OUT/left.log; tail -15 $OUT/search/search.txt | cut -c1-220
  echo "phase r39c wall $(( $(date +%s) - t0 )) s"; pack
}
phase_r39d() {  # 4-GPU machine (<= 3.5 min): GPUs 0,1 nccl-tests (MPI) vs bench, all_gather/all_reduce to 1 GB, eager and -G (issue 38 item 8); GPUs 2,3 search on DDP
  local t0=$(date +%s); phase_build > /dev/null 2>&1; timeout 120 make -C profiler -j8 > $OUT/prof-build.log 2>&1
  local D2="--mode ddp --layers 4 --width 1024 --seq 256"
  ( export CUDA_VISIBLE_DEVICES=2,3
    W=$OUT/search; mkdir -p $W/logs
    NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,COLL NCCL_DEBUG_FILE=$W/logs/nccl.%h.%p.log timeout 60 torchrun --nproc-per-node 2 --master-port 29621 examples/train_transformer.py $D2 --steps 20 --warmup 2 > $W/cap.txt 2>&1
    python3 -m ccltune workload import $W/logs/nccl.*.log --out $W/w.json > $W/import.txt 2>&1; echo "import rc=$?"
    timeout -s INT -k 10 150 python3 -m ccltune search --workload $W/w.json --metric "$STEPRE" --runs 2 --finalists 2 --block-steps 2 --seed 11 --out $W/kept.conf --db $W/search.db \
      -- torchrun --nproc-per-node 2 --master-port 29622 examples/train_transformer.py $D2 --steps 500 --warmup 3 > $W/search.txt 2>&1; echo "search rc=$?"
    echo "search wall $(( $(date +%s) - t0 )) s" ) > $OUT/right.log 2>&1 &
  ( export CUDA_VISIBLE_DEVICES=0,1 NCCL_TESTS_DIR=$PWD/.cache/nccl-tests NCCLT_BUILD=$PWD/.cache/nccl-tests/build; local W=$OUT/ncclt; mkdir -p $W
    BUILDDIR=$NCCLT_BUILD COLLS="all_reduce all_gather" JOBS=16 bash bench/nccl_tests_build.sh > $W/build.log 2>&1; echo "nccl-tests build rc=$?"
    NPROCS=2 COLLS="all_gather all_reduce" MODES="eager graph" REPS=1 bash bench/eager_vs_ncclt_mpi.sh $W/cmp > $W/cmp.txt 2>&1; echo "compare rc=$?"
    echo "ncclt wall $(( $(date +%s) - t0 )) s" ) > $OUT/left.log 2>&1 &
  wait; cat $OUT/left.log $OUT/right.log; grep -E "^##|outside|overlap" $OUT/ncclt/cmp.txt | cut -c1-200 | head -20; grep -E "^# search|ratio|wrote|within" $OUT/search/search.txt | cut -c1-200 | tail -14
  echo "phase r39d wall $(( $(date +%s) - t0 )) s"; pack
}
docloop() {  # docloop MODE BUDGET_S LINE_S JOBARGS...: docs/workload.md's loop, its lines as written (bench/doc_loop.py), on one job
  local m=$1 B=$2 L=$3; shift 3; local W=$OUT/doc$NGPU/$m; mkdir -p $W
  step "docs/workload.md's loop on $m, $NGPU GPU(s), budget ${B} s"
  timeout -k 10 $((B + 40)) python3 bench/doc_loop.py --work $W --budget $B --line-timeout $L \
    --job "torchrun --standalone --nproc-per-node $NGPU $PWD/examples/train_transformer.py --mode $m $*" \
    --capture-args "--steps 20 --warmup 2" --judge-args "--steps ${DL_STEPS:-300} --warmup 3" --whole-args "--steps 30 --warmup 3"
  rm -rf $W/bin; pack
}
phase_loopdoc() {  # docs/workload.md's loop on all GPUs (NGPU_USE to use fewer), one job after another: DL_MODES (default "ddp tp-decode fsdp2"), DL_BUDGET s each (default 170)
  local t0=$(date +%s); phase_build > /dev/null 2>&1; timeout 120 make -C profiler -j8 > $OUT/prof-build.log 2>&1
  local m; for m in ${DL_MODES:-ddp tp-decode fsdp2}; do
    case $m in ddp) docloop ddp ${DL_BUDGET:-170} ${DL_LINE:-150} $DDP;; tp-decode) docloop tp-decode ${DL_BUDGET:-170} ${DL_LINE:-150} $TPD;;
      fsdp2) DL_STEPS=${DL_FSDP_STEPS:-200} docloop fsdp2 ${DL_BUDGET:-170} ${DL_LINE:-150} $REAL_FSDP;; esac
  done; echo "phase loopdoc wall $(( $(date +%s) - t0 )) s"; pack
}
phase_loopdoc2x2() {  # 4-GPU machine: the loop on 2 GPUs twice at once, GPUs 0,1 DL_MODES_A (default "ddp tp-decode"), GPUs 2,3 DL_MODES_B (default fsdp2)
  local t0=$(date +%s); phase_build > /dev/null 2>&1; timeout 120 make -C profiler -j8 > $OUT/prof-build.log 2>&1
  ( export CUDA_VISIBLE_DEVICES=0,1 NGPU=2 DL_MODES="${DL_MODES_A:-ddp tp-decode}"; phase_loopdoc ) > $OUT/pair01.log 2>&1 &
  ( export CUDA_VISIBLE_DEVICES=2,3 NGPU=2 DL_MODES="${DL_MODES_B:-fsdp2}"; phase_loopdoc ) > $OUT/pair23.log 2>&1 &
  wait; grep -vE "^(cc|gcc|make|mkdir|/opt)" $OUT/pair01.log $OUT/pair23.log | cut -c1-230
  echo "phase loopdoc2x2 wall $(( $(date +%s) - t0 )) s"; pack
}
phase_search4() {  # issue 39 on 4 GPUs (<= 9.5 min): ccltune search on the FSDP2 job of the real shape and on the TP decode loop (its step from the workload), each followed by a whole-run ab of what it kept
  local t0=$(date +%s); phase_build > /dev/null 2>&1; timeout 120 make -C profiler -j8 > $OUT/prof-build.log 2>&1
  local m a W; for m in fsdp2 tp-decode; do
    W=$OUT/search4/$m; mkdir -p $W/logs; [ $m = fsdp2 ] && a="$REAL_FSDP" || a="$TPD"
    step "search on $m ($NGPU GPUs)"
    NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,COLL NCCL_DEBUG_FILE=$W/logs/nccl.%h.%p.log timeout 90 $(tj $NGPU --mode $m $a --steps 20 --warmup 2) > $W/cap.txt 2>&1
    python3 -m ccltune workload import $W/logs/nccl.*.log --out $W/w.json > $W/import.txt 2>&1; echo "import rc=$?"
    timeout -s INT -k 10 ${S4_SEARCH:-170} python3 -m ccltune search --workload $W/w.json --metric "$STEPRE" --runs 2 --finalists 2 --block-steps 4 --seed 12 \
      --no-whole-run --out $W/kept.conf --db $W/search.db -- $(tj $NGPU --mode $m $a --steps ${S4_STEPS:-400} --warmup 3) > $W/search.txt 2>&1; echo "search rc=$?"
    grep -E "^# (search|ccltune search|[0-9]+ candidate)|within|kept|wrote|ratio" $W/search.txt | cut -c1-220 | tail -12
    if grep -qvE '^(#|$)' $W/kept.conf 2>/dev/null; then
      timeout -s INT -k 10 ${S4_AB:-100} python3 -m ccltune ab --rules $W/kept.conf --metric "$STEPRE" --seed 12 --db $W/ab.db \
        -- $(tj $NGPU --mode $m $a --steps 60 --warmup 5) > $W/ab.txt 2>&1; echo "whole-run ab rc=$?"; grep -E "^  " $W/ab.txt | cut -c1-200
    fi
    echo "wall $(( $(date +%s) - t0 )) s"
  done; echo "phase search4 wall $(( $(date +%s) - t0 )) s"; pack
}
phase_searchcta() {  # issue 39 (2 GPUs: CUDA_VISIBLE_DEVICES=0,1 NGPU_USE=2 on a bigger machine): search on DDP with its whole-run arms (NCCL_CTA_POLICY=1/2, NCCL_MAX_CTAS=8/16 on NCCL 2.28; 8 rounds of 6 arms: 48 runs of ~12 s, near the 10-minute limit; SC_ROUNDS to change), a short job
  local t0=$(date +%s); phase_build > /dev/null 2>&1; timeout 120 make -C profiler -j8 > $OUT/prof-build.log 2>&1
  local W=$OUT/searchcta D2="--mode ddp --layers 4 --width 1024 --seq 256"; mkdir -p $W/logs
  NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,COLL NCCL_DEBUG_FILE=$W/logs/nccl.%h.%p.log timeout 60 $(tj $NGPU $D2 --steps 20 --warmup 2) > $W/cap.txt 2>&1
  python3 -m ccltune workload import $W/logs/nccl.*.log --out $W/w.json > $W/import.txt 2>&1; echo "import rc=$?"
  timeout -s INT -k 10 ${SC_S:-540} python3 -m ccltune search --workload $W/w.json --metric "$STEPRE" --runs 1 --finalists 2 --block-steps 2 --seed 13 \
    ${SC_ROUNDS:+--whole-run-rounds $SC_ROUNDS} --out $W/kept.conf --db $W/search.db -- $(tj $NGPU $D2 --steps 300 --warmup 3) > $W/search.txt 2>&1; echo "search rc=$?"
  grep -vE "^# arm " $W/search.txt | cut -c1-220 | tail -24; echo "phase searchcta wall $(( $(date +%s) - t0 )) s"; pack
}
phase_switch20() {  # issue 39 on a 4-GPU machine (<= 9.5 min): 20 runs of the FSDP2 job of the real shape switching every 2 steps, 10 on GPUs 0,1 and 10 on GPUs 2,3 at once
  local t0=$(date +%s); phase_build > /dev/null 2>&1; timeout 120 make -C profiler -j8 > $OUT/prof-build.log 2>&1
  local R=$OUT/rules; mkdir -p $R $OUT/inrun; printf 'reducescatter,0,1T,ring,simple,2,-1,-1\n' > $R/rs2ch.conf
  for half in 0 1; do
    ( for i in $(seq 1 10); do
        CUDA_VISIBLE_DEVICES=$((2*half)),$((2*half+1)) timeout -s INT -k 10 ${SW_RUN:-50} python3 -m ccltune ab --in-run --rules $R/rs2ch.conf --metric "$STEPRE" --block-steps 2 --seed $i \
          --db $OUT/inrun/fsdp$half.db -- torchrun --nproc-per-node 2 --master-port $((29700+half)) examples/train_transformer.py --mode fsdp2 $REAL_FSDP --steps ${SW_STEPS:-150} --warmup 3 > $OUT/inrun/fsdp$half.$i.txt 2>&1
        echo "half $half run $i rc=$? $(grep -cE '^  (default|default-2|rs2ch) ' $OUT/inrun/fsdp$half.$i.txt) verdict lines"; done ) &
  done; wait
  grep -l "disagree\|Traceback" $OUT/inrun/fsdp*.txt | head; grep -hE "^  default-2|^  rs2ch" $OUT/inrun/fsdp*.txt | cut -c1-160 | head -8
  echo "phase switch20 wall $(( $(date +%s) - t0 )) s"; pack
}
phase_doc1b() {  # 1 GPU (<= 5 min): the 4-GPU phases' scripts on one GPU (loopdoc's FSDP2 branch, search4's refusal), ab --in-run on a one-rank job
  local t0=$(date +%s); phase_build > /dev/null 2>&1; timeout 120 make -C profiler -j8 > $OUT/prof-build.log 2>&1
  DL_MODES=fsdp2 DL_BUDGET=110 DL_LINE=40 DL_FSDP_STEPS=60 phase_loopdoc 2>&1 | tail -16
  S4_SEARCH=40 S4_STEPS=60 phase_search4 2>&1 | grep -vE "^(cc|gcc|make|mkdir)" | tail -12; cat $OUT/search4/*/search.txt | cut -c1-250 | tail -6
  local R=$OUT/rules; mkdir -p $R; printf 'allreduce,0,1T,ring,simple,2,-1,-1\n' > $R/ar2ch.conf
  inrun onerank 90 --rules $R/ar2ch.conf --metric "$STEPRE" --block-steps 2 --seed 1 -- $(tj 1 --mode ddp --layers 2 --width 1024 --seq 256 --steps 60 --warmup 2)
  echo "phase doc1b wall $(( $(date +%s) - t0 )) s"; pack
}
phase_doc1() {  # 1 GPU (<= 9.5 min): the GPU tests that mean something on one GPU, then docs/workload.md's loop on the three jobs
  local t0=$(date +%s); phase_build; timeout 120 make -C profiler -j8 > $OUT/prof-build.log 2>&1; echo "profiler build rc=$?"
  step "pytest -m gpu tests/gpu on $NGPU GPU(s)"
  timeout 170 python3 -m pytest -m gpu tests/gpu -q -p no:cacheprovider -rs > "$OUT/gpu-tests.txt" 2>&1; echo "gpu tests rc=$?"; tail -6 "$OUT/gpu-tests.txt"
  echo "wall $(( $(date +%s) - t0 )) s"
  docloop ddp 160 45 --layers 2 --width 1024 --seq 256; docloop tp-decode 160 45 $TPD
  echo "phase doc1 wall $(( $(date +%s) - t0 )) s"; pack
}
for p in "$@"; do "phase_$p"; done
pack
