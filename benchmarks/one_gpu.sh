#!/usr/bin/env bash
# The one-GPU study (issue 62) on a GPU machine of the `device` tool, run in the background and followed call after
# call: the first call starts benchmarks/one_gpu_run.sh (setsid: it outlives the call while the machine stays warm),
# every call then follows it for up to FOLLOW_S seconds and leaves its stores, logs and the machine's description in
# $OUT/one-gpu.tar. A machine given back takes the run with it: the next session resumes from the committed store.
#
#   MLCBENCH_GIT_REV=$(git rev-parse --short=12 HEAD) STEPS="bias paper" GROUPS_="..." bash benchmarks/one_gpu.sh
#
# STEPS (in order): bias (the same cells alone and with --overlap, into bias-alone.db / bias-overlap.db, then
# `mlcbench compare`), paper (the `paper` suite's comparison groups named by PAPER_FILTERS, one sweep per line, into
# paper-h100.db, resumed from the committed store where carried).
set -uo pipefail
study=/root/study
mkdir -p "$study"
if [ ! -f "$study/started" ]; then
    . benchmarks/device_env.sh
    { date -u; nvidia-smi --query-gpu=index,name,uuid,driver_version,clocks.max.sm,power.limit,memory.total \
        --format=csv,noheader; lscpu | grep -E "Model name|^CPU\(s\)"; nproc; free -g | head -2
      python3 -c "import sys, torch, transformers, triton, jax; print('python', sys.version.split()[0], 'torch',
torch.__version__, 'transformers', transformers.__version__, 'triton', triton.__version__, 'jax', jax.__version__)"
      python3 -c "import onnxruntime as o; print('onnxruntime', o.__version__, o.get_available_providers())"
      python3 -c "import torchax; print('torchax', torchax.__version__)"; } > "$study/machine.txt" 2>&1
    [ -f benchmarks/studies/paper-h100/store.db ] && [ ! -f "$study/paper-h100.db" ] && \
        cp benchmarks/studies/paper-h100/store.db "$study/paper-h100.db"
    touch "$study/started"
    setsid nohup bash benchmarks/one_gpu_run.sh > "$study/run.log" 2>&1 < /dev/null &
fi
deadline=$((SECONDS + ${FOLLOW_S:-540}))
while [ $SECONDS -lt $deadline ] && [ ! -f "$study/finished" ]; do sleep 5; done
for db in "$study"/*.db; do  # a consistent copy of each store, taken while a sweep may be writing it
    python3 -c "import sqlite3, sys; s = sqlite3.connect(sys.argv[1]); d = sqlite3.connect(sys.argv[2]); s.backup(d)" \
        "$db" "$study/copy-$(basename "$db")"
done
tail -3 "$study/run.log"
tar -C /root -cf "$OUT/one-gpu.tar" --exclude 'study/cache*' --exclude 'study/work*' --exclude 'study/paper-h100.db' \
    --exclude 'study/bias-*.db' study
rm -f "$study"/copy-*.db
[ -f "$study/finished" ] && echo "run finished" || echo "run still going"
