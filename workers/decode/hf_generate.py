"""Hugging Face generate() as an LLMRunner: the decode loop shared by the eager and torch.compile workflows."""

from typing import Any, Callable, Optional

import torch

from mlcbench.workers.interface import Generation


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


def _teacher_forcing(forced_tokens: torch.Tensor, prompt_len: int):
    """A logits processor, last in generate()'s list, that notes generate()'s own greedy choice (the argmax of the
    scores the earlier processors left: what do_sample=False picks) and then leaves only the forced token. The
    model's forward, compiled or not, is untouched; only which token it is fed next changes."""
    from transformers import LogitsProcessor

    class TeacherForcing(LogitsProcessor):
        def __init__(self):
            self.chosen: list[torch.Tensor] = []

        def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
            step = input_ids.shape[1] - prompt_len
            self.chosen.append(scores.argmax(dim=-1))
            forced = forced_tokens[:, step:step + 1].to(scores.device)
            return torch.full_like(scores, float("-inf")).scatter_(1, forced, 0.0)

    return TeacherForcing()


class HFGenerateRunner:
    def __init__(self, model: Any, **generate_kwargs: Any):
        self.model = model
        self.generate_kwargs = generate_kwargs

    def generate(self, input_ids: torch.Tensor, max_new_tokens: int, with_logits: bool = False,
                 on_token: Optional[Callable[[], None]] = None,
                 forced_tokens: Optional[torch.Tensor] = None) -> Generation:
        forcing = None if forced_tokens is None else _teacher_forcing(forced_tokens, input_ids.shape[1])
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
            **({"logits_processor": [forcing]} if forcing else {}),
            **self.generate_kwargs,
        )
        tokens = out.sequences[:, input_ids.shape[1]:]
        if forcing is not None and forced_tokens is not None:
            if not torch.equal(tokens.cpu(), forced_tokens.cpu()):
                raise RuntimeError("generate() did not feed the forced tokens")
            tokens = torch.stack(forcing.chosen, dim=1)
        return Generation(tokens=tokens, step_logits=torch.stack(out.logits, dim=1) if with_logits else None)
