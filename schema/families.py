"""The model families mlcbench knows beyond reading their dims: one row each, the one place that says what a family
needs (CONTRIBUTING.md, "Adding a model family"). A config.json of another model_type still runs through Hugging
Face's own classes (eager, torch.compile, ...); its weights are then not counted (no bytes, no % of the decode bound)
and the compiled decode step refuses it."""

from typing import Literal, Optional

from mlcbench.schema.base import StrictModel


class ModelFamily(StrictModel):
    # Hugging Face's model_type (config.json) and causal-LM class
    model_type: str
    architecture: str
    # where its q/k/v projections have biases: always (Qwen2, whatever its config says), or where the config's
    # attention_bias says so
    qkv_bias: Literal["always", "attention_bias"] = "attention_bias"
    # the output projection has a bias where attention_bias says so (Llama, Mistral); never (Qwen2)
    o_bias_from_attention_bias: bool = True
    # the config field counting a layer's experts (mixture of experts); None: dense
    experts_field: Optional[str] = None
    # workers/decode/static_llama.py implements its decoder layer: torch_compile_decode and handtuned_decode run it
    static_decode: bool = True


# Llama-style decoders (RMSNorm, gated MLP, grouped-query attention), dense or with Mixtral's experts: the byte
# formulas of ModelInfo count each of these layouts
FAMILIES: dict[str, ModelFamily] = {family.model_type: family for family in (
    ModelFamily(model_type="llama", architecture="LlamaForCausalLM"),
    ModelFamily(model_type="mistral", architecture="MistralForCausalLM"),
    ModelFamily(model_type="qwen2", architecture="Qwen2ForCausalLM", qkv_bias="always",
                o_bias_from_attention_bias=False),
    ModelFamily(model_type="mixtral", architecture="MixtralForCausalLM", experts_field="num_local_experts",
                static_decode=False),
)}

STATIC_DECODE_ARCHITECTURES = tuple(family.architecture for family in FAMILIES.values() if family.static_decode)
