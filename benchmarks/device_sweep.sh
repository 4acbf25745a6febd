#!/usr/bin/env bash
# One suite on the GPU machine (the `device` tool, `--env local`) into a store that outlives the call: the device
# allows 10 minutes a command, so the sweep is stopped as Ctrl-C stops it (every cell measured so far is kept) after
# SWEEP_TIMEOUT_S (default 420 s: Ctrl-C waits for the job in flight, and a cold Llama-2 whole-step compile takes up to
# 190 s) and resumed by the same command. The times file gets the sweep's own exit code: 0 once every cell is stored
# (also when the stop came during the last job), 130 where cells are left. The store and the compiler caches live
# under /root, which a machine kept warm between calls still holds; a fresh machine starts from SEED_DB when given
# (a store carried back). Each call leaves the store, its CSV export and the machine's description in $OUT.
#
#   SEED_DB=.devrun/h200-crossgen.db bash benchmarks/device_sweep.sh h200-crossgen h200 crossgen [sweep options]
#
# CACHE_DIR (default /root/cache) holds the compiler caches: two sweeps run side by side give each its own.
#
# The copy on the GPU machine has no .git: give the code revision every row carries, as it is here:
#   MLCBENCH_GIT_REV=<git rev-parse --short=12 HEAD, run here> bash benchmarks/device_sweep.sh ...
set -uo pipefail
name=${1:?usage: device_sweep.sh NAME GPU_TAG SUITE [sweep options]} gpu=${2:?GPU tag} suite=${3:?suite}
shift 3
. benchmarks/device_env.sh
export MLCBENCH_ENVS_DIR=$PWD/envs PYTHONUNBUFFERED=1
store=/root/$name.db
if [ ! -f "$store" ] && [ -n "${SEED_DB:-}" ]; then cp "$SEED_DB" "$store"; fi
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader
  lscpu | grep "Model name"; nproc
  python3 -c "import torch, transformers, triton; print('torch', torch.__version__, 'transformers', transformers.__version__, 'triton', triton.__version__)"
} | tee -a "/root/$name-machine.txt"
start=$SECONDS
timeout --preserve-status -s INT "${SWEEP_TIMEOUT_S:-420}" python3 -m mlcbench.orchestrator sweep --env local --gpu "$gpu" --suite "$suite" \
    --db "sqlite:///$store" --cache-dir "${CACHE_DIR:-/root/cache}" "$@" 2>&1 | grep -v "━" | tail -40
echo "$(date -u +%FT%TZ) sweep $suite $*: exit ${PIPESTATUS[0]}, $((SECONDS - start)) s" | tee -a "/root/$name-times.txt"
python3 -m mlcbench.orchestrator export --db "sqlite:///$store" --format csv --out "$OUT/$name.csv"
cp "$store" "/root/$name-machine.txt" "/root/$name-times.txt" "$OUT/"
