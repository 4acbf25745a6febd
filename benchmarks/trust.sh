#!/usr/bin/env bash
# Do two sweeps of the same cells agree? The `trust` suite swept twice into two stores on one GPU, one after the
# other, each exported, then `mlcbench compare` of the two: each cell's ratio with its 95 % interval, and how many
# differ significantly (about 1 in 20 would by chance alone).
#
#   benchmarks/trust.sh h100                 # both sweeps, then the comparison (~2 x 6 min on an H100, see README)
#   benchmarks/trust.sh h100 1               # only the first sweep (the device allows 10 minutes a command)
#   benchmarks/trust.sh h100 2 compare       # the second, then the comparison
#   SWEEP_TIMEOUT_S=550 benchmarks/trust.sh h100 1   # stopped (cells measured so far kept) after 550 s
set -uo pipefail
gpu=${1:?usage: benchmarks/trust.sh GPU_TAG [1|2|compare ...]}
shift
steps=${*:-1 2 compare}
out=${OUT:-benchmarks/results}
mlcbench=${MLCBENCH:-mlcbench}
mkdir -p "$out"
for step in $steps; do
  if [ "$step" = compare ]; then
    $mlcbench compare --db "sqlite:///$out/$gpu-trust-1.db" --against "$out/$gpu-trust-2.db" \
      | tee "$out/$gpu-trust-compare.txt"
    $mlcbench report --db "sqlite:///$out/$gpu-trust-1.db" --markdown "$out/$gpu-trust-1.md" > /dev/null
    continue
  fi
  start=$SECONDS
  # SWEEP_TIMEOUT_S: stop the sweep as Ctrl-C does (it stores every cell it measured) before the device's call limit;
  # the same command again measures what is left
  timeout -s INT "${SWEEP_TIMEOUT_S:-0}" \
    $mlcbench sweep --env local --gpu "$gpu" --suite trust --db "sqlite:///$out/$gpu-trust-$step.db"
  echo "sweep $step: exit $?, $((SECONDS - start)) s" | tee -a "$out/$gpu-trust-times.txt"
  $mlcbench export --db "sqlite:///$out/$gpu-trust-$step.db" --format csv --out "$out/$gpu-trust-$step.csv"
done
