#!/usr/bin/env bash
# The cross-generation study (issue 18): the `crossgen` suite on one GPU machine, then, on the host, the GPUs' stores
# merged and compared.
#
#   benchmarks/crossgen.sh sweep h200 [sweep options]   # on the GPU machine, as often as it takes (see device_sweep.sh)
#   benchmarks/crossgen.sh compare h100 h200            # here, with both stores in benchmarks/results
set -uo pipefail
step=${1:?usage: benchmarks/crossgen.sh sweep GPU_TAG [sweep options] | compare GPU_A GPU_B}
shift
if [ "$step" = sweep ]; then
    gpu=${1:?GPU tag}
    shift
    exec bash benchmarks/device_sweep.sh "$gpu-crossgen" "$gpu" crossgen "$@"
elif [ "$step" = compare ]; then
    first=${1:?GPU tag} second=${2:?GPU tag}
    results=benchmarks/results
    mlcbench=${MLCBENCH:-.venv/bin/mlcbench}
    rm -f "$results/crossgen.db"
    $mlcbench merge "$results/$first-crossgen.db" "$results/$second-crossgen.db" --into "$results/crossgen.db"
    $mlcbench export --db "sqlite:///$results/crossgen.db" --format csv --out "$results/crossgen.csv"
    $mlcbench compare --db "sqlite:///$results/crossgen.db" --gpu "$first" --gpu "$second" \
        | tee "$results/crossgen-compare.txt"
    $mlcbench report --db "sqlite:///$results/crossgen.db" --markdown "$results/crossgen.md" > /dev/null
    $mlcbench report --db "sqlite:///$results/crossgen.db" --html "$results/crossgen-report"
else
    echo "unknown step $step" >&2
    exit 2
fi
