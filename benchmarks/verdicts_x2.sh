#!/usr/bin/env bash
# Issue 31's GPU check on a two-GPU machine (device kind nvidia-h100-x2) in the time of one sweep: the verdicts suite
# swept twice at once, one sweep per GPU, each pinned to half the host's cores and with its own compiler caches (both
# start cold, as two sweeps on two fresh machines would), into two stores; then `mlcbench compare` of the two. The
# two sweeps differ in GPU as well as in time: a cell that differs between them is noise a reader would also meet.
# Each call stops both sweeps as Ctrl-C does after SWEEP_TIMEOUT_S and the same command resumes them (the stores and
# caches live under /root while the machine is held; a fresh one is seeded from SEED_DIR, a folder holding
# <gpu>-verdicts-1.db and -2.db carried back from an earlier bundle).
#
#   MLCBENCH_GIT_REV=<git rev-parse --short=12 HEAD> SWEEP_TIMEOUT_S=540 bash benchmarks/verdicts_x2.sh h100
#   (repeated until both sweeps print exit 0; the last call also writes verdicts-compare.txt into the bundle)
# Sweep options after the GPU tag narrow both sweeps alike, e.g. the FFN cells alone (about 8 minutes):
#   ... bash benchmarks/verdicts_x2.sh h100 --model ffn-tinyllama,ffn-llama2,ffn-multilayer-tinyllama
# $OUT takes at most 8 files back: everything comes back as one $OUT/verdicts.tar.gz (both stores, their CSVs, logs,
# machine and times files, the compare and a report).
set -uo pipefail
gpu=${1:?usage: verdicts_x2.sh GPU_TAG [sweep options]}
shift
half=$(( $(nproc) / 2 ))
. benchmarks/device_env.sh  # installs the carried wheels once, before the two sweeps start
bundle=/root/verdicts-out
for side in 1 2; do
    name=$gpu-verdicts-$side
    [ -n "${SEED_DIR:-}" ] && [ -f "$SEED_DIR/$name.db" ] && SEED_DB=$SEED_DIR/$name.db || SEED_DB=
    cores=$(( (side - 1) * half ))-$(( side * half - 1 ))
    mkdir -p "$bundle/$side"
    OUT=$bundle/$side SEED_DB=$SEED_DB CACHE_DIR=/root/cache-$side taskset -c "$cores" \
        bash benchmarks/device_sweep.sh "$name" "$gpu" benchmarks/suites/verdicts.toml --gpus $(( side - 1 )) "$@" \
        >"/root/$name.log" 2>&1 &
done
wait
for side in 1 2; do tail -15 "/root/$gpu-verdicts-$side.log"; cp "/root/$gpu-verdicts-$side.log" "$bundle/$side/"; done
if grep -q "exit 0," "/root/$gpu-verdicts-1-times.txt" && grep -q "exit 0," "/root/$gpu-verdicts-2-times.txt"; then
    mlcbench compare --db "sqlite:////root/$gpu-verdicts-1.db" --against "sqlite:////root/$gpu-verdicts-2.db" \
        | tee "$bundle/verdicts-compare.txt"
    mlcbench report --db "sqlite:////root/$gpu-verdicts-1.db" --markdown "$bundle/$gpu-verdicts-1.md" >/dev/null
fi
tar -C "$bundle" -czf "$OUT/verdicts.tar.gz" .
