"""A synthetic model through one workflow: compile cost, whole-call time and TFLOPS, the GPU time of one call without
the host's launch cost (measurement/device_time.py), and the error against eager."""

import time

import torch

from mlcbench.schema import REFERENCE, Correctness, Metrics, ModelInfo
from mlcbench.schema.results import Setting
from mlcbench.workers.measurement.clocks import clocks_during_calls
from mlcbench.workers.measurement.correctness import compare_tensors
from mlcbench.workers.measurement.device_time import device_times
from mlcbench.workers.measurement.dynamo_stats import dynamo_stats
from mlcbench.workers.measurement.timing import for_this_process, peak_memory, time_calls, timed_once
from mlcbench.workers.models import synthetic
from mlcbench.workers.interface import Workflow, WorkflowContext, with_fields


def measure(workflow: Workflow, info: ModelInfo, ctx: WorkflowContext) -> tuple[Metrics, Correctness | None]:
    job, cuda = ctx.job, ctx.device.type == "cuda"
    begin = time.perf_counter()
    model, inputs = synthetic.build(info, job, ctx.dtype, ctx.device)
    load_s = time.perf_counter() - begin
    notes: dict[str, Setting] = {}
    with torch.no_grad():
        reference = None if workflow.name == REFERENCE else model(*inputs)
        # memory is sampled through the first call only: the NVML sampler thread would slow the timed calls
        with peak_memory(cuda) as memory, dynamo_stats() as compile_stats:
            begin = time.perf_counter()
            with workflow.compiling(ctx) as caches:
                prepared = workflow.compile_module(model, inputs, ctx)
                compiled, sync = prepared.runner, prepared.sync
                prepare_s = time.perf_counter() - begin
                output, first_call_s = timed_once(lambda: compiled(*inputs), cuda, sync)
        # checked before more calls run: a workflow's CUDA graphs may write the next call's output into the same memory
        correctness = None if reference is None else compare_tensors(output, reference, ctx.dtype)
        latency = time_calls(lambda: compiled(*inputs), job.warmup, job.repeats, cuda, sync,
                             clocks_during_calls(cuda))
        device_samples, device_method = [], None
        if cuda:
            device_samples, device_method = device_times(lambda: compiled(*inputs), job.repeats, sync, notes)
    flops = synthetic.flops(info, job)
    notes.update(prepare_s=round(prepare_s, 4), first_call_s=round(first_call_s, 4))
    # PyTorch's own matmuls accumulate in fp32
    applied = with_fields(prepared.applied, accumulation=prepared.applied.accumulation or "fp32",
                          compile_caches=caches)
    metrics = Metrics(
        latency=for_this_process(latency, correctness=correctness, device_samples_ms=device_samples,
                                 device_method=device_method),
        compile_s=prepare_s + first_call_s, compile_cache=compile_stats.compile_cache,
        load_s=load_s, torch_peak_mem_bytes=memory.torch, nvml_peak_mem_bytes=memory.nvml, flops=flops,
        tflops=flops / (latency.median_ms * 1e-3) / 1e12, applied=applied, settings={**prepared.notes, **notes},
    )
    return metrics, correctness
