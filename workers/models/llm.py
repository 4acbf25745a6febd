"""LLMs: built with seeded random weights directly on the target device from the catalog's Llama config or from a
suite's own Hugging Face config (ModelInfo.hf_config, any architecture AutoModelForCausalLM knows), or loaded from a
local Hugging Face checkpoint folder (job.model_path). Random weights get attention that a bug in it can move
(peaked_attention)."""

import copy
import math

import torch

from mlcbench.schema import JobSpec, ModelInfo
from mlcbench.workers.models import INPUT_SET_SEED_STEP


def llama_config(info: ModelInfo):
    from transformers import LlamaConfig

    return LlamaConfig(
        hidden_size=info.hidden_size,
        intermediate_size=info.intermediate_size,
        num_hidden_layers=info.num_hidden_layers,
        num_attention_heads=info.num_attention_heads,
        num_key_value_heads=info.num_key_value_heads,
        vocab_size=info.vocab_size,
        max_position_embeddings=info.max_position_embeddings,
        rope_theta=10000.0,
        rms_norm_eps=1e-5,
        hidden_act="silu",
        tie_word_embeddings=False,
        bos_token_id=1,
        eos_token_id=2,
    )


def hf_config(info: ModelInfo):
    """The transformers config of a suite's own model (its config.json, as read by the orchestrator)."""
    from transformers import AutoConfig

    assert info.hf_config is not None
    settings = copy.deepcopy(info.hf_config)  # transformers edits nested settings (rope_scaling) in place
    return AutoConfig.for_model(settings.pop("model_type"), **settings)


def build(info: ModelInfo, job: JobSpec, dtype: torch.dtype, device: torch.device) -> torch.nn.Module:
    from transformers import AutoModelForCausalLM, LlamaForCausalLM

    if job.model_path:
        # mismatched tensors are loaded as a report rather than raised (transformers' error only points at the log)
        model, loading = AutoModelForCausalLM.from_pretrained(job.model_path, dtype=dtype, output_loading_info=True,
                                                              ignore_mismatched_sizes=True)
        mismatched = sorted(loading.get("mismatched_keys") or ())
        if mismatched:
            name, stored, built = mismatched[0]
            raise ValueError(f"the checkpoint {job.model_path} does not match its config.json: {len(mismatched)} "
                             f"tensor(s) of another shape, {name} {list(stored)} in the checkpoint but "
                             f"{list(built)} by the config; mend one or the other")
        return model.to(device).eval()
    torch.manual_seed(job.seed)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)  # allocate in the target dtype: a 7B model in fp32 would need twice the memory
    try:
        with torch.device(device):
            if info.hf_config is None:
                model = LlamaForCausalLM(llama_config(info))
            else:
                model = AutoModelForCausalLM.from_config(hf_config(info), dtype=dtype)
    finally:
        torch.set_default_dtype(previous)
    peaked_attention(model)
    return model.eval()


# The spread (standard deviation) of the attention logits q.k/sqrt(d) that random weights are given: what a Llama of
# hidden size 4096 has at its own initialisation (0.02^2 x 4096). At a tiny model's initialisation attention is near
# uniform (0.02^2 x 64 = 0.03), and a RoPE position off by one, a wrong RoPE theta or softmax scale moved its logits
# less than bf16 rounding does; at this spread each fails the check in bf16 on the shipped tiny configs
# (tests/workers/test_planted_cli.py). Sharper attention saturates the softmax and hides the softmax scale again.
ATTENTION_LOGIT_SPREAD = 0.02 ** 2 * 4096


def peaked_attention(model: torch.nn.Module) -> None:
    """Scales each attention's q and k projections (weights and biases) of a randomly initialised model by one factor,
    so that its attention logits have the spread ATTENTION_LOGIT_SPREAD: a query or key element has standard
    deviation initializer_range x sqrt(hidden) on RMS-normalised input, and a logit has their product's variance
    summed over head_dim, divided by head_dim. A model already that peaked is left as it is. Eager and every
    workflow build the model the same way: they see the same weights."""
    config = model.config
    initializer_range, hidden = getattr(config, "initializer_range", None), getattr(config, "hidden_size", None)
    if initializer_range is None or hidden is None:  # an architecture whose config says neither: left as it is
        return
    spread = initializer_range ** 2 * hidden
    factor = math.sqrt(ATTENTION_LOGIT_SPREAD / spread)
    if factor <= 1:
        return
    with torch.no_grad():
        for module in model.modules():
            for name in ("q_proj", "k_proj"):
                projection = getattr(module, name, None)
                if isinstance(projection, torch.nn.Linear):
                    projection.weight.mul_(factor)
                    if projection.bias is not None:
                        projection.bias.mul_(factor)


def prompt_ids(info: ModelInfo, job: JobSpec, device: torch.device, input_set: int = 0) -> torch.Tensor:
    """Seeded random token ids, never the special ids 0-2 (unk, bos, eos); each input set its own."""
    generator = torch.Generator().manual_seed(job.seed + 1 + INPUT_SET_SEED_STEP * input_set)
    ids = torch.randint(3, info.vocab_size, (job.batch_size, job.input_len), generator=generator)
    return ids.to(device)
