"""The model families' table is what every place that asks reads: the byte formulas' reading of a config, and the
architectures the compiled decode step implements."""

import pytest

from mlcbench.schema.hf_config import llm_from_hf_config
from mlcbench.schema.families import FAMILIES, STATIC_DECODE_ARCHITECTURES

DIMS = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100,
        "intermediate_size": 128}


@pytest.mark.parametrize("model_type", FAMILIES)
def test_a_family_s_config_is_counted_with_its_biases_and_experts(model_type):
    family = FAMILIES[model_type]
    config = {"model_type": model_type, **DIMS, "attention_bias": False, "num_local_experts": 4,
              "num_experts_per_tok": 2}
    info = llm_from_hf_config(config)
    assert info.weights_counted and info.parameter_count() is not None
    assert info.qkv_bias == (family.qkv_bias == "always")
    assert info.num_experts == (4 if family.experts_field else 0)
    biased = llm_from_hf_config({**config, "attention_bias": True})
    assert biased.qkv_bias and biased.o_bias == family.o_bias_from_attention_bias


def test_a_model_type_outside_the_table_runs_uncounted():
    info = llm_from_hf_config({"model_type": "gpt2", **DIMS, "attention_bias": True})
    assert not info.weights_counted and info.parameter_count() is None and info.qkv_bias and info.o_bias


def test_the_compiled_decode_step_implements_the_families_the_table_says():
    from mlcbench.workers.decode import static_llama

    assert static_llama.ARCHITECTURES == STATIC_DECODE_ARCHITECTURES
    assert "MixtralForCausalLM" not in STATIC_DECODE_ARCHITECTURES and "LlamaForCausalLM" in STATIC_DECODE_ARCHITECTURES
