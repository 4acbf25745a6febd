"""Decode loops that turn a model (or a compiled forward) into fixed-length greedy generations, and what they
return."""

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, ClassVar, Optional, Protocol

if TYPE_CHECKING:
    import torch


@dataclass
class Generation:
    # [batch, new tokens]: the token the loop itself chose at each step (fed to the next step unless forced_tokens
    # replaced it)
    tokens: "torch.Tensor"
    step_logits: Optional["torch.Tensor"] = None  # [batch, new tokens, vocab]: the logits each token was chosen from


class LLMRunner(Protocol):
    # why this loop cannot be fed given tokens (None: it can; its check is then teacher-forced)
    no_teacher_forcing: ClassVar[Optional[str]] = None

    def generate(self, input_ids: "torch.Tensor", max_new_tokens: int, with_logits: bool = False,
                 on_token: Optional[Callable[[], None]] = None,
                 forced_tokens: Optional["torch.Tensor"] = None) -> Generation:
        """Exactly max_new_tokens greedy tokens per row (EOS ignored); on_token is called as each step's token is ready.
        forced_tokens [batch, max_new_tokens]: step k+1 is fed forced_tokens[:, k] instead of the loop's own choice
        (teacher forcing: every step's logits follow the same prefix as the reference's); the loop's own choices are
        still what `tokens` returns."""
