"""An LLM through one workflow: full fixed-length generate calls, as the paper measures them (tokens/s =
batch x output_len / runtime), the per-step time of those calls (past a prefill timed the same way), time to first
token and time per output token (from a call synchronised at every token), and agreement with eager: the first
call and one after the timed ones teacher-forced, each timed call's own tokens against eager's free-running ones."""

import time
from typing import Callable, ContextManager, Optional, cast

import torch

from mlcbench.schema import WORKFLOWS, Correctness, Timing
from mlcbench.schema.results import Setting
from mlcbench.workers.measurement.core import KindFigures, ModelKind
from mlcbench.workers.measurement.correctness import (EAGER_DEVICES, compare_free_running, compare_greedy_tokens,
                                                      compare_teacher_forced, with_timed_calls)
from mlcbench.workers.measurement.references import ReferenceState
from mlcbench.workers.measurement.timing import time_calls, timed_once
from mlcbench.workers.models import llm
from mlcbench.workers.interface import Generation, LLMRunner, Prepared, Workflow, WorkflowContext
from mlcbench.workers.decode.hf_generate import HFGenerateRunner


class LLM(ModelKind[LLMRunner]):
    memory_counts_build = True

    reference_generation: Optional[Generation] = None
    gold_logits: Optional[torch.Tensor] = None
    # why the workflow's loop cannot be fed eager's tokens (None: its check is teacher-forced)
    no_forcing: Optional[str] = None

    def build(self) -> None:
        ctx = self.ctx
        self.model = llm.build(self.info, ctx.job, ctx.dtype, ctx.device)
        if self.cuda:
            torch.cuda.synchronize()
        self.prompt = llm.prompt_ids(self.info, ctx.job, ctx.device)

    def reference(self, set_aside: Callable[[], ContextManager[None]], notes: dict[str, Setting]) -> ReferenceState:
        generation = HFGenerateRunner(self.model, disable_compile=True).generate(
            self.prompt, self.ctx.job.output_len, with_logits=True)
        with set_aside():
            gold_logits = _fp32_logits(self.model, self.prompt, generation, self.ctx, notes)
        return {"tokens": generation.tokens, "step_logits": generation.step_logits, "gold_logits": gold_logits}

    def use_reference(self, state: ReferenceState) -> None:
        device = self.ctx.device
        self.reference_generation = Generation(state["tokens"].to(device), state["step_logits"].to(device))
        self.gold_logits = state["gold_logits"]  # on the CPU, where _fp32_logits leaves it
        self.timed_tokens: list[torch.Tensor] = []

    def prepare(self, workflow: Workflow, ctx: WorkflowContext) -> Prepared[LLMRunner]:
        self.workflow_name = workflow.name
        return workflow.prepare_llm(self.model, ctx)

    def first_call(self, prepared: Prepared[LLMRunner]) -> Callable[[], Generation]:
        # this process checks its own first call: fed eager's tokens where the loop can take them
        runner, reference = prepared.runner, self.reference_generation
        self.no_forcing = getattr(runner, "no_teacher_forcing", None)
        forced = None if reference is None or self.no_forcing else reference.tokens
        return lambda: runner.generate(self.prompt, self.ctx.job.output_len, with_logits=forced is not None,
                                       forced_tokens=forced)

    def check(self, output: Generation) -> Optional[Correctness]:  # type: ignore[override]
        job = self.ctx.job
        if output.tokens.shape != (job.batch_size, job.output_len):
            raise RuntimeError(f"{self.workflow_name} generated {tuple(output.tokens.shape)} tokens, "
                               f"expected {(job.batch_size, job.output_len)}")
        self.output_tokens = int(output.tokens.shape[1])
        reference = self.reference_generation
        if reference is None:
            return None
        if self.no_forcing:
            return compare_greedy_tokens(output.tokens, reference, self.ctx.dtype, self.gold_logits, self.no_forcing)
        info = WORKFLOWS.get(self.workflow_name)
        return compare_teacher_forced(output, reference, self.ctx.dtype, self.gold_logits,
                                      runs_eager_kernels=info is not None and info.runs_eager_kernels)

    def keep_timed(self, output: Generation) -> None:  # type: ignore[override]
        tokens = output.tokens
        # a loop may return the same buffer every call (an XLA tensor is never written again)
        self.timed_tokens.append(tokens.clone() if tokens.device.type in EAGER_DEVICES else tokens)

    def check_timed(self, checked: Correctness) -> Correctness:
        assert self.reference_generation is not None, "only a checked call's timed calls are checked"
        failed, compared, why = compare_free_running(self.timed_tokens, self.reference_generation, self.ctx.dtype,
                                                     self.gold_logits)
        return with_timed_calls(checked, len(self.timed_tokens), failed, why, free_running_tokens=compared)

    def check_again(self, prepared: Prepared[LLMRunner]) -> Optional[Correctness]:
        if self.reference_generation is None:
            return None
        output, _ = timed_once(self.first_call(prepared), self.cuda, prepared.sync)
        return self.check(cast(Generation, output))

    def call(self, prepared: Prepared[LLMRunner]) -> Callable[[], Generation]:
        runner, prompt, output_len = prepared.runner, self.prompt, self.ctx.job.output_len
        return lambda: runner.generate(prompt, output_len)

    def after_timed_calls(self, prepared: Prepared[LLMRunner], latency: Timing,
                          notes: dict[str, Setting]) -> KindFigures:
        job = self.ctx.job
        # the prefill timed as the calls are (one new token, not synchronised per token): the per-step time of the
        # timed calls is what the rest of a call adds
        prefill_ms = time_calls(lambda: prepared.runner.generate(self.prompt, 1), 1, job.repeats, self.cuda,
                                prepared.sync).median_ms
        token_times = _token_times(prepared.runner, self.prompt, job.output_len, self.cuda)
        step_ms = (latency.median_ms - prefill_ms) / (job.output_len - 1) if job.output_len > 1 else None
        return KindFigures(
            process={"prefill_ms": prefill_ms, "step_ms": step_ms},
            metrics={"tokens_per_s": job.batch_size * job.output_len / (latency.median_ms * 1e-3),
                     "ttft_ms": token_times[0],
                     "tpot_ms": (token_times[-1] - token_times[0]) / max(len(token_times) - 1, 1),
                     "output_tokens": self.output_tokens})


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
        logits = HFGenerateRunner(model, disable_compile=True).generate(
            prompt, ctx.job.output_len, with_logits=True, forced_tokens=reference.tokens).step_logits
        assert logits is not None, "asked with_logits"
        return logits.cpu()
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
