"""An LLM through one workflow: full fixed-length generate calls, as the paper measures them (tokens/s =
batch x output_len / runtime), the per-step time of those calls (past a prefill timed the same way), time to first
token and time per output token (from a call synchronised at every token), and agreement with eager: the first
call and one after the timed ones teacher-forced; one call running free on each seeded prompt (input set), its prefill
logits and tokens against eager's for that prompt; the timed calls cycling through the prompts, each one's tokens
against its prompt's checked call and against eager's free-running ones."""

import time
from typing import Callable, ContextManager, Optional, cast

import torch

from mlcbench.schema import WORKFLOWS, Correctness, Timing
from mlcbench.schema.results import TIMED_TOKENS_CHECKED, Setting
from mlcbench.workers.measurement.core import KindFigures, ModelKind
from mlcbench.workers.measurement.correctness import (EAGER_DEVICES, INPUT_SETS, in_fp32, InputSetsChecked, against_eager,
                                                      certain_mask, compare_greedy_tokens, compare_teacher_forced,
                                                      compare_with_checked_call, with_timed_calls)
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
        self.prompts = [llm.prompt_ids(self.info, ctx.job, ctx.device, index) for index in range(INPUT_SETS)]
        self.prompt = self.prompts[0]
        self.input_set = 0  # the prompt of the latest call()

    def reference(self, set_aside: Callable[[], ContextManager[None]], notes: dict[str, Setting]) -> ReferenceState:
        """Eager's generation of each prompt, stacked [sets, ...] on the CPU (the device holds one at a time)."""
        generations, golds = [], []
        for prompt in self.prompts:
            generation = HFGenerateRunner(self.model, disable_compile=True).generate(
                prompt, self.ctx.job.output_len, with_logits=True)
            with set_aside():
                golds.append(_fp32_logits(self.model, prompt, generation, self.ctx, notes))
            assert generation.step_logits is not None, "asked with_logits"
            generations.append(Generation(generation.tokens.cpu(), generation.step_logits.cpu()))
        return {"tokens": torch.stack([generation.tokens for generation in generations]),
                "step_logits": torch.stack([cast(torch.Tensor, generation.step_logits) for generation in generations]),
                "gold_logits": None if golds[0] is None else torch.stack(cast(list[torch.Tensor], golds))}

    def use_reference(self, state: ReferenceState) -> None:
        device, gold = self.ctx.device, state["gold_logits"]  # gold on the CPU, where _fp32_logits leaves it
        # the first prompt's on the device (its tokens are fed to the teacher-forced calls); the others are compared on
        # the CPU only
        self.references = [Generation(tokens.to(device), logits.to(device)) if index == 0 else Generation(tokens, logits)
                           for index, (tokens, logits) in enumerate(zip(state["tokens"], state["step_logits"]))]
        self.golds = [None] * len(self.references) if gold is None else list(gold)
        self.reference_generation, self.gold_logits = self.references[0], self.golds[0]
        self.checked_runs: list[Generation] = []  # per input set, its call running free, checked before the timed ones
        self.timed_tokens: list[tuple[int, torch.Tensor]] = []  # (input set, tokens) per timed call

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

    def check_input_sets(self, prepared: Prepared[LLMRunner]) -> InputSetsChecked:
        """One call running free on each prompt (with its logits where the loop returns them): its prefill
        teacher-forced against eager's for that prompt (the step before any token can part them) and its tokens
        against eager's free-running ones; kept as what that prompt's timed calls must repeat."""
        runner, dtype, failures = prepared.runner, self.ctx.dtype, []
        for index, prompt in enumerate(self.prompts):
            run = runner.generate(prompt, self.ctx.job.output_len, with_logits=not self.no_forcing)
            logits = run.step_logits
            run = Generation(run.tokens.clone() if run.tokens.device.type in EAGER_DEVICES else run.tokens,
                             None if logits is None else logits.detach().to("cpu", torch.float32))
            self.checked_runs.append(run)
            reference, gold = self.references[index], self.golds[index]
            why = against_eager(run.tokens, reference, certain_mask(reference, dtype, gold))
            if why:
                failures.append(f"prompt {index + 1}'s checked call {why}")
            if logits is None or run.step_logits is None or reference.step_logits is None:
                continue
            prefill = compare_teacher_forced(
                Generation(run.tokens[:, :1], run.step_logits[:, :1]),
                Generation(reference.tokens[:, :1], reference.step_logits[:, :1]), dtype,
                None if gold is None else gold[:, :1], runs_eager_kernels=True)
            if not prefill.passed:
                failures.append(f"prompt {index + 1}'s prefill running free: " + (
                    prefill.not_finite or prefill.note or "" if prefill.rel_l2_error is None else
                    f"relative L2 {prefill.rel_l2_error:.3g} from eager's, tolerance {prefill.tolerance:.3g}" + (
                        f" ({prefill.tokens_beyond_noise} token(s) beyond noise)"
                        if prefill.tokens_beyond_noise else "")))
        return InputSetsChecked(len(self.prompts), tuple(failures))

    def keep_timed(self, output: Generation) -> None:  # type: ignore[override]
        tokens = output.tokens
        # a loop may return the same buffer every call (an XLA tensor is never written again)
        self.timed_tokens.append((self.input_set, tokens.clone() if tokens.device.type in EAGER_DEVICES else tokens))

    def check_timed(self, checked: Correctness) -> Correctness:
        """Each timed call against its prompt's checked call (same program, same prompt) and against eager's
        free-running tokens for that prompt; a process that compared under TIMED_TOKENS_CHECKED of its timed tokens
        says so in its note (the cell then says "timed calls not checked")."""
        masks = [certain_mask(reference, self.ctx.dtype, gold) for reference, gold in zip(self.references, self.golds)]
        failed = with_eager = compared = generated = 0
        first = ""
        for call, (index, tokens) in enumerate(self.timed_tokens):
            eager_why = against_eager(tokens, self.references[index], masks[index])
            own_failed, own_compared, own_why = compare_with_checked_call(tokens, self.checked_runs[index],
                                                                          self.ctx.dtype)
            with_eager += int(masks[index].sum())
            compared, generated = compared + own_compared, generated + tokens.numel()
            if eager_why or own_failed:
                failed += 1
                first = first or f"timed call {call + 1} (prompt {index + 1}) {own_why or eager_why}"
        checked = with_timed_calls(checked, len(self.timed_tokens), failed, first, free_running_tokens=with_eager,
                                   timed_tokens=generated, timed_tokens_compared=compared)
        if generated and compared < TIMED_TOKENS_CHECKED * generated:
            note = (f"timed calls not checked: {compared} of their {generated} tokens compared with their prompt's "
                    f"checked call (under {TIMED_TOKENS_CHECKED:.0%})")
            checked = checked.model_copy(update={"note": "; ".join(filter(None, [checked.note, note]))})
        return checked

    def check_again(self, prepared: Prepared[LLMRunner]) -> Optional[Correctness]:
        if self.reference_generation is None:
            return None
        output, _ = timed_once(self.first_call(prepared), self.cuda, prepared.sync)
        return self.check(cast(Generation, output))

    def call(self, prepared: Prepared[LLMRunner]) -> Callable[[], Generation]:
        """One timed call on the next prompt (warm-up calls too: keep_timed reads which prompt its call had)."""
        runner, prompts, output_len = prepared.runner, self.prompts, self.ctx.job.output_len

        def next_prompt() -> Generation:
            self.input_set = (self.input_set + 1) % len(prompts)
            return runner.generate(prompts[self.input_set], output_len)
        return next_prompt

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

    def logits() -> torch.Tensor:
        step_logits = HFGenerateRunner(model, disable_compile=True).generate(
            prompt, ctx.job.output_len, with_logits=True, forced_tokens=reference.tokens).step_logits
        assert step_logits is not None, "asked with_logits"
        return step_logits

    return in_fp32(model, ctx.dtype, notes, logits)


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
