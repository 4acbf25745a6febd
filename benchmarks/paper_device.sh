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
# STEP=aoti runs no sweep: the aot_inductor workflow's crash in under a minute (why that workflow refuses torch 2.11):
# an AOTInductor package of one nn.Linear on the GPU, compiled, then loaded and called in a fresh process with
# faulthandler on; torch 2.11 (cu130) segfaulted at the load (exit 139) on an H100 and on H200s, torch 2.13 loads it.
set -uo pipefail
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
