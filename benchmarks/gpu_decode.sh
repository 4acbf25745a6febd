#!/usr/bin/env bash
# The compiled-decode run on a GPU machine (issue 16): the `decode` suite (eager, torch_compile_static and
# torch_compile_decode) one model and batch size at a time into $OUT/<name>.db, each step started only if its
# estimated seconds still fit in the call (BUDGET_S, default 585 s of a 600-s call), then a profile of one decode step.
#   bash benchmarks/gpu_decode.sh NAME GPU_TAG MODEL:BATCH:EST_S ... [profile:MODEL:BATCH:EST_S]
set -uo pipefail
name=$1 gpu=$2
shift 2
. benchmarks/device_env.sh
export MLCBENCH_ENVS_DIR=$PWD/envs PYTHONUNBUFFERED=1
db=sqlite:///$OUT/$name.db
budget=${BUDGET_S:-585}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader | tee $OUT/$name-machine.txt
lscpu | grep "Model name" | tee -a $OUT/$name-machine.txt
python3 -c "import torch, transformers, triton; print('torch', torch.__version__, 'transformers', transformers.__version__, 'triton', triton.__version__)" | tee -a $OUT/$name-machine.txt
for step in "$@"; do
    IFS=: read -r kind model batch estimate <<<"$step"
    if [ "$kind" != profile ]; then estimate=$batch batch=$model model=$kind; fi
    if (( SECONDS + estimate > budget )); then
        echo "skipped $step: ${SECONDS}s spent, ~${estimate}s more would pass the ${budget}s budget" | tee -a $OUT/$name.log
        continue
    fi
    echo "== $step at ${SECONDS}s" | tee -a $OUT/$name.log
    if [ "$kind" = profile ]; then
        python3 benchmarks/decode_profile.py --model "$model" --batch-size "$batch" --cache-dir /root/cache/local \
            --json "$OUT/$name-profile-$model-b$batch.json" 2>&1 | tail -20 | tee -a $OUT/$name.log
    else
        mlcbench sweep --env local --gpu "$gpu" --gpus all --suite decode --model "$model" --batch-size "$batch" \
            --db "$db" --cache-dir /root/cache 2>&1 | grep -v "━" | tail -12 | tee -a $OUT/$name.log
    fi
done
mlcbench export --db "$db" --format csv --out "$OUT/$name.csv"
mlcbench report --db "$db" --markdown "$OUT/$name.md" >/dev/null 2>&1
echo "done at ${SECONDS}s"
