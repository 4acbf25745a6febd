from mlcbench.schema import Applied
from mlcbench.workers.interface import Prepared, Workflow
from mlcbench.workers.decode.hf_generate import HFGenerateRunner


class Eager(Workflow):
    def compile_module(self, module, inputs, ctx):
        return Prepared(module)

    def prepare_llm(self, model, ctx):
        return Prepared(HFGenerateRunner(model, disable_compile=True),
                        Applied(decode_loop="hf_generate", kv_cache="dynamic", dynamic_shapes=True))
