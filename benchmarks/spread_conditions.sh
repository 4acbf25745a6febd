#!/usr/bin/env bash
# Follow-up to spread_probe.py: is the between-process spread of a call's host launch time the interpreter's memory
# layout? The same eager cells in fresh processes under four conditions: as is, PYTHONHASHSEED fixed, address-space
# randomisation off (setarch -R), both. One JSON line per process on stdout (spread_probe.py --child).
#   bash benchmarks/spread_conditions.sh 8 > conditions.jsonl
set -euo pipefail
processes=${1:-8}
cells=('["ffn-tinyllama eager b1", 2048, 5632, 1, 1, false]' '["ffn-multilayer-tinyllama eager b1", 2048, 5632, 4, 1, false]')
for index in $(seq "$processes"); do
    for condition in as-is hashseed no-aslr both; do
        for cell in "${cells[@]}"; do
            case $condition in
                as-is) prefix=(env) ;;
                hashseed) prefix=(env PYTHONHASHSEED=0) ;;
                no-aslr) prefix=(setarch "$(uname -m)" -R env) ;;
                both) prefix=(setarch "$(uname -m)" -R env PYTHONHASHSEED=0) ;;
            esac
            line=$("${prefix[@]}" python3 benchmarks/spread_probe.py --child "$cell" | tail -1)
            echo "{\"condition\": \"$condition\", \"process\": $index, \"probe\": $line}"
        done
    done
done
