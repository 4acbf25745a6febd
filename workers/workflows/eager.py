from mlcbench.workers.workflows.base import Workflow
from mlcbench.workers.decode.hf_generate import HFGenerateRunner


class Eager(Workflow):
    name = "eager"

    def compile_module(self, module, inputs, ctx):
        return module

    def prepare_llm(self, model, ctx):
        ctx.settings["decode_loop"] = "hf_generate"
        ctx.settings["cache"] = "dynamic"
        return HFGenerateRunner(model, disable_compile=True)
