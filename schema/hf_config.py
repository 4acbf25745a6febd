"""A suite's own LLM from its Hugging Face config.json: the dims mlcbench reads, under the names configs give them, and
the checks that a config describes a model that can be built (each failure names the field), made before anything is
planned."""

from typing import Any, Optional

from mlcbench.schema.catalog import ModelInfo
from mlcbench.schema.families import FAMILIES

_HF_DTYPES = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}
# the names some configs give the same dims (GPT-2 style, OPT, MPT); Hugging Face maps them with attribute_map
_DIM_NAMES = {
    "hidden_size": ("hidden_size", "n_embd", "d_model"),
    "num_hidden_layers": ("num_hidden_layers", "n_layer", "num_layers", "n_layers"),
    "num_attention_heads": ("num_attention_heads", "n_head", "num_heads", "n_heads"),
    "intermediate_size": ("intermediate_size", "n_inner", "ffn_dim"),
    "max_position_embeddings": ("max_position_embeddings", "n_positions", "max_seq_len"),
    "vocab_size": ("vocab_size",),
}
# transformers' rotary embedding kinds (modeling_rope_utils.ROPE_INIT_FUNCTIONS)
ROPE_TYPES = ("default", "linear", "dynamic", "yarn", "longrope", "llama3")


def _dim(config: dict[str, Any], name: str) -> Optional[int]:
    found = (config.get(alias) for alias in _DIM_NAMES[name])
    return next((value for value in found if isinstance(value, int) and not isinstance(value, bool)), None)


class ConfigError(ValueError):
    """A Hugging Face config that cannot describe a decoder-only LLM; the message names the field."""


def llm_from_hf_config(config: dict[str, Any], precision: Optional[str] = None) -> ModelInfo:
    """A suite's own LLM from its config.json (as a dict): the dims the byte counts need, and the config itself for
    the worker. The precision is the suite's, else the config's dtype, else bf16."""
    model_type = config.get("model_type")
    if not isinstance(model_type, str):
        raise ConfigError("config.json has no model_type (a Hugging Face model config names it)")
    text = config.get("text_config")
    dims = text if isinstance(text, dict) else config
    required = ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size")
    missing = [name for name in required if _dim(dims, name) is None]
    if missing:
        raise ConfigError(f"config.json lacks {', '.join(missing)} (model_type {model_type!r}: not a decoder "
                          f"whose dims mlcbench can read)")
    check_consistent(dims)
    hidden, layers, heads, vocab = (_dim(dims, name) or 0 for name in required)
    dtype = _HF_DTYPES.get(str(config.get("dtype") or config.get("torch_dtype")))
    family = FAMILIES.get(model_type)
    attention_bias = bool(dims.get("attention_bias"))
    qkv_bias = (family is not None and family.qkv_bias == "always") or attention_bias
    experts = dims.get(family.experts_field) if family and family.experts_field else None
    return ModelInfo(
        kind="llm", default_precision=precision or dtype or "bf16",
        hidden_size=hidden, intermediate_size=_dim(dims, "intermediate_size") or 4 * hidden,
        num_hidden_layers=layers, num_attention_heads=heads,
        num_key_value_heads=dims.get("num_key_value_heads") or heads,
        vocab_size=vocab, max_position_embeddings=_dim(dims, "max_position_embeddings") or 0,
        head_dim=dims.get("head_dim"), tie_word_embeddings=bool(config.get("tie_word_embeddings", False)),
        qkv_bias=qkv_bias, o_bias=attention_bias and (family is None or family.o_bias_from_attention_bias),
        mlp_bias=bool(dims.get("mlp_bias")), num_experts=experts or 0,
        experts_per_token=(dims.get("num_experts_per_tok") or 0) if experts else 0,
        hf_config=config, weights_counted=family is not None,
    )


def check_consistent(dims: dict[str, Any]) -> None:
    """A ConfigError naming the first field that contradicts the others or cannot be built: sizes that are not
    positive, KV heads that do not divide the heads, heads that do not divide the hidden size (without a head_dim),
    a rope_scaling of a kind transformers does not know or with a factor that is not positive."""
    for name in ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size", "intermediate_size",
                 "max_position_embeddings"):
        value = _dim(dims, name)
        if value is not None and value < 1:
            raise ConfigError(f"{name} is {value}: it must be a positive whole number")
    heads, hidden = _dim(dims, "num_attention_heads") or 1, _dim(dims, "hidden_size") or 1
    for name in ("num_key_value_heads", "head_dim"):
        value = dims.get(name)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise ConfigError(f"{name} is {value!r}: it must be a positive whole number (or absent)")
    kv_heads = dims.get("num_key_value_heads")
    if kv_heads is not None and heads % kv_heads:
        raise ConfigError(f"num_key_value_heads {kv_heads} does not divide num_attention_heads {heads}: each KV head "
                          f"serves a whole group of query heads")
    if dims.get("head_dim") is None and hidden % heads:
        raise ConfigError(f"num_attention_heads {heads} does not divide hidden_size {hidden} (and no head_dim is "
                          f"given)")
    _check_rope_scaling(dims.get("rope_scaling"))


def _check_rope_scaling(scaling: Any) -> None:
    if scaling is None:
        return
    if not isinstance(scaling, dict):
        raise ConfigError(f"rope_scaling is {scaling!r}: expected a table with rope_type and factor, or null")
    kind = scaling.get("rope_type", scaling.get("type"))
    if kind not in ROPE_TYPES:
        raise ConfigError(f"rope_scaling.rope_type {kind!r} is not one transformers knows ({', '.join(ROPE_TYPES)})")
    factor = scaling.get("factor")
    if factor is None and kind == "default":
        return
    if not isinstance(factor, (int, float)) or isinstance(factor, bool) or factor <= 0:
        raise ConfigError(f"rope_scaling.factor is {factor!r}: it must be a positive number")
