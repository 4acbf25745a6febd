import torch

from mlcbench.schema import MODELS, JobSpec
from mlcbench.workers.models import llm
from mlcbench.workers.decode.greedy import GreedyRunner, LogitsOnly
from mlcbench.workers.decode.hf_generate import HFGenerateRunner


def _model_and_prompt(batch_size=2, input_len=8):
    job = JobSpec(model="llama-2layer", workflow="eager", precision="fp32", batch_size=batch_size,
                  input_len=input_len, device="cpu")
    info = MODELS[job.model]
    return llm.build(info, job, torch.float32, torch.device("cpu")), llm.prompt_ids(info, job, torch.device("cpu"))


@torch.no_grad()
def test_greedy_loop_matches_hf_generate_tokens_and_logits():
    model, prompt = _model_and_prompt()
    reference = HFGenerateRunner(model, disable_compile=True).generate(prompt, 12, with_logits=True)
    ticks = []
    ours = GreedyRunner(LogitsOnly(model), eos_token_id=model.config.eos_token_id).generate(
        prompt, 12, with_logits=True, on_token=lambda: ticks.append(1))
    assert ours.tokens.shape == (2, 12)
    assert torch.equal(ours.tokens, reference.tokens)
    torch.testing.assert_close(ours.step_logits, reference.step_logits, rtol=1e-4, atol=1e-4)
    assert len(ticks) == 12


@torch.no_grad()
def test_greedy_loop_never_emits_eos_and_keeps_exact_length():
    vocab, eos = 5, 2

    def always_eos(ids):  # EOS is the argmax everywhere; the runner must pick the runner-up and go on
        logits = torch.zeros(ids.shape[0], ids.shape[1], vocab)
        logits[..., eos] = 10.0
        logits[..., 4] = 1.0
        return logits

    out = GreedyRunner(always_eos, eos_token_id=eos).generate(torch.ones(3, 4, dtype=torch.long), 7)
    assert out.tokens.shape == (3, 7)
    assert (out.tokens == 4).all()
    assert out.step_logits is None
