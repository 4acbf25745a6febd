#!/usr/bin/env bash
# torch_compile_decode's ablation on the GPU machine (issue 32): each MODEL:BATCH step sweeps the suite's variants of
# that cell (SUITE, default benchmarks/suites/decode-ablation.toml: base (fused_projections=false) -> +fused (the
# default) -> +PDL -> +Triton GEMV (b1), and Llama-2 b64 with max-autotune; benchmarks/suites/decode-kernels.toml: +PDL
# against mlcbench's Triton kernels), then profiles every variant the suite gives that cell
# (benchmarks/decode_profile.py: kernels per step, time per kernel class, bytes per step against the copy bound). STEPS
# (default all four, cheapest first) picks MODEL:BATCH:SWEEP_S:PROFILE_S steps (PROFILE_S: one variant's). The device
# allows 10 minutes a command: each step starts only if its estimated seconds still fit in BUDGET_S (default 570), a
# sweep still running at the budget is stopped as Ctrl-C stops it (the cells measured so far are kept; a step that
# ignores Ctrl-C for 30 s is killed), and the same command resumes; give the device call BUDGET_S + 60 s. The store and
# the profiles live in /root/decode-ablation (a machine kept warm between calls still holds it, and the compiler caches
# in /root/cache); a fresh machine starts from SEED_DIR (a folder holding the decode-ablation.tar.gz an earlier call
# brought back) when given. Each step packs the store, its CSV export, the profiles and the machine's description into
# $OUT/decode-ablation.tar.gz, one file, since a device call brings back at most 8 (a call that outlives its limit still
# brings back the last).
#
#   MLCBENCH_GIT_REV=<git rev-parse --short=12 HEAD, run here> [SEED_DIR=.ablation] [SUITE=...] [STEPS=...] \
#       bash benchmarks/decode_ablation.sh h100
#
# Estimates: a step's sweep is its variants' cold compiles (Llama-2 b1 110-150 s each on the H100, 2026-11-26) and
# their timed calls, plus a warm process for each further process the suite asks for; its profiles load each variant
# from the sweep's caches (decode_profile.py --cache-dir), one process a variant, into profile-MODEL-bBATCH-N.json.
set -uo pipefail
gpu=${1:?usage: decode_ablation.sh GPU_TAG}
. benchmarks/device_env.sh
export MLCBENCH_ENVS_DIR=$PWD/envs PYTHONUNBUFFERED=1
state=/root/decode-ablation
mkdir -p "$state"
if [ ! -f "$state/ablation.db" ] && [ -n "${SEED_DIR:-}" ]; then tar -xzf "$SEED_DIR/decode-ablation.tar.gz" -C "$state"; fi
budget=${BUDGET_S:-570}
pack() { tar -czf "$OUT/decode-ablation.tar.gz" -C "$state" .; }
suite=${SUITE:-benchmarks/suites/decode-ablation.toml}
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader
  lscpu | grep "Model name"; nproc
  python3 -c "import torch, transformers, triton; print('torch', torch.__version__, 'transformers', transformers.__version__, 'triton', triton.__version__)"
} | tee -a "$state/machine.txt"
# MODEL:BATCH:SWEEP_S:PROFILE_S, cheapest first
for step in ${STEPS:-tinyllama-1.1b:1:300:60 tinyllama-1.1b:64:330:60 llama2-7b:1:560:90 llama2-7b:64:560:90}; do
    IFS=: read -r model batch sweep_s profile_s <<<"$step"
    # the suite's variants of this cell, each as decode_profile.py's --options
    mapfile -t variants < <(python3 -c '
import json, sys, tomllib
suite, model, batch = sys.argv[1], sys.argv[2], int(sys.argv[3])
for entry in tomllib.load(open(suite, "rb"))["entries"]:
    if model in entry["models"] and batch in entry["batch_sizes"]:
        print("--options"); print(json.dumps(entry.get("options", {})))
' "$suite" "$model" "$batch")
    finished=$state/finished-$model-b$batch
    [ -f "$finished" ] && continue
    left=$((budget - SECONDS))
    if (( left < 60 )); then echo "stopped before $model b$batch: ${SECONDS}s spent" | tee -a "$state/times.txt"; break; fi
    (( sweep_s > left )) && echo "$model b$batch: ~${sweep_s}s of cold compiles, ${left}s left: stopping at the budget, resume with the same command"
    start=$SECONDS
    timeout --preserve-status -k 30 -s INT "$left" python3 -m mlcbench.orchestrator sweep --env local --gpu "$gpu" \
        --suite "$suite" --model "$model" --batch-size "$batch" \
        --db "sqlite:///$state/ablation.db" --cache-dir /root/cache 2>&1 | grep -v "━" | tail -12
    code=${PIPESTATUS[0]}
    echo "$(date -u +%FT%TZ) sweep $model b$batch: exit $code, $((SECONDS - start)) s" | tee -a "$state/times.txt"
    pack  # each step's store and times come back even if a later step outlives the call
    # 3: a cell failed (stored, tried again on resume): its variant's profile says more; 130: stopped at the budget
    if (( code != 0 && code != 3 )); then break; fi
    # each variant in a process of its own, loading what the sweep compiled (its warm processes' start)
    for ((index = 0; index < ${#variants[@]}; index += 2)); do
        part=$state/profile-$model-b$batch-$((index / 2)).json
        [ -f "$part" ] && continue
        if (( SECONDS + profile_s > budget )); then echo "profile $model b$batch: ~${profile_s}s, not in this call"; break 2; fi
        start=$SECONDS
        timeout -k 30 -s INT $((budget - SECONDS)) python3 benchmarks/decode_profile.py --model "$model" \
            --batch-size "$batch" "${variants[@]:index:2}" --cache-dir /root/cache/local --json "$part.part" 2>&1 \
            | tail -25 && mv "$part.part" "$part"
        echo "$(date -u +%FT%TZ) profile $model b$batch ${variants[index + 1]}: $((SECONDS - start)) s" | tee -a "$state/times.txt"
    done
    touch "$finished"
done
python3 -m mlcbench.orchestrator export --db "sqlite:///$state/ablation.db" --format csv --out "$state/ablation.csv"
pack
echo "done at ${SECONDS}s"
