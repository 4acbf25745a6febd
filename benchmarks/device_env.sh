# Source on the GPU machine (Python 3.12, torch 2.11 cu130, no pydantic/SQLAlchemy): installs the wheels carried in
# .whl/ (mlcbench's own wheel among them) into /root/site and, when its parts were carried to /root/ort, the
# onnxruntime-gpu wheel into /root/ort/site, ahead of the machine's CPU-only onnxruntime.
#   . benchmarks/device_env.sh && mlcbench sweep --env local --gpu h100 ...
set -e
# once per set of wheels: two sweeps started side by side (paper_device.sh and startup_bias.sh on one machine) must not install into /root/site at once
wheels=$(cat .whl/*.whl | sha256sum | cut -c1-16)
if [ ! -f "/root/site/.installed-$wheels" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /root/site .whl/*.whl
    touch "/root/site/.installed-$wheels"
fi
export PYTHONPATH=/root/site${PYTHONPATH:+:$PYTHONPATH}
if ls /root/ort/part? >/dev/null 2>&1 && [ ! -d /root/ort/site ]; then
    cat /root/ort/part? > /root/ort/onnxruntime_gpu-1.31.1-cp312-cp312-manylinux_2_28_x86_64.whl
    (cd /root/ort && sha256sum -c SHA256)
    python3 -m pip install -q --no-index --no-deps --no-compile --target /root/ort/site \
        /root/ort/onnxruntime_gpu-1.31.1-cp312-cp312-manylinux_2_28_x86_64.whl
fi
[ -d /root/ort/site ] && export PYTHONPATH=/root/ort/site:$PYTHONPATH
# the machine's Python kept no bytecode: each process compiled some 1,500 modules from source again, about 5 s of a
# warm compile (measured with warm_start.py on an H100, 2026-11-26), where a user's installed packages have theirs.
# Bytecode goes to a folder of its own, written by the first process that imports each module.
unset PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX=/root/pycache
# Bytecode for every installed module, written once per machine before anything is measured, as pip writes it at
# install: otherwise a machine's first processes write it as they import (a cold compile's worker pool, which imports
# torch in each worker, among them), inside the times they measure.
if [ ! -f /root/pycache/.compiled ]; then
    python3 -m compileall -q -j 0 "$(python3 -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))')" \
        /root/site >/dev/null 2>&1
    touch /root/pycache/.compiled
fi
mlcbench() { python3 -m mlcbench.orchestrator "$@"; }
set +e
