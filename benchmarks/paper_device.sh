#!/usr/bin/env bash
# A built-in suite (SUITE, default `paper`) on every GPU of a GPU machine (the `device` tool, `--env local`), resumed
# call after call: each call sweeps until SWEEP_TIMEOUT_S, then stops as Ctrl-C stops a sweep (every finished process
# is kept), and the next call's same command resumes it from the store under /root (which a machine held warm between
# calls keeps). STEP=first also describes the machine before the sweep. Each call leaves the store, the sweep's log
# and the machine's description in $OUT/$SUITE-call.tar.
#
#   MLCBENCH_GIT_REV=$(git rev-parse --short=12 HEAD) STEP=first SWEEP_TIMEOUT_S=300 bash benchmarks/paper_device.sh \
#       [sweep options, e.g. --model matmul-tinyllama,...]
#   SUITE=energy MLCBENCH_POWER_CHECK=1 ... bash benchmarks/paper_device.sh   (the energy study: the counter checked
#       against nvmlDeviceGetPowerUsage sampled over each timed window)
#
# STEP=beside (issue 53's point 6, whether compiling beside timed work moves a timed figure): host-bound eager b1
# cells (BESIDE_MODELS) timed on half of the cores (whole physical cores) and the GPU, alone into beside/alone.db, then
# again into beside/loaded.db while cold compiles (LOAD_WORKFLOWS on TinyLlama, a fresh cache) run on the other half and
# the same GPU into beside/load.db, their compile times labelled by that store as measured under load; the load is
# stopped when the timed sweep ends. `mlcbench compare` of the two timed stores (beside/compare.txt) is the check.
#
# STEP=ort copies the part of onnxruntime-gpu's wheel (255 MB: more than a call carries) that this call carried in
# .ortcN/ to /root/ort; once all six are there, device_env.sh joins, checks and installs them. Made here with
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp --abi cp312 \
#       --platform manylinux_2_28_x86_64 -d /tmp/ort onnxruntime-gpu==1.31.1
#   (cd /tmp/ort && sha256sum onnxruntime_gpu-*.whl > SHA256 && split -b 45000000 -a 1 -d onnxruntime_gpu-*.whl part)
#   for n in 0 1 2 3 4 5; do mkdir -p .ortc$n && cp /tmp/ort/part$n .ortc$n/; done; cp /tmp/ort/SHA256 .ortc5/
# then six calls back to back (a part and the 11 MB tree under the 64 MiB a call carries), the Nth carrying .ortcN: `STEP=ort bash benchmarks/paper_device.sh`.
#
# STEP=aoti runs no sweep: the aot_inductor workflow's crash in under a minute (why that workflow refuses torch 2.11):
# an AOTInductor package of one nn.Linear on the GPU, compiled, then loaded and called in a fresh process with
# faulthandler on; torch 2.11 (cu130) segfaulted at the load (exit 139) on an H100 and on H200s, torch 2.13 loads it.
set -uo pipefail
if [ "${STEP:-}" = ort ]; then
    mkdir -p /root/ort && cp .ortc*/* /root/ort/ && ls -l /root/ort
    exit
fi
. benchmarks/device_env.sh
if [ "${STEP:-}" = aoti ]; then
    python3 -c "import torch; m = torch.nn.Linear(256, 512).cuda(); print(torch.__version__, torch.version.cuda,
torch.cuda.get_device_name(), torch._inductor.aoti_compile_and_package(torch.export.export(m,
(torch.randn(4, 256, device='cuda'),)), package_path='/tmp/aoti.pt2'))" || exit
    python3 -X faulthandler -c "import torch; run = torch._inductor.aoti_load_package('/tmp/aoti.pt2');
print('loaded; output', tuple(run(torch.randn(4, 256, device='cuda')).shape))"
    echo "aoti_load_package in a fresh process: exit $?"
    exit
fi
export MLCBENCH_ENVS_DIR=$PWD/envs PYTHONUNBUFFERED=1
if [ "${STEP:-}" = beside ]; then
    mkdir -p /root/beside
    read -r timed load < <(python3 -c "from mlcbench.orchestrator.sweep.schedule import core_shares
print(*(','.join(map(str, sorted(share))) for share in core_shares(2)))")
    beside() {  # STORE CORES [sweep options]
        local store=$1 cores=$2; shift 2
        taskset -c "$cores" python3 -m mlcbench.orchestrator sweep --env local --gpu h200 --gpus 0 --suite paper \
            --startup fork --db "sqlite:////root/beside/$store.db" --cache-dir "/root/beside/cache-$store" \
            --workdir "/root/beside/work-$store" "$@" 2>&1 | grep -v "━" >> "/root/beside/$store.log"
    }
    timed_cells=(--model "${BESIDE_MODELS:-tinyllama-1.1b,llama2-7b}" --workflow eager --batch-size 1)
    beside alone "$timed" "${timed_cells[@]}"
    beside load "$load" --model tinyllama-1.1b --workflow "${LOAD_WORKFLOWS:-torchax,torch_compile_forward}" &
    loader=$!
    sleep "${LOAD_LEAD_S:-30}"  # the load's processes past their start-up, compiling
    beside loaded "$timed" "${timed_cells[@]}"
    pkill -INT -f "beside/load.db"; sleep 1; pkill -INT -f "beside/load.db"; wait "$loader"
    python3 -m mlcbench.orchestrator compare --db /root/beside/alone.db --against /root/beside/loaded.db \
        >> /root/beside/compare.txt 2>&1
    echo "timed on cores $timed, load on $load" >> /root/beside/compare.txt
    tar -C /root -cf "$OUT/beside.tar" beside/alone.db beside/loaded.db beside/load.db beside/compare.txt \
        beside/alone.log beside/loaded.log beside/load.log
    exit
fi
suite=${SUITE:-paper}
store=/root/$suite.db gpu=${GPU_TAG:-$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -o 'H[12]00' | tr H h)}
mkdir -p "/root/$suite"
if [ "${STEP:-}" = first ]; then
    { date -u; nvidia-smi --query-gpu=index,name,uuid,driver_version,clocks.max.sm,power.limit --format=csv,noheader
      lscpu | grep -E "Model name|^CPU\(s\)|Thread|Core|Socket|NUMA node[0-9]"; nproc; free -g | head -2
      python3 -c "import sys, torch, transformers, triton, jax; print('python', sys.version.split()[0], 'torch', torch.__version__, 'transformers', transformers.__version__, 'triton', triton.__version__, 'jax', jax.__version__)"
    } > "/root/$suite/machine.txt" 2>&1
fi
start=$SECONDS
timeout --preserve-status -s INT "${SWEEP_TIMEOUT_S:-540}" python3 -m mlcbench.orchestrator sweep --env local \
    --gpu "$gpu" --gpus all --suite "$suite" --startup fork --db "sqlite:///$store" --cache-dir /root/cache \
    --workdir /root/work "$@" 2>&1 | grep -v "━" >> "/root/$suite/sweep.log"
echo "$(date -u +%FT%TZ) sweep $suite $*: exit ${PIPESTATUS[0]}, $((SECONDS - start)) s" | tee -a "/root/$suite/times.txt"
tail -5 "/root/$suite/sweep.log"
cp "$store" "/root/$suite/$suite.db"
tar -C /root -cf "$OUT/$suite-call.tar" "$suite"
