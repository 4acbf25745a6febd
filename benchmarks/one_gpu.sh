#!/usr/bin/env bash
# The one-GPU study (issue 62) on a GPU machine of the `device` tool, run in the background and followed call after
# call: the first call starts its STEP=run (setsid: it outlives the call while the machine stays warm),
# every call then follows it for up to FOLLOW_S seconds and leaves its stores, logs and the machine's description in
# $OUT/one-gpu.tar. A machine given back takes the run with it: the next session resumes from the committed store.
#
#   MLCBENCH_GIT_REV=$(git rev-parse --short=12 HEAD) STEPS="bias paper" GROUPS_="..." bash benchmarks/one_gpu.sh
#
# STEPS (in order): bias (the same cells alone and with --overlap, into bias-alone.db / bias-overlap.db, then
# `mlcbench compare`; bias-overlap: the overlapped half only), paper (the `paper` suite's comparison groups named by PAPER_FILTERS, one sweep per line, into
# paper-h100.db, resumed from the committed store where carried). STEP=run is the background run itself.
set -uo pipefail
study=/root/study
mkdir -p "$study"
if [ "${STEP:-}" = run ]; then
    . benchmarks/device_env.sh
    gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -o 'H[12]00' | tr H h)
    overlap=${OVERLAP:-3}
    sweep() {  # NAME [sweep options]: one sweep into $study/NAME.db, its caches and work folder its own
        local name=$1; shift
        echo "$(date -u +%FT%TZ) start $name $*" >> "$study/times.txt"
        local begin=$SECONDS
        python3 -m mlcbench.orchestrator sweep --env local --gpu "$gpu" --startup fork \
            --db "sqlite:///$study/$name.db" --cache-dir "$study/cache-$name" --workdir "$study/work-$name" "$@" 2>&1 \
            | grep -v "━" >> "$study/$name.log"
        echo "$(date -u +%FT%TZ) end $name: exit ${PIPESTATUS[0]}, $((SECONDS - begin)) s" >> "$study/times.txt"
    }
    for step in ${STEPS:-bias paper}; do
        case $step in
        bias-overlap)  # the overlapped half alone: the gate, the windows and their figures on a GPU
            sweep bias-overlap --suite benchmarks/suites/overlap-bias.toml --overlap "$overlap"
            ;;
        bias)
            sweep bias-alone --suite benchmarks/suites/overlap-bias.toml
            sweep bias-overlap --suite benchmarks/suites/overlap-bias.toml --overlap "$overlap"
            python3 -m mlcbench.orchestrator compare --db "sqlite:///$study/bias-alone.db" \
                --against "sqlite:///$study/bias-overlap.db" > "$study/bias-compare.txt" 2>&1
            ;;
        paper)
            while IFS= read -r filters; do
                [ -n "$filters" ] || continue
                # shellcheck disable=SC2086
                sweep paper-h100 --suite paper $filters --overlap "$overlap"
            done <<< "${PAPER_FILTERS:---model tinyllama-1.1b}"
            ;;
        esac
    done
    touch "$study/finished"
    exit
fi
if [ ! -f "$study/started" ]; then
    . benchmarks/device_env.sh
    { date -u; nvidia-smi --query-gpu=index,name,uuid,driver_version,clocks.max.sm,power.limit,memory.total \
        --format=csv,noheader; lscpu | grep -E "Model name|^CPU\(s\)"; nproc; free -g | head -2
      python3 -c "import sys, torch, transformers, triton, jax; print('python', sys.version.split()[0], 'torch',
torch.__version__, 'transformers', transformers.__version__, 'triton', triton.__version__, 'jax', jax.__version__)"
      python3 -c "import onnxruntime as o; print('onnxruntime', o.__version__, o.get_available_providers())"
      python3 -c "import torchax; print('torchax', torchax.__version__)"; } > "$study/machine.txt" 2>&1
    committed=benchmarks/studies
    [ -f "$committed/paper-h100/store.db" ] && [ ! -f "$study/paper-h100.db" ] && \
        cp "$committed/paper-h100/store.db" "$study/paper-h100.db"
    touch "$study/started"
    STEP=run setsid nohup bash benchmarks/one_gpu.sh > "$study/run.log" 2>&1 < /dev/null &
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
