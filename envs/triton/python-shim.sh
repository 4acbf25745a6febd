#!/bin/sh
# `python` in this image. mlcbench starts one worker per (model, workflow) with `python -m workers run --jobs FILE ...`;
# the Torch-TensorRT workflows need the official torch build of /opt/torchtrt (torch_tensorrt's pins reject NVIDIA's
# torch), every other workflow runs in the image's own Python (NVIDIA torch, TensorRT-LLM, onnxruntime-gpu).
interpreter=/usr/bin/python3
previous=
for argument in "$@"; do
    if [ "$previous" = "--jobs" ] && head -n 1 "$argument" 2>/dev/null | grep -q -E '"workflow":"(torch_tensorrt|torch_compile_tensorrt)"'; then
        interpreter=/opt/torchtrt/bin/python
    fi
    previous=$argument
done
exec "$interpreter" "$@"
