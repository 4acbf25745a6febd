"""An LLM through one workflow: full fixed-length generate calls, as the paper measures them (tokens/s =
batch x output_len / runtime), the per-step time of those calls (past a prefill timed the same way), time to first
token and time per output token (from a call synchronised at every token), and agreement with eager."""

import time
from typing import Optional

import torch

from mlcbench.schema import REFERENCE, Correctness, Metrics, ModelInfo
from mlcbench.schema.results import Setting
from mlcbench.workers.measurement.clocks import clocks_during_calls
from mlcbench.workers.measurement.correctness import compare_greedy_tokens, compare_teacher_forced
from mlcbench.workers.measurement.dynamo_stats import compiled_graphs, dynamo_stats
from mlcbench.workers.measurement.timing import for_this_process, peak_memory, time_calls, timed_once
from mlcbench.workers.models import llm
from mlcbench.workers.interface import Generation, Workflow, WorkflowContext, with_fields
from mlcbench.workers.decode.hf_generate import HFGenerateRunner


def measure(workflow: Workflow, info: ModelInfo, ctx: WorkflowContext) -> tuple[Metrics, Correctness | None]:
    job, cuda = ctx.job, ctx.device.type == "cuda"
    notes: dict[str, Setting] = {}
    # memory is sampled through the first call only: the NVML sampler thread would slow the timed calls
    with torch.no_grad():
        with peak_memory(cuda) as memory:
            begin = time.perf_counter()
            model = llm.build(info, job, ctx.dtype, ctx.device)
            if cuda:
                torch.cuda.synchronize()
            load_s = time.perf_counter() - begin
            prompt = llm.prompt_ids(info, job, ctx.device)
            reference = gold_logits = None
            if workflow.name != REFERENCE:
                reference = HFGenerateRunner(model, disable_compile=True).generate(prompt, job.output_len,
                                                                                   with_logits=True)
                with memory.set_aside():
                    gold_logits = _fp32_logits(model, prompt, reference, ctx, notes)
            with dynamo_stats() as compile_stats:
                begin = time.perf_counter()
                with workflow.compiling(ctx) as caches:
                    prepared = workflow.prepare_llm(model, ctx)
                    runner, sync = prepared.runner, prepared.sync
                    prepare_s = time.perf_counter() - begin
                    # this process checks its own first call: fed eager's tokens where the loop can take them
                    no_forcing = getattr(runner, "no_teacher_forcing", None)
                    forced = None if reference is None or no_forcing else reference.tokens
                    first, first_call_s = timed_once(
                        lambda: runner.generate(prompt, job.output_len, with_logits=forced is not None,
                                                forced_tokens=forced), cuda, sync)
        graphs_before = compiled_graphs()
        latency = time_calls(lambda: runner.generate(prompt, job.output_len), job.warmup, job.repeats, cuda, sync,
                             clocks_during_calls(cuda))
        # the prefill timed as the calls are (one new token, not synchronised per token): the per-step time of the
        # timed calls is what the rest of a call adds
        prefill_ms = time_calls(lambda: runner.generate(prompt, 1), 1, job.repeats, cuda, sync).median_ms
        token_times = _token_times(runner, prompt, job.output_len, cuda)
        late_compiles = compiled_graphs() - graphs_before
    if first.tokens.shape != (job.batch_size, job.output_len):
        raise RuntimeError(f"{workflow.name} generated {tuple(first.tokens.shape)} tokens, "
                           f"expected {(job.batch_size, job.output_len)}")
    ttft_ms = token_times[0]
    tpot_ms = (token_times[-1] - token_times[0]) / max(len(token_times) - 1, 1)
    notes.update(prepare_s=round(prepare_s, 4), first_call_s=round(first_call_s, 4), **compile_stats.phases)
    if compile_stats.cudagraph_skips:
        notes["cudagraph_skips"] = compile_stats.cudagraph_skips
    step_ms = (latency.median_ms - prefill_ms) / (job.output_len - 1) if job.output_len > 1 else None
    correctness = None
    if reference is not None:
        correctness = (compare_greedy_tokens(first.tokens, reference.tokens, no_forcing) if no_forcing
                       else compare_teacher_forced(first, reference, ctx.dtype, gold_logits))
    compiled = workflow.name != REFERENCE
    metrics = Metrics(
        latency=for_this_process(latency, correctness=correctness, prefill_ms=prefill_ms, step_ms=step_ms),
        compile_s=prepare_s + first_call_s, load_s=load_s,
        compile_cache=compile_stats.compile_cache,
        torch_peak_mem_bytes=memory.torch, nvml_peak_mem_bytes=memory.nvml,
        tokens_per_s=job.batch_size * job.output_len / (latency.median_ms * 1e-3),
        ttft_ms=ttft_ms, tpot_ms=tpot_ms, output_tokens=int(first.tokens.shape[1]),
        graph_breaks=compile_stats.graph_breaks if compiled else None,
        recompiles=compile_stats.recompiles + late_compiles if compiled else None,
        applied=with_fields(prepared.applied, compile_caches=caches, compiled_graphs=compile_stats.graphs),
        settings={**prepared.notes, **notes},
    )
    return metrics, correctness


def _fp32_logits(model, prompt: torch.Tensor, reference: Generation, ctx: WorkflowContext,
                 notes: dict[str, Setting]) -> Optional[torch.Tensor]:
    """Eager's logits with the model's weights in fp32, fed eager's own tokens: how far eager in half precision is from
    the same model computed exactly enough (None in fp32, or where the fp32 weights do not fit: the check then keeps
    its fixed tolerance, and says so in `notes`). Only the parameters change precision and go back exactly
    (half -> fp32 -> half loses nothing); buffers such as RoPE's inverse frequencies stay as they are."""
    if ctx.dtype == torch.float32:
        return None
    parameters = list(model.parameters())
    try:
        for parameter in parameters:
            parameter.data = parameter.data.float()
        return HFGenerateRunner(model, disable_compile=True).generate(
            prompt, ctx.job.output_len, with_logits=True, forced_tokens=reference.tokens).step_logits.cpu()
    except torch.cuda.OutOfMemoryError:
        notes["fp32_reference"] = "did not fit: fixed tolerance"
        return None
    finally:
        for parameter in parameters:
            parameter.data = parameter.data.to(ctx.dtype)
        if ctx.device.type == "cuda":
            torch.cuda.empty_cache()


def _token_times(runner, prompt: torch.Tensor, output_len: int, cuda: bool) -> list[float]:
    """Milliseconds from the call to each new token, from one extra call that synchronizes at every token
    (kept out of the throughput figure, whose calls never stop to look)."""
    stamps: list[float] = []

    def on_token() -> None:
        if cuda:
            torch.cuda.synchronize()
        stamps.append(time.perf_counter())

    begin = time.perf_counter()
    runner.generate(prompt, output_len, on_token=on_token)
    return [(stamp - begin) * 1e3 for stamp in stamps] or [float("nan")]
