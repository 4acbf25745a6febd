#!/usr/bin/env bash
# gpt-fast's own decode loop (pytorch-labs/gpt-fast) on issue 32's cells, for the side-by-side with
# torch_compile_decode on the same machine: each MODEL:BATCH cell in a fresh process (benchmarks/gptfast_peer.py) with
# an Inductor cache of its own, so every first call is a cold compile. gpt-fast is never copied into mlcbench: `fill`,
# run here, unpacks the mirror's HEAD into the git-ignored .peer/gpt-fast, and the device call carries .peer.
#
#   bash benchmarks/gptfast_peer.sh fill                                   # here, once
#   bash benchmarks/gptfast_peer.sh [--greedy] [runner options] [MODEL:BATCH ...]   # on the GPU machine
#
# Default cells: tinyllama-1.1b:1 tinyllama-1.1b:64 llama2-7b:1 llama2-7b:64 (cheapest first; dtypes from mlcbench's
# catalog: bf16, fp16). The device allows 10 minutes a command: a cell starts only if its estimated seconds fit in
# BUDGET_S (default 570) and runs under a timeout of what is left; the cells not started or failed are printed as the
# next command (runner options as --name=value: a word without a leading dash is a cell).
# $OUT receives gptfast-peer.jsonl (one line per cell), gptfast-peer-machine.txt, gptfast-peer-times.txt and
# gptfast-peer.log (the runs' stderr).
set -uo pipefail
if [ "${1:-}" = fill ]; then
    mirror=${GPTFAST_MIRROR:-/work/.mirror/pytorch-labs+gpt-fast/repo}
    rm -rf .peer/gpt-fast && mkdir -p .peer/gpt-fast
    git -C "$mirror" archive HEAD | tar -x -C .peer/gpt-fast
    git -C "$mirror" rev-parse HEAD >.peer/gpt-fast/COMMIT
    echo "gpt-fast $(cat .peer/gpt-fast/COMMIT) in .peer/gpt-fast"
    exit
fi
[ -f .peer/gpt-fast/generate.py ] || { echo ".peer/gpt-fast is missing: run 'bash benchmarks/gptfast_peer.sh fill' here and carry .peer"; exit 2; }
out=${OUT:?OUT is the folder the device call brings back}
runner_options=() cells=()
for arg in "$@"; do
    if [[ $arg == -* ]]; then runner_options+=("$arg"); else cells+=("$arg"); fi
done
[ ${#cells[@]} -eq 0 ] && cells=(tinyllama-1.1b:1 tinyllama-1.1b:64 llama2-7b:1 llama2-7b:64)
# seconds a cell takes with its cold compile: b64 measured on the H100 on 2026-11-26 (TinyLlama 64 s, Llama-2 72-87 s)
declare -A estimate_s=([tinyllama-1.1b]=90 [llama2-7b]=120 [llama-2layer]=60)
budget=${BUDGET_S:-570}
export PYTHONUNBUFFERED=1
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader
  lscpu | grep "Model name"; nproc
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
  echo "gpt-fast $(cat .peer/gpt-fast/COMMIT)"
} | tee "$out/gptfast-peer-machine.txt"
left_over=() out_of_time=
for cell in "${cells[@]}"; do
    IFS=: read -r model batch <<<"$cell"
    left=$((budget - SECONDS))
    # cells keep their order: once one does not fit, the rest wait for the next call too
    if [ -n "$out_of_time" ] || (( ${estimate_s[$model]:-240} > left )); then
        out_of_time=1 left_over+=("$cell")
        continue
    fi
    start=$SECONDS
    TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) timeout "$left" python3 benchmarks/gptfast_peer.py --model "$model" \
        --batch-size "$batch" "${runner_options[@]}" --jsonl "$out/gptfast-peer.jsonl" 2>>"$out/gptfast-peer.log"
    code=$?
    (( code != 0 )) && left_over+=("$cell")
    echo "$(date -u +%FT%TZ) $cell ${runner_options[*]}: exit $code, $((SECONDS - start)) s" | tee -a "$out/gptfast-peer-times.txt"
done
if (( ${#left_over[@]} > 0 )); then
    echo "not done in this call (${SECONDS}s spent): bash benchmarks/gptfast_peer.sh ${runner_options[*]} ${left_over[*]}" \
        | tee -a "$out/gptfast-peer-times.txt"
fi
