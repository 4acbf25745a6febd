from mlcbench.workers.interface import Workflow
from mlcbench.workers.decode.hf_generate import HFGenerateRunner


class Eager(Workflow):
    def compile_module(self, module, inputs, ctx):
        return module

    def prepare_llm(self, model, ctx):
        ctx.apply(decode_loop="hf_generate", kv_cache="dynamic", dynamic_shapes=True)
        return HFGenerateRunner(model, disable_compile=True)
