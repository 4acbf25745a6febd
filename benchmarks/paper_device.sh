#!/usr/bin/env bash
# The `paper` suite on every GPU of a GPU machine (the `device` tool, `--env local`), resumed call after call: each
# call sweeps until SWEEP_TIMEOUT_S, then stops as Ctrl-C stops a sweep (every finished process is kept), and the
# next call's same command resumes it from the store under /root (which a machine held warm between calls keeps).
# STEP=first also describes the machine before the sweep. Each call leaves the store, the sweep's log and the
# machine's description in $OUT/paper-call.tar.
#
#   MLCBENCH_GIT_REV=$(git rev-parse --short=12 HEAD) STEP=first SWEEP_TIMEOUT_S=300 bash benchmarks/paper_device.sh \
#       [sweep options, e.g. --model matmul-tinyllama,...]
set -uo pipefail
. benchmarks/device_env.sh
export MLCBENCH_ENVS_DIR=$PWD/envs PYTHONUNBUFFERED=1
store=/root/paper.db gpu=${GPU_TAG:-$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -o 'H[12]00' | tr H h)}
mkdir -p /root/paper
if [ "${STEP:-}" = first ]; then
    { date -u; nvidia-smi --query-gpu=index,name,uuid,driver_version,clocks.max.sm,power.limit --format=csv,noheader
      lscpu | grep -E "Model name|^CPU\(s\)|Thread|Core|Socket|NUMA node[0-9]"; nproc; free -g | head -2
      python3 -c "import sys, torch, transformers, triton, jax; print('python', sys.version.split()[0], 'torch', torch.__version__, 'transformers', transformers.__version__, 'triton', triton.__version__, 'jax', jax.__version__)"
    } > /root/paper/machine.txt 2>&1
fi
start=$SECONDS
timeout --preserve-status -s INT "${SWEEP_TIMEOUT_S:-540}" python3 -m mlcbench.orchestrator sweep --env local \
    --gpu "$gpu" --gpus all --suite paper --startup fork --db "sqlite:///$store" --cache-dir /root/cache \
    --workdir /root/work "$@" 2>&1 | grep -v "━" >> /root/paper/sweep.log
echo "$(date -u +%FT%TZ) sweep paper $*: exit ${PIPESTATUS[0]}, $((SECONDS - start)) s" | tee -a /root/paper/times.txt
tail -5 /root/paper/sweep.log
cp "$store" /root/paper/paper.db
tar -C /root -cf "$OUT/paper-call.tar" paper
