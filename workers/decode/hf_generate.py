"""Hugging Face generate() as an LLMRunner: the decode loop shared by the eager and torch.compile workflows."""

from typing import Any, Callable, Optional

import torch

from mlcbench.workers.decode import Generation


class _TokenClock:
    """A generate() streamer that calls back once per new token (the first put() carries the prompt)."""

    def __init__(self, on_token: Callable[[], None]):
        self._on_token = on_token
        self._prompt_seen = False

    def put(self, value: torch.Tensor) -> None:
        if self._prompt_seen:
            self._on_token()
        self._prompt_seen = True

    def end(self) -> None:
        pass


class HFGenerateRunner:
    def __init__(self, model: Any, **generate_kwargs: Any):
        self.model = model
        self.generate_kwargs = generate_kwargs

    def generate(self, input_ids: torch.Tensor, max_new_tokens: int, with_logits: bool = False,
                 on_token: Optional[Callable[[], None]] = None) -> Generation:
        eos = self.model.config.eos_token_id  # Llama 3 declares several
        out = self.model.generate(
            input_ids,
            attention_mask=torch.ones_like(input_ids),
            do_sample=False,
            max_new_tokens=max_new_tokens,
            min_new_tokens=max_new_tokens,  # random weights hit EOS at random: force the length
            pad_token_id=eos[0] if isinstance(eos, list) else eos,
            return_dict_in_generate=True,
            output_logits=with_logits,
            streamer=_TokenClock(on_token) if on_token else None,
            **self.generate_kwargs,
        )
        tokens = out.sequences[:, input_ids.shape[1]:]
        return Generation(tokens=tokens, step_logits=torch.stack(out.logits, dim=1) if with_logits else None)
