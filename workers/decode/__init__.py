"""Decode loops that turn a model (or a compiled forward) into fixed-length greedy generations, and what they
return."""

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Optional, Protocol

if TYPE_CHECKING:
    import torch


@dataclass
class Generation:
    tokens: "torch.Tensor"  # [batch, new tokens]
    step_logits: Optional["torch.Tensor"] = None  # [batch, new tokens, vocab]: the logits each token was chosen from


class LLMRunner(Protocol):
    def generate(self, input_ids: "torch.Tensor", max_new_tokens: int, with_logits: bool = False,
                 on_token: Optional[Callable[[], None]] = None) -> Generation:
        """Exactly max_new_tokens greedy tokens per row (EOS ignored); on_token is called as each step's token is ready."""
