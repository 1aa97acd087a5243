#!/usr/bin/env bash
# One entry point for the GPU machine (the device tool runs it from the repo root).
# Usage: scripts/device.sh PHASE...   (phases below; results and logs go to $OUT)
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
OUT=${OUT:-/tmp/ccltune-out}; mkdir -p "$OUT"
DB="$OUT/ccltune.db"
NGPU=$(nvidia-smi -L 2>/dev/null | wc -l)
step() { echo; echo "=== $* ($(date +%T))"; }
run() { local t=$1; shift; local s=$(date +%s%N); timeout -k 5 "$t" "$@"; local rc=$?; echo "--- rc=$rc wall=$(( ($(date +%s%N) - s) / 1000000 ))ms: $*"; return 0; }
ct() { run "$1" python3 -m ccltune "${@:2}"; }

phase_info() {
  step info
  nvidia-smi -L; nvidia-smi topo -m 2>&1 | head -12
  python3 -c "import torch; print('torch', torch.__version__, 'gpus', torch.cuda.device_count(), 'nccl', torch.cuda.nccl.version())"
}
phase_build() {
  step build plugin
  if [ -f plugin/Makefile ]; then make -C plugin -j8 >"$OUT/plugin-build.log" 2>&1; echo "plugin build rc=$?"; tail -3 "$OUT/plugin-build.log"; fi
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
for p in "$@"; do "phase_$p"; done
cp -f "$DB" "$OUT/" 2>/dev/null || true
