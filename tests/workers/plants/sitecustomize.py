"""Bugs planted in a worker process that a real `mlcbench sweep` starts (tests/workers/test_planted_cli.py puts this
folder on PYTHONPATH): never in the product code, never in eager's reference. MLCBENCH_TEST_PLANTS maps a suite's model
names to the bug its compiled path gets (JSON); every torch_compile_decode cell runs its decode loop uncompiled
(Inductor on this CPU takes ~90 s a shape: the bugs are in the code it would trace). Installed when the worker imports
its measurement code; an orchestrator process, which never does, imports nothing of the worker's."""

import importlib.abc
import importlib.util
import json
import os
import sys

PLANTS = json.loads(os.environ.get("MLCBENCH_TEST_PLANTS", "{}"))
TRIGGER = "mlcbench.workers.measurement.llm"
current = {"plant": None}  # the bug of the job being prepared


def plant_attention(module, plant):
    """The StaticLlama's attention made wrong in the ways a trained model's attention shows and random weights hid."""
    import torch

    if plant == "rope_minus_one":  # a one-token step rotates position p as p - 1
        forward = module.forward

        def shifted(ids, positions):
            if ids.shape[1] > 1:
                return forward(ids, positions)
            cos, sin = module.cos, module.sin
            module.cos, module.sin = cos.roll(1, 0), sin.roll(1, 0)
            try:
                return forward(ids, positions)
            finally:
                module.cos, module.sin = cos, sin
        module.forward = shifted
    elif plant == "rope_theta":  # the tables of RoPE theta 10,000 (no scaling), not the config's
        allocate = module.allocate_cache

        def wrong_tables(batch, length):
            allocate(batch, length)
            head_dim = module.layers[0].head_dim
            inverse = 1.0 / 10000.0 ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
            angles = torch.arange(module.cos.shape[0], dtype=torch.float32)[:, None] * inverse[None, :]
            angles = torch.cat([angles, angles], dim=-1)
            module.cos, module.sin = angles.cos().to(module.cos.dtype), angles.sin().to(module.sin.dtype)
        module.allocate_cache = wrong_tables
    elif plant == "softmax_scale":  # 1/sqrt(d + 1) for 1/sqrt(d)
        for layer in module.layers:
            layer.scale = (layer.head_dim + 1) ** -0.5


def install():
    from mlcbench.workers.decode import compiled_step
    from mlcbench.workers.decode.hf_generate import HFGenerateRunner
    from mlcbench.workers.decode.static_llama import StaticLlama
    from mlcbench.workers.interface import Generation
    from mlcbench.workers.measurement.llm import LLM
    from mlcbench.workers.measurement.synthetic import Synthetic

    compiled_step.compile_for_warm_start = lambda function, **options: function

    prepare_llm = LLM.prepare

    def prepare_planted(self, workflow, ctx):
        current["plant"] = PLANTS.get(ctx.job.model)
        return prepare_llm(self, workflow, ctx)
    LLM.prepare = prepare_planted

    init = StaticLlama.__init__

    def init_planted(self, hf_model, *args, **kwargs):
        init(self, hf_model, *args, **kwargs)
        self.planted_hf_model = hf_model  # not a module attribute nn.Module registers: a plain reference
        plant_attention(self, current["plant"])
    StaticLlama.__init__ = init_planted

    generate = compiled_step.CompiledStepRunner.generate

    def generate_planted(self, input_ids, max_new_tokens, with_logits=False, on_token=None, forced_tokens=None):
        plant = current["plant"]
        if plant == "returns_reference" and with_logits:  # asked for logits (the check), it hands back eager's
            return HFGenerateRunner(self.model.planted_hf_model, disable_compile=True).generate(
                input_ids, max_new_tokens, with_logits=True, forced_tokens=forced_tokens)
        if plant == "free_running_feed" and forced_tokens is None and max_new_tokens > 2:
            # running free, the loop feeds step 2 a wrong token (its own choice of step 1, plus one)
            own = generate(self, input_ids, max_new_tokens)
            fed = own.tokens.clone()
            fed[:, 1] = (fed[:, 1] + 1) % self.model.embed.shape[0]
            return generate(self, input_ids, max_new_tokens, with_logits, on_token, forced_tokens=fed)
        timed = forced_tokens is None and not with_logits and on_token is None and max_new_tokens > 2
        if plant == "eager_plus_epsilon" and with_logits:  # eager's logits, each moved by 1e-6
            eager = HFGenerateRunner(self.model.planted_hf_model, disable_compile=True).generate(
                input_ids, max_new_tokens, with_logits=True, forced_tokens=forced_tokens)
            return Generation(eager.tokens, eager.step_logits.float() + 1e-6)
        if plant == "timed_wrong_last_token" and timed:  # the timed calls' last token, one id off
            own = generate(self, input_ids, max_new_tokens)
            tokens = own.tokens.clone()
            tokens[:, -1] = (tokens[:, -1] + 1) % self.model.embed.shape[0]
            return Generation(tokens, own.step_logits)
        if plant == "stale_outputs" and timed:  # the first timed-style call's output, handed back ever after
            if not hasattr(self, "planted_stale"):
                self.planted_stale = generate(self, input_ids, max_new_tokens)
            return self.planted_stale
        return generate(self, input_ids, max_new_tokens, with_logits, on_token, forced_tokens)
    compiled_step.CompiledStepRunner.generate = generate_planted

    prepare_synthetic = Synthetic.prepare

    def prepare_synthetic_planted(self, workflow, ctx):
        prepared = prepare_synthetic(self, workflow, ctx)
        plant, runner = PLANTS.get(ctx.job.model), prepared.runner
        if plant == "wrong_after_first_call":
            calls = []

            def wrong_after_first(*inputs):
                calls.append(None)
                output = runner(*inputs)
                return output if len(calls) == 1 else output * 1.5
            prepared.runner = wrong_after_first
        elif plant == "stale_outputs":  # the first call's output, handed back ever after, computing nothing
            first = []

            def stale(*inputs):
                if not first:
                    first.append(runner(*inputs).clone())
                return first[0]
            prepared.runner = stale
        elif plant == "runs_eager":  # compiled, then never run: eager's module answers every call
            prepared.runner = self.model
        return prepared
    Synthetic.prepare = prepare_synthetic_planted


class _AfterImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Installs the plants once TRIGGER (the worker's LLM measurement) has been imported."""

    def find_spec(self, name, path=None, target=None):
        if name != TRIGGER:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        self.loader = spec.loader
        spec.loader = self
        return spec

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        install()


sys.meta_path.insert(0, _AfterImport())
