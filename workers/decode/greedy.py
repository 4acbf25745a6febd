"""Greedy decoding without a KV cache over any forward(input_ids) -> logits callable: every step runs the whole
sequence so far. For compiled forwards that cannot carry a cache (Torch-TensorRT AOT, torchax)."""

from typing import Callable, Optional

import torch

from mlcbench.workers.decode import Generation


class GreedyRunner:
    def __init__(self, forward: Callable[[torch.Tensor], torch.Tensor], eos_token_id: Optional[int] = None,
                 sync: Optional[Callable[[torch.Tensor], None]] = None):
        self.forward = forward
        # generate()'s reference forbids EOS until max_new_tokens (min_new_tokens): do the same so tokens match
        self.eos_token_id = eos_token_id
        # blocks until a token is computed, for forwards that run outside torch's CUDA stream (per-token timing)
        self.sync = sync

    def generate(self, input_ids: torch.Tensor, max_new_tokens: int, with_logits: bool = False,
                 on_token: Optional[Callable[[], None]] = None) -> Generation:
        ids = input_ids
        step_logits = []
        for _ in range(max_new_tokens):
            logits = self.forward(ids)[:, -1, :].float()  # generate() also picks tokens from fp32 logits
            if with_logits:
                step_logits.append(logits)
            scores = logits
            if self.eos_token_id is not None:
                scores = logits.clone()
                scores[:, self.eos_token_id] = float("-inf")
            ids = torch.cat([ids, scores.argmax(dim=-1, keepdim=True).to(ids.dtype)], dim=1)
            if on_token is not None:
                if self.sync is not None:
                    self.sync(ids)
                on_token()
        tokens = ids[:, input_ids.shape[1]:]
        return Generation(tokens=tokens, step_logits=torch.stack(step_logits, dim=1) if with_logits else None)


class LogitsOnly(torch.nn.Module):
    """A causal LM as forward(input_ids) -> logits, no cache: a graph torch.export and TensorRT take as is."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids, use_cache=False).logits
