"""A checkpoint whose tensors do not match its config.json fails with a reason that says which and how
(transformers' own error only points at a report in the log)."""

import json

from mlcbench.schema import MODELS, JobSpec
from mlcbench.workers.models.llm import llama_config
from mlcbench.workers.runner import run_job


def test_a_checkpoint_whose_tensors_do_not_match_its_config_names_one_and_both_shapes(tmp_path):
    from transformers import LlamaForCausalLM

    folder = tmp_path / "checkpoint"
    LlamaForCausalLM(llama_config(MODELS["llama-2layer"])).save_pretrained(folder)
    config = json.loads((folder / "config.json").read_text())
    config["intermediate_size"] *= 2
    (folder / "config.json").write_text(json.dumps(config))
    job = JobSpec(model="llama-2layer", workflow="eager", precision="fp32", batch_size=1, device="cpu", warmup=0,
                  repeats=1, output_len=2, model_path=str(folder))

    result = run_job(job, tmp_path / "cache")

    assert result.status == "failed"
    assert result.reason == (f"ValueError: the checkpoint {folder} does not match its config.json: 6 tensor(s) of "
                             f"another shape, model.layers.0.mlp.down_proj.weight [256, 704] in the checkpoint but "
                             f"[256, 1408] by the config; mend one or the other")
