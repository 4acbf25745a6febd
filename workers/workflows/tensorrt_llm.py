"""TensorRT-LLM's LLM API on a local Hugging Face folder (our random-weight model saved once per model, precision
and seed, or job.model_path). 0.18 builds TensorRT engines for the job's batch and lengths; 1.x runs its PyTorch
backend with CUDA graphs. Constructing the LLM (the build) is the compile cost. Prompts go in as token ids.

It returns no logits cheaply (generation logits need an engine built to gather them) and takes no given tokens, so
correctness compares its greedy tokens only (TensorRTLLMRunner.no_teacher_forcing)."""

import time

import torch

from mlcbench.schema import Applied
from mlcbench.schema.results import Setting
from mlcbench.schema.options import NoOptions
from mlcbench.workers.interface import CausalLM, Generation, LLMRunner, Prepared, Workflow, WorkflowContext, require
from mlcbench.workers.stacks.trt_settings import version_tuple

DTYPES = {torch.float16: "float16", torch.bfloat16: "bfloat16", torch.float32: "float32"}
CUDA_GRAPH_BATCH_SIZES = [1, 4, 16, 64]
KV_CACHE_FRACTION = 0.5  # of the free GPU memory; the default 0.9 would make peak-memory figures meaningless


class TensorRTLLMRunner:
    no_teacher_forcing = ("TensorRT-LLM's LLM API takes whole prompts and hands back whole sequences: no step can be "
                          "fed a given token, and it returns no logits unless its engine is built to gather them")

    def __init__(self, llm, sampling_params_class, eos_token_id: int):
        self.llm = llm
        self.sampling_params_class = sampling_params_class
        self.eos_token_id = eos_token_id

    def generate(self, input_ids, max_new_tokens, with_logits=False, on_token=None, forced_tokens=None):
        if forced_tokens is not None:
            raise ValueError(self.no_teacher_forcing)
        # greedy (no temperature/top-k/top-p given); end_id is required without a tokenizer, ignore_eos fixes the length
        params = self.sampling_params_class(max_tokens=max_new_tokens, ignore_eos=True, end_id=self.eos_token_id,
                                            pad_id=self.eos_token_id)
        outputs = self.llm.generate(input_ids.tolist(), params, use_tqdm=False)
        tokens = torch.tensor([out.outputs[0].token_ids for out in outputs], dtype=torch.long)
        # on_token is never called: generate() hands back whole sequences, per-token times are not observable here
        return Generation(tokens=tokens.to(input_ids.device))

    def __del__(self):
        shutdown = getattr(self.llm, "shutdown", None)
        if shutdown is not None:
            shutdown()  # its executor holds the GPU memory and worker processes: free them for the next job


class TensorRTLLM(Workflow[NoOptions]):
    def prepare_llm(self, model: CausalLM, ctx: WorkflowContext[NoOptions]) -> Prepared[LLMRunner]:
        tensorrt_llm = require("tensorrt_llm")
        from tensorrt_llm import LLM, SamplingParams

        job = ctx.job
        folder = job.model_path or str(self._saved(model, ctx))
        eos_token_id = model.config.eos_token_id
        model.to("meta")  # TensorRT-LLM loads its own copy: do not keep ours in GPU memory beside it
        options = dict(model=folder, skip_tokenizer_init=True, dtype=DTYPES[ctx.dtype])
        from tensorrt_llm.llmapi import KvCacheConfig

        options["kv_cache_config"] = KvCacheConfig(free_gpu_memory_fraction=KV_CACHE_FRACTION)
        notes: dict[str, Setting]
        if version_tuple(tensorrt_llm.__version__) < (1, 0):
            from tensorrt_llm import BuildConfig

            options["build_config"] = BuildConfig(max_batch_size=job.batch_size, max_input_len=job.input_len,
                                                  max_seq_len=job.input_len + job.output_len)
            backend = "tensorrt engines"
            notes = {"max_batch_size": job.batch_size, "max_input_len": job.input_len,
                     "max_seq_len": job.input_len + job.output_len}
        else:
            from tensorrt_llm.llmapi import CudaGraphConfig

            batch_sizes = sorted(set(CUDA_GRAPH_BATCH_SIZES) | {job.batch_size})
            options["cuda_graph_config"] = CudaGraphConfig(batch_sizes=batch_sizes)
            backend = "tensorrt_llm pytorch"
            notes = {"cuda_graph_batch_sizes": ",".join(map(str, batch_sizes))}
        begin = time.perf_counter()
        llm = LLM(**options)
        notes.update(tensorrt_llm=tensorrt_llm.__version__, build_s=round(time.perf_counter() - begin, 3),
                     kv_cache_free_gpu_memory_fraction=KV_CACHE_FRACTION, model_folder=folder,
                     sampling="greedy, ignore_eos", token_times="not observable (no streaming)")
        return Prepared(TensorRTLLMRunner(llm, SamplingParams, eos_token_id),
                        Applied(backend=backend, decode_loop="tensorrt_llm", kv_cache="paged", dynamic_shapes=True),
                        notes=notes)

    @staticmethod
    def _saved(model, ctx):
        """The model as a Hugging Face folder in the env cache, written once per model, precision and seed."""
        job = ctx.job
        folder = ctx.cache_dir / "hf" / f"{job.model}-{job.precision}-seed{job.seed}"
        if not folder.exists():
            partial = folder.with_name(folder.name + ".partial")  # an interrupted save must not pass for a model
            model.save_pretrained(partial)
            partial.rename(folder)
        return folder
