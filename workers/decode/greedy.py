"""Greedy decoding over a step function. Without a KV cache (GreedyRunner, for compiled forwards that cannot carry
one: Torch-TensorRT AOT, torchax) every step runs the whole sequence so far; a cached step feeds only the new token."""

from typing import Callable, Optional

import torch

from mlcbench.workers.interface import Generation

# step(ids so far, ids not yet fed) -> logits [batch, vocab] of the last position: the prompt first, then each token
Step = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def greedy_decode(step: Step, input_ids: torch.Tensor, max_new_tokens: int, eos_token_id: Optional[int],
                  with_logits: bool = False, on_token: Optional[Callable[[], None]] = None,
                  sync: Optional[Callable[[torch.Tensor], None]] = None,
                  forced_tokens: Optional[torch.Tensor] = None) -> Generation:
    """Exactly max_new_tokens tokens: generate()'s reference forbids EOS until then (min_new_tokens), so this loop
    does too. `sync` blocks until a token is computed, for steps that run outside torch's CUDA stream. forced_tokens
    (on input_ids' device, its dtype) are fed in place of the loop's own choices (LLMRunner.generate)."""
    ids, new = input_ids, input_ids
    step_logits, chosen = [], []
    for index in range(max_new_tokens):
        logits = step(ids, new).float()  # generate() also picks tokens from fp32 logits
        if with_logits:
            step_logits.append(logits)
        scores = logits
        if eos_token_id is not None:
            scores = logits.clone()
            scores[:, eos_token_id] = float("-inf")
        choice = scores.argmax(dim=-1, keepdim=True).to(ids.dtype)
        chosen.append(choice)
        new = choice if forced_tokens is None else forced_tokens[:, index:index + 1]
        ids = torch.cat([ids, new], dim=1)
        if on_token is not None:
            if sync is not None:
                sync(ids)
            on_token()
    return Generation(tokens=torch.cat(chosen, dim=1),
                      step_logits=torch.stack(step_logits, dim=1) if with_logits else None)


class GreedyRunner:
    def __init__(self, forward: Callable[[torch.Tensor], torch.Tensor], eos_token_id: Optional[int] = None,
                 sync: Optional[Callable[[torch.Tensor], None]] = None):
        self.forward = forward
        self.eos_token_id = eos_token_id
        self.sync = sync

    def generate(self, input_ids: torch.Tensor, max_new_tokens: int, with_logits: bool = False,
                 on_token: Optional[Callable[[], None]] = None,
                 forced_tokens: Optional[torch.Tensor] = None) -> Generation:
        if forced_tokens is not None:
            forced_tokens = forced_tokens.to(input_ids.device, input_ids.dtype)
        return greedy_decode(lambda ids, _: self.forward(ids)[:, -1, :], input_ids, max_new_tokens,
                             self.eos_token_id, with_logits, on_token, self.sync, forced_tokens)


class LogitsOnly(torch.nn.Module):
    """A causal LM as forward(input_ids) -> logits, no cache: a graph torch.export and TensorRT take as is."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids, use_cache=False).logits
