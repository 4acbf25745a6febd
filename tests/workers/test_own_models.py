"""A suite's own LLMs, built from a Hugging Face config.json: their byte counts follow the config, and the compiled
decode loop serves the Llama family as configs describe it (checked against eager) and refuses anything else."""

import json
from pathlib import Path

import pytest
import torch

from mlcbench.schema import MODELS, JobSpec
from mlcbench.schema.hf_config import llm_from_hf_config
from mlcbench.workers.decode.compiled_step import CompiledStepRunner, decode_step, prefill
from mlcbench.workers.decode.hf_generate import HFGenerateRunner
from mlcbench.workers.decode.static_llama import StaticLlama
from mlcbench.workers.models import llm as llm_models
from mlcbench.workers.runner import run_job

CONFIGS = Path(__file__).resolve().parents[2] / "benchmarks" / "suites" / "configs"
TINY = dict(hidden_size=64, intermediate_size=160, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            vocab_size=512, max_position_embeddings=256, bos_token_id=1, eos_token_id=2)


def config(name: str, **overrides) -> dict:
    return {**json.loads((CONFIGS / name / "config.json").read_text()), **overrides}


def job(info, workflow="torch_compile_decode", **overrides) -> JobSpec:
    return JobSpec(**{"model": "own", "model_info": info, "workflow": workflow, "precision": "fp32",
                      "batch_size": 2, "input_len": 12, "output_len": 6, "device": "cpu", "warmup": 0, "repeats": 1,
                      **overrides})


def hf_model(settings: dict):
    info = llm_from_hf_config(settings, "fp32")
    return info, llm_models.build(info, job(info), torch.float32, torch.device("cpu"))


OWN = {
    "llama3 (GQA, llama3 RoPE scaling, tied embeddings, head_dim apart)": config("llama3-tiny"),
    "qwen2 (q/k/v biases)": config("qwen2-tiny"),
    "llama with attention and MLP biases": {"model_type": "llama", "architectures": ["LlamaForCausalLM"],
                                            "attention_bias": True, "mlp_bias": True, **TINY},
    "mistral (sliding window wider than the sequence)": {"model_type": "mistral", "sliding_window": 64, **TINY},
    "mixtral (8 experts, 2 per token)": {"model_type": "mixtral", "num_local_experts": 8, "num_experts_per_tok": 2,
                                         **TINY},
}


@pytest.mark.parametrize("settings", OWN.values(), ids=OWN.keys())
def test_the_parameter_count_from_the_config_is_the_models(settings):
    info, model = hf_model(settings)
    assert info.parameter_count() == sum(parameter.numel() for parameter in model.parameters())


def test_the_catalog_llama_counts_as_before_and_an_unknown_layout_has_no_bound():
    # Llama-Only formulas gave these; the general ones must too (stored % of bound stays comparable)
    assert MODELS["tinyllama-1.1b"].parameter_count() == 1_100_048_384
    assert MODELS["llama2-7b"].decode_step_bytes("fp16", 1, 48) == 13_239_853_056
    gpt2 = llm_from_hf_config({"model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 4, "vocab_size": 512,
                               "n_positions": 128})
    assert gpt2.max_position_embeddings == 128 and gpt2.decode_step_bytes("fp32", 1, 16) is None


def test_a_tied_lm_head_is_read_whole_and_only_the_routed_experts_count():
    untied = llm_from_hf_config(config("llama3-tiny", tie_word_embeddings=False))
    tied = llm_from_hf_config(config("llama3-tiny"))
    # tied: one table less stored, but the LM head reads it whole each step, so the step reads the same bytes
    assert untied.parameter_count() - tied.parameter_count() == 512 * 64
    assert untied.decode_step_bytes("fp32", 1, 16) == tied.decode_step_bytes("fp32", 1, 16)
    moe = llm_from_hf_config(OWN["mixtral (8 experts, 2 per token)"])
    dense = llm_from_hf_config({"model_type": "llama", **TINY})
    expert = 3 * 64 * 160
    assert moe.decode_step_bytes("fp32", 1, 16) - dense.decode_step_bytes("fp32", 1, 16) \
        == 4 * 2 * (expert + 64 * 8)  # per layer: a second routed expert and the router


DECODABLE = {name: settings for name, settings in OWN.items() if not name.startswith("mixtral")}


@pytest.mark.parametrize("settings", DECODABLE.values(), ids=DECODABLE.keys())
@torch.no_grad()
def test_the_static_llama_reproduces_hf_logits_for_the_llama_family(settings):
    info, model = hf_model(settings)
    prompt = torch.randint(3, info.vocab_size, (2, 12), generator=torch.Generator().manual_seed(7))
    reference = HFGenerateRunner(model, disable_compile=True).generate(prompt, 7, with_logits=True)
    runner = CompiledStepRunner(StaticLlama(model, 19), [2], "default")
    runner.prefill, runner.step = prefill, decode_step  # the model's math, uncompiled
    out = runner.generate(prompt, 7, with_logits=True)
    torch.testing.assert_close(out.step_logits, reference.step_logits, rtol=1e-4, atol=1e-4)
    assert torch.equal(out.tokens, reference.tokens)


@pytest.mark.parametrize("settings, reason", [
    ({"model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 4, "vocab_size": 512, "n_positions": 128},
     "architecture GPT2LMHeadModel is not implemented"),
    (OWN["mixtral (8 experts, 2 per token)"], "architecture MixtralForCausalLM is not implemented"),
    ({"model_type": "mistral", **TINY, "sliding_window": 8},
     "MistralForCausalLM: sliding-window attention (8 positions) over 18 positions is not implemented"),
    ({"model_type": "llama", **TINY, "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}},
     "LlamaForCausalLM: RoPE type 'dynamic' is not implemented"),
])
def test_compiled_decode_refuses_what_it_does_not_implement_naming_the_architecture(tmp_path, settings, reason):
    result = run_job(job(llm_from_hf_config(settings, "fp32")), tmp_path)
    assert result.status == "unsupported" and reason in result.reason, (result.reason, result.error)


def test_an_architecture_outside_the_llama_family_runs_eager_through_hf(tmp_path):
    gpt2 = llm_from_hf_config({"model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 4, "vocab_size": 512,
                               "n_positions": 128}, "fp32")
    result = run_job(job(gpt2, workflow="eager", batch_size=1), tmp_path)
    assert result.status == "ok", result.error
    assert result.metrics.output_tokens == 6


def test_two_configs_under_one_name_never_share_compiled_graphs():
    from mlcbench.workers.stacks.inductor_cache import job_shape

    llama = llm_from_hf_config(config("llama3-tiny"), "fp32")
    other = llm_from_hf_config(config("llama3-tiny", rms_norm_eps=1e-6), "fp32")
    assert job_shape(job(llama)) != job_shape(job(other))
