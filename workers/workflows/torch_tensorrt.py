"""Torch-TensorRT ahead of time: torch.export, torch_tensorrt.dynamo.compile, saved to the env cache and loaded
back. Compile cost is the export + engine build.

LLMs: no official recipe runs generate() on a TensorRT module (2.7 has no KV-cache support), so LLMs use our own
greedy loop without a KV cache: each step runs the whole sequence through one engine built for every length the
loop will see (a dynamic sequence dimension, batch fixed to the job's)."""

from typing import Callable

import torch

from mlcbench.schema import Applied
from mlcbench.schema.options import TensorrtOptions
from mlcbench.workers.interface import CausalLM, LLMRunner, Prepared, Workflow, WorkflowContext, require
from mlcbench.workers.decode.greedy import GreedyRunner, LogitsOnly
from mlcbench.workers.stacks.trt_settings import compilation_settings


class TorchTensorRT(Workflow[TensorrtOptions]):
    def compile_module(self, module: torch.nn.Module, inputs: tuple[torch.Tensor, ...],
                       ctx: WorkflowContext[TensorrtOptions]) -> Prepared[Callable[..., object]]:
        torch_tensorrt = require("torch_tensorrt")
        options, configured = compilation_settings(torch_tensorrt, ctx)
        exported = torch.export.export(module, inputs)
        compiled = torch_tensorrt.dynamo.compile(exported, inputs=list(inputs), **options)
        path = ctx.cache_dir / "torch_tensorrt" / f"{ctx.job.job_id}.ep"
        path.parent.mkdir(parents=True, exist_ok=True)
        torch_tensorrt.save(compiled, str(path), inputs=list(inputs))
        return Prepared(torch.export.load(str(path)).module(),
                        Applied(backend="tensorrt", export="torch.export", dynamic_shapes=False),
                        notes={"saved_program": str(path)}).fold(configured)

    def prepare_llm(self, model: CausalLM, ctx: WorkflowContext[TensorrtOptions]) -> Prepared[LLMRunner]:
        torch_tensorrt = require("torch_tensorrt")
        options, configured = compilation_settings(torch_tensorrt, ctx)
        job = ctx.job
        shortest, longest = job.input_len, job.input_len + job.output_len - 1  # the last step sees longest tokens
        # an example of size 1 would be specialised by export: take one inside the range when there is a range
        example = torch.randint(3, model.config.vocab_size, (job.batch_size, max(shortest, min(2, longest))),
                                device=ctx.device)
        dynamic_shapes = None
        if longest > shortest:
            dynamic_shapes = ({1: torch.export.Dim("sequence", min=shortest, max=longest)},)
        exported = torch.export.export(LogitsOnly(model), (example,), dynamic_shapes=dynamic_shapes, strict=False)
        spec = torch_tensorrt.Input(min_shape=(job.batch_size, shortest),
                                    opt_shape=(job.batch_size, (shortest + longest) // 2),
                                    max_shape=(job.batch_size, longest), dtype=torch.int64)
        forward = torch_tensorrt.dynamo.compile(exported, inputs=[spec], **options)
        return Prepared(GreedyRunner(forward, eos_token_id=model.config.eos_token_id),
                        Applied(backend="tensorrt", export="torch.export", dynamic_shapes=longest > shortest,
                                decode_loop="greedy_no_kv_cache", kv_cache="none"),
                        notes={"sequence_range": f"{shortest}..{longest}"}).fold(configured)
