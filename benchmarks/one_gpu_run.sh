#!/usr/bin/env bash
# What benchmarks/one_gpu.sh starts in the background on the GPU machine: STEPS in order, each sweep's log beside its
# store under /root/study, then the file `finished`.
set -uo pipefail
. benchmarks/device_env.sh
study=/root/study
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
