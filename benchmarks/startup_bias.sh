#!/usr/bin/env bash
# The start-up bias check: benchmarks/suites/startup-bias.toml swept one round at a time, a round without the start-up
# shortcuts (each process a new interpreter that computes its own eager reference) and a round with them (forked from
# a pre-imported interpreter, eager's reference read from the cache) in turn, so that drift hits both stores alike,
# each with its own compiler cache; then the two compared. On every GPU of the host (--gpus all: the suite's GPU
# models), or on the CPU (GPU_TAG cpu: its CPU models); SUITE names another suite, swept whole.
#   [ROUNDS=5] [SUITE=...] bash benchmarks/startup_bias.sh GPU_TAG FOLDER
set -uo pipefail
gpu=${1:?GPU tag} folder=${2:?output folder}
mkdir -p "$folder"
if [ "$gpu" = cpu ]; then gpus=() models=ffn-small,llama-2layer
else gpus=(--gpus all) models=ffn-tinyllama,tinyllama-1.1b; fi
if [ -n "${SUITE:-}" ]; then suite=$SUITE only=()
else suite=benchmarks/suites/startup-bias.toml only=(--model "$models"); fi
mlcbench() { python3 -m mlcbench.orchestrator "$@"; }
for round in $(seq "${ROUNDS:-5}"); do
    for path in exec fork; do
        MLCBENCH_REFERENCE_CACHE=$([ $path = exec ] && echo 0 || echo 1) mlcbench sweep --env local --gpu "$gpu" "${gpus[@]}" --suite "$suite" "${only[@]}" \
            --rounds 1 \
            --startup "$path" --db "sqlite:///$folder/$path.db" --cache-dir "$folder/cache-$path" \
            --workdir "$folder/work-$path" 2>&1 | grep -v "━" | tail -3
    done
done
mlcbench compare --db "sqlite:///$folder/exec.db" --against "sqlite:///$folder/fork.db" --gpu "$gpu" 2>&1 | tee "$folder/compare.txt"
