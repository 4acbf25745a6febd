#!/usr/bin/env bash
# The cross-generation study (issue 18): the `crossgen` suite on one GPU machine into $OUT/<gpu>-crossgen.db, stopped
# as Ctrl-C does before the device's call limit (SWEEP_TIMEOUT_S, default 540 s; every cell measured so far is kept)
# and resumed by the same command with that store carried back in SEED_DB. Then, on the host, the GPUs' stores merged
# and compared.
#
#   SEED_DB=.devrun/h100-crossgen.db benchmarks/crossgen.sh sweep h100   # on the GPU machine (device_env.sh first)
#   benchmarks/crossgen.sh compare h100 h200                              # here, with both stores in benchmarks/results
set -uo pipefail
step=${1:?usage: benchmarks/crossgen.sh sweep GPU_TAG | compare GPU_A GPU_B}
shift
if [ "$step" = sweep ]; then
    gpu=${1:?GPU tag}
    . benchmarks/device_env.sh
    export MLCBENCH_ENVS_DIR=$PWD/envs PYTHONUNBUFFERED=1
    store=$OUT/$gpu-crossgen.db
    [ -n "${SEED_DB:-}" ] && cp "$SEED_DB" "$store"
    { date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader
      lscpu | grep "Model name"; nproc
      python3 -c "import torch, transformers, triton; print('torch', torch.__version__, 'transformers', transformers.__version__, 'triton', triton.__version__)"
    } | tee -a "$OUT/$gpu-crossgen-machine.txt"
    timeout -s INT "${SWEEP_TIMEOUT_S:-540}" python3 -m mlcbench.orchestrator sweep --env local --gpu "$gpu" --suite crossgen \
        --db "sqlite:///$store" --cache-dir /root/cache 2>&1 | grep -v "━" | tail -40
    echo "sweep: exit ${PIPESTATUS[0]}, ${SECONDS} s" | tee -a "$OUT/$gpu-crossgen-times.txt"
    mlcbench export --db "sqlite:///$store" --format csv --out "$OUT/$gpu-crossgen.csv"
elif [ "$step" = compare ]; then
    first=${1:?GPU tag} second=${2:?GPU tag}
    results=benchmarks/results
    mlcbench=${MLCBENCH:-.venv/bin/mlcbench}
    $mlcbench merge "$results/$first-crossgen.db" "$results/$second-crossgen.db" --into "$results/crossgen.db"
    $mlcbench export --db "sqlite:///$results/crossgen.db" --format csv --out "$results/crossgen.csv"
    $mlcbench compare --db "sqlite:///$results/crossgen.db" --gpu "$first" --gpu "$second" \
        | tee "$results/crossgen-compare.txt"
    $mlcbench report --db "sqlite:///$results/crossgen.db" --html "$results/crossgen-report"
else
    echo "unknown step $step" >&2
    exit 2
fi
