"""A Hugging Face causal LM as one ONNX graph with its KV cache as inputs and outputs, and greedy decode on it through
IO binding: the prompt runs with an empty cache (past length 0), each later step feeds one token and the cache the
step before returned. One export serves every batch size, prompt length and step (batch, sequence and past length
are dynamic axes)."""

from pathlib import Path
from typing import Callable, Optional

import torch

from mlcbench.schema import Applied
from mlcbench.schema.options import OnnxRuntimeOptions
from mlcbench.workers.interface import CausalLM, Fragment, Generation, Prepared, WorkflowContext
from mlcbench.workers.decode.greedy import greedy_decode
from mlcbench.workers.stacks.onnx_export import bind_input, bind_output, export_onnx, session


class DecoderWithCache(torch.nn.Module):
    """forward(input_ids, past keys and values per layer) -> (last position's logits, presents per layer): the
    presents are the pasts with this step's keys and values appended (a dynamic cache, as tensors)."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, past: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
        from transformers import DynamicCache

        cache = DynamicCache(ddp_cache_data=list(zip(past[0::2], past[1::2])))
        out = self.model(input_ids=input_ids, past_key_values=cache, use_cache=True)
        presents = [tensor for layer in out.past_key_values.layers for tensor in (layer.keys, layer.values)]
        return (out.logits[:, -1, :], *presents)


def cache_shape(model: CausalLM, batch: int, length: int) -> tuple[int, int, int, int]:
    config = model.config
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    return (batch, config.num_key_value_heads, length, head_dim)


def export_decoder(model: CausalLM, ctx: WorkflowContext) -> tuple[Path, list[str], list[str], Fragment]:
    """The graph's file, its input and output names (input_ids, past_0..; logits, present_0..), and the export's
    Fragment."""
    layers = model.config.num_hidden_layers
    # an example with 2 of everything: torch.export specializes sizes 0 and 1, and the cache starts empty
    input_ids = torch.full((2, 2), 3, dtype=torch.long, device=ctx.device)
    past = tuple(torch.zeros(cache_shape(model, 2, 2), dtype=ctx.dtype, device=ctx.device) for _ in range(2 * layers))
    batch, sequence, past_length = torch.export.Dim("batch"), torch.export.Dim("sequence"), torch.export.Dim("past", min=0)
    dynamic_shapes = ({0: batch, 1: sequence}, tuple({0: batch, 2: past_length} for _ in past))
    input_names = ["input_ids"] + [f"past_{i}" for i in range(2 * layers)]
    output_names = ["logits"] + [f"present_{i}" for i in range(2 * layers)]
    path, exported = export_onnx(DecoderWithCache(model).eval(), (input_ids, past), ctx, input_names, output_names,
                                 "dynamic batch, sequence, past; KV cache in and out", dynamic_shapes)
    return path, input_names, output_names, exported


class OnnxKVCacheRunner:
    """Greedy decode on an ORT session of DecoderWithCache's graph. Every buffer is torch's, bound in place: the
    inputs, the logits, and the presents, which become the next step's pasts. With IO binding they live on the
    model's device; without it in host memory, so every step copies the cache to the GPU and back."""

    def __init__(self, sess, model: CausalLM, input_names: list[str], output_names: list[str],
                 dtype: torch.dtype, eos_token_id: Optional[int], buffers: torch.device):
        self.sess, self.model, self.dtype, self.eos_token_id = sess, model, dtype, eos_token_id
        self.input_names, self.output_names = input_names, output_names
        self.vocab_size = model.config.vocab_size
        self.buffers = buffers

    def _step(self) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
        past: list[torch.Tensor] = []

        def step(_: torch.Tensor, new: torch.Tensor) -> torch.Tensor:
            nonlocal past
            batch, buffers = new.shape[0], self.buffers
            if not past:  # the prompt: an empty cache
                past = [torch.empty(cache_shape(self.model, batch, 0), dtype=self.dtype, device=buffers)
                        for _ in self.input_names[1:]]
            length = past[0].shape[2] + new.shape[1]
            logits = torch.empty((batch, self.vocab_size), dtype=self.dtype, device=buffers)
            presents = [torch.empty(cache_shape(self.model, batch, length), dtype=self.dtype, device=buffers)
                        for _ in self.output_names[1:]]
            binding = self.sess.io_binding()
            # held until the run: a binding keeps only the address (a copy made here, of a forced token, would be freed)
            inputs = [new.to(buffers).contiguous(), *past]
            for name, tensor in zip(self.input_names, inputs):
                bind_input(binding, name, tensor)
            for name, tensor in zip(self.output_names, [logits, *presents]):
                bind_output(binding, name, tensor)
            self.sess.run_with_iobinding(binding)
            past = presents
            return logits.to(new.device)

        return step

    def generate(self, input_ids: torch.Tensor, max_new_tokens: int, with_logits: bool = False,
                 on_token: Optional[Callable[[], None]] = None,
                 forced_tokens: Optional[torch.Tensor] = None) -> Generation:
        if forced_tokens is not None:
            forced_tokens = forced_tokens.to(input_ids.device, input_ids.dtype)
        return greedy_decode(self._step(), input_ids, max_new_tokens, self.eos_token_id, with_logits, on_token,
                             forced_tokens=forced_tokens)


def prepare(model: CausalLM, providers: list,
            ctx: WorkflowContext[OnnxRuntimeOptions]) -> Prepared[OnnxKVCacheRunner]:
    path, input_names, output_names, exported = export_decoder(model, ctx)
    sess, opened = session(path, providers)
    io_binding = ctx.options.io_binding
    runner = OnnxKVCacheRunner(sess, model, input_names, output_names, ctx.dtype, model.config.eos_token_id,
                               ctx.device if io_binding else torch.device("cpu"))
    decided = Applied(io_binding=io_binding, kv_cache="dynamic", dynamic_shapes=True,
                      decode_loop="greedy_onnx_kv_cache")
    return Prepared(runner, decided).fold(exported, opened)
