"""The GPU and model catalogs (GPU figures from the vendors' datasheets: dense, no sparsity), as data both sides
read."""

from typing import Any, Literal, Mapping, Optional, get_args

from pydantic import Field, ValidationError

from mlcbench.schema.base import StrictModel, invalid
from mlcbench.schema.options import (HandtunedDecodeOptions, NoOptions, OnnxRuntimeOptions, Options, TensorrtOptions,
                                     TorchCompileDecodeOptions, TorchCompileOptions, TorchCompileStaticOptions)

ModelKind = Literal["synthetic", "llm"]


class GpuPeaks(StrictModel):
    """Dense peak rates (TFLOPS, no sparsity) and memory bandwidth of one GPU model."""

    name: str
    compute_capability: str
    sms: int
    memory_gb: float
    bandwidth_gbs: float
    fp16_fp32acc: float
    fp16_fp16acc: float
    bf16: float
    tf32: float
    fp32: Optional[float] = None

    def peak_tflops(self, precision: str, accumulation: str = "fp32") -> Optional[float]:
        if precision == "bf16":
            return self.bf16
        if precision == "fp16":
            return self.fp16_fp16acc if accumulation == "fp16" else self.fp16_fp32acc
        if precision == "fp32":
            # torch's default matmul precision for fp32 is full fp32 (no tf32), whose peak the catalog may not carry
            return self.fp32
        return None


GPUS: dict[str, GpuPeaks] = {
    "rtx4090": GpuPeaks(name="GeForce RTX 4090", compute_capability="8.9", sms=128, memory_gb=24,
                        bandwidth_gbs=1008, fp16_fp32acc=165.2, fp16_fp16acc=330.3, bf16=165.2, tf32=82.6,
                        fp32=82.6),
    "rtx5090": GpuPeaks(name="GeForce RTX 5090", compute_capability="12.0", sms=170, memory_gb=32,
                        bandwidth_gbs=1792, fp16_fp32acc=209.5, fp16_fp16acc=419, bf16=209.5, tf32=104.8,
                        fp32=104.8),
    "a100": GpuPeaks(name="A100 80GB SXM", compute_capability="8.0", sms=108, memory_gb=80,
                     bandwidth_gbs=2039, fp16_fp32acc=312, fp16_fp16acc=312, bf16=312, tf32=156, fp32=19.5),
    "h100": GpuPeaks(name="H100 SXM 80GB", compute_capability="9.0", sms=132, memory_gb=80,
                     bandwidth_gbs=3350, fp16_fp32acc=989, fp16_fp16acc=989, bf16=989, tf32=495, fp32=67),
    "h200": GpuPeaks(name="H200 SXM 141GB", compute_capability="9.0", sms=132, memory_gb=141,
                     bandwidth_gbs=4800, fp16_fp32acc=989, fp16_fp16acc=989, bf16=989, tf32=495, fp32=67),
    "l40s": GpuPeaks(name="L40S", compute_capability="8.9", sms=142, memory_gb=48,
                     bandwidth_gbs=864, fp16_fp32acc=362, fp16_fp16acc=362, bf16=362, tf32=183, fp32=91.6),
    "l4": GpuPeaks(name="L4", compute_capability="8.9", sms=58, memory_gb=24,
                   bandwidth_gbs=300, fp16_fp32acc=121, fp16_fp16acc=121, bf16=121, tf32=60, fp32=30.3),
}

# Substrings of the name NVML / torch report, most specific first ("L40S" before "L4").
_NAME_TO_TAG = [
    ("RTX 4090", "rtx4090"),
    ("RTX 5090", "rtx5090"),
    ("A100", "a100"),
    ("H100", "h100"),
    ("H200", "h200"),
    ("L40S", "l40s"),
    ("L4", "l4"),
]


def gpu_tag_for_name(device_name: str) -> Optional[str]:
    """Catalog key for a device name such as 'NVIDIA H100 80GB HBM3', or None when the GPU is not in the catalog."""
    upper = device_name.upper()
    for needle, tag in _NAME_TO_TAG:
        if needle in upper:
            return tag
    return None


class ModelInfo(StrictModel):
    """A benchmark model. Synthetic models are built from dims; LLMs from a Llama config (the catalog's), or from a
    Hugging Face config.json (`hf_config`, a suite's own model), whose weights the byte counts follow."""

    kind: ModelKind
    hidden_size: int = Field(ge=1)
    intermediate_size: int = Field(ge=1)
    default_precision: Literal["fp32", "fp16", "bf16"]
    # synthetic
    architecture: Optional[Literal["matmul", "matmul_relu", "ffn", "ffn_multilayer"]] = None
    depth: int = Field(default=1, ge=1)
    # llm
    num_hidden_layers: int = 0
    num_attention_heads: int = 0
    num_key_value_heads: int = 0
    vocab_size: int = 0
    max_position_embeddings: int = 0
    # None: hidden_size / num_attention_heads
    head_dim: Optional[int] = None
    tie_word_embeddings: bool = False
    # biases of the q/k/v projections, the output projection, the MLP's projections
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_bias: bool = False
    # mixture of experts: experts per layer (each of intermediate_size) and experts each token is routed to
    num_experts: int = 0
    experts_per_token: int = 0
    # the config.json a suite's own LLM is built from (random weights unless a checkpoint is given); None for the
    # catalog's models, which are built from the fields above
    hf_config: Optional[dict[str, Any]] = None
    # the weights are laid out as the formulas below count them (Llama-style decoder); False: bytes unknown
    weights_counted: bool = True

    @property
    def attention_head_dim(self) -> int:
        return self.head_dim or self.hidden_size // self.num_attention_heads

    def parameter_count(self) -> Optional[int]:
        """Every weight, or None where the layout is one the formulas do not know."""
        h, i = self.hidden_size, self.intermediate_size
        if self.kind == "synthetic":
            per_layer = h * i if self.architecture in ("matmul", "matmul_relu") else 2 * h * i
            return per_layer * self.depth
        if not self.weights_counted:
            return None
        experts = max(self.num_experts, 1)
        router = h * self.num_experts
        embeddings = self.vocab_size * h * (1 if self.tie_word_embeddings else 2)
        return self.num_hidden_layers * (self._attention() + experts * self._mlp() + router + 2 * h) + embeddings + h

    def _attention(self) -> int:
        h, q, kv = self.hidden_size, self.num_attention_heads * self.attention_head_dim, \
            self.num_key_value_heads * self.attention_head_dim
        return h * (q + 2 * kv) + q * h + (q + 2 * kv) * self.qkv_bias + h * self.o_bias

    def _mlp(self) -> int:
        h, i = self.hidden_size, self.intermediate_size
        return 3 * h * i + (2 * i + h) * self.mlp_bias

    def weight_bytes(self, precision: str) -> Optional[int]:
        """What the weights alone take at `precision`, or None where the layout is one the formulas do not know."""
        parameters = self.parameter_count()
        return None if parameters is None else parameters * _element_bytes(precision)

    def decode_step_bytes(self, precision: str, batch: int, context: int) -> Optional[int]:
        """What one LLM decode step must read at least: every weight but the embedding table (of which it reads only
        `batch` rows; a table tied to the LM head is read whole), of a mixture of experts only the experts one token
        is routed to, and the K and V of `context` positions per row in every layer. None where the weights' layout
        is not known, and for a synthetic model (no decode step)."""
        parameters = self.parameter_count()
        if parameters is None or self.kind == "synthetic":
            return None
        unread_embedding = 0 if self.tie_word_embeddings else self.vocab_size * self.hidden_size
        unread_experts = self.num_hidden_layers * (self.num_experts - self.experts_per_token) * self._mlp() \
            if self.num_experts else 0
        kv_cache = 2 * self.num_hidden_layers * self.num_key_value_heads * self.attention_head_dim * context * batch
        return (parameters - unread_embedding - unread_experts + kv_cache) * _element_bytes(precision)


def _element_bytes(precision: str) -> int:
    return 4 if precision == "fp32" else 2


def _synthetic(architecture: str, hidden: int, inter: int, precision: str, depth: int = 1) -> ModelInfo:
    return ModelInfo(kind="synthetic", architecture=architecture, hidden_size=hidden, intermediate_size=inter,
                     default_precision=precision, depth=depth)


def _llama(hidden: int, inter: int, layers: int, heads: int, kv_heads: int, max_pos: int, precision: str) -> ModelInfo:
    return ModelInfo(kind="llm", hidden_size=hidden, intermediate_size=inter, num_hidden_layers=layers,
                     num_attention_heads=heads, num_key_value_heads=kv_heads, vocab_size=32000,
                     max_position_embeddings=max_pos, default_precision=precision)


_SYNTHETIC_ARCHS = {"matmul": 1, "matmul-relu": 1, "ffn": 1, "ffn-multilayer": 8}
# Synthetic dims: the paper's two FFN shapes, plus a scaled-down set for the CPU smoke suite.
_DIM_SETS = {
    "tinyllama": (2048, 5632, "bf16"),
    "llama2": (4096, 11008, "fp16"),
    "small": (256, 704, "fp32"),
}

MODELS: dict[str, ModelInfo] = {
    f"{arch}-{dims}": _synthetic(arch.replace("-", "_"), hidden, inter, precision,
                                  depth if dims != "small" else 4 if depth > 1 else 1)
    for arch, depth in _SYNTHETIC_ARCHS.items()
    for dims, (hidden, inter, precision) in _DIM_SETS.items()
}
MODELS.update({
    "tinyllama-1.1b": _llama(2048, 5632, 22, 32, 4, 2048, "bf16"),
    "llama2-7b": _llama(4096, 11008, 32, 32, 32, 4096, "fp16"),
    # Same architecture as tinyllama, two small layers: the LLM code path in seconds on a CPU.
    "llama-2layer": _llama(256, 704, 2, 8, 2, 512, "fp32"),
})


class TypicalCompile(StrictModel):
    """What a workflow's compile into an empty cache typically takes, where the store has no history of the cell
    (the sweep's plan and its schedule): seconds, and for an LLM seconds more per billion parameters."""

    seconds: float = Field(ge=0)
    per_billion_s: float = Field(default=0.0, ge=0)

    def for_model(self, parameters_b: float) -> float:
        return self.seconds + self.per_billion_s * parameters_b


class WorkflowInfo(StrictModel):
    """One workflow: the one place its name, what it is, what it runs and what it needs are written. Its code is the
    one Workflow subclass of mlcbench.workers.workflows.<name>."""

    name: str
    description: str
    # per model kind it cannot run, the reason (stored as the `unsupported` result's reason without starting a worker)
    why_not: dict[ModelKind, str] = {}
    # top-level packages it imports; checked (without importing) before any model is built
    requires: tuple[str, ...] = ()
    # it takes over process-wide state, so its jobs never share a worker process with other workflows' jobs:
    # torchax renames PyTorch's privateuse1 backend (later torch.compile jobs in that process fail), XLA/PJRT and
    # TensorRT-LLM keep their own device allocators
    own_worker: bool = False
    # it compiles through torch.compile (dynamo): no graph compiled means it ran eager code
    dynamo: bool = False
    # the knobs its code reads (schema/options.py); a job or suite entry setting any other is refused
    options: type[Options] = NoOptions
    # the techniques its options switch on and off, in the order an ablation adds them: each names a field of its
    # options and the Applied field recording whether a run used it (the report's ablation climbs from none to all);
    # a new one goes at the end (a result that recorded the ones before it and not it predates it: it did not run it)
    techniques: tuple[str, ...] = ()
    # a reference row (mlcbench's own hand-written code, not a compiler's output): reports draw it apart, and P3 and
    # "fastest" never count it
    hand_written: bool = False
    # the workflow it extends with options of its own, at least one of which a job of it sets. Its jobs were that
    # workflow's, with those options, before it had a row: they keep that identity, and stored results of that
    # workflow with any of them set are read as this row's (schema/legacy.py)
    builds_on: Optional[str] = None
    # the compiler's modules, imported before its compile is timed: every process pays that import once, whatever the
    # caches hold (as it pays torch's own), so it is its own figure (Metrics.compiler_import_s), not the compile's
    compiler_modules: tuple[str, ...] = ()
    # its compiler keys its caches by hashes of torch's sources and Triton's library (Inductor), computed once per
    # process before its first compile: started on a thread beside the model's build, so no compile waits for them
    # (workers/stacks/inductor_cache.py hash_installs_ahead)
    install_keys: bool = False
    # what its compile into an empty cache typically takes (None: it compiles nothing, eager); a row built on another
    # without one of its own takes that one's (typical_compile)
    compile_cost: Optional[TypicalCompile] = None
    # an LLM's, where it is of another shape than a synthetic model's (torchax traces and compiles one program per
    # sequence length: minutes for an LLM, seconds for a synthetic model)
    llm_compile_cost: Optional[TypicalCompile] = None
    # LLMs: it runs eager's own kernels in eager's order, so logits bit-identical to eager's are what it computes, not
    # a sign it handed back eager's output (Correctness.identical_to_reference): torch_compile, whose LLM recipe calls
    # generate() on the model itself, past the compiled wrapper (compiled nothing: no verdict, no P3 score either)
    runs_eager_kernels: bool = False
    # synthetic models: its runner moves the inputs to its device once (as IO binding would) and never reads them
    # again, so its timed calls cannot cycle through input sets; a stale output is ruled out only by the plausibility
    # bound there
    inputs_moved_once: bool = False

    def read_options(self, given: Mapping[str, Any]) -> Options:
        """The options a job, suite entry or command line gives (each one given counts, whatever its value) as this
        workflow's own class; a ValueError naming the option where it does not read one, or one is not valid."""
        unread = [name for name in given if name not in self.options.model_fields]
        if unread:
            readers = sorted(name for name, info in WORKFLOWS.items() if unread[0] in info.options.model_fields)
            who = f"; {', '.join(readers)} read{'s' if len(readers) == 1 else ''} it" if readers else ""
            raise invalid(f"options.{unread[0]}: {self.name} does not read it (its options: "
                          f"{', '.join(self.options.model_fields) or 'none'}{who})")
        try:
            options = self.options.model_validate(dict(given))
        except ValidationError as error:
            raise invalid("; ".join(f"options.{'.'.join(map(str, problem['loc']))}: {problem['msg']}"
                                    for problem in error.errors())) from None
        if self.builds_on and not any(getattr(options, own) for own in self.own_options()):
            raise invalid(f"{self.name} with none of {', '.join(self.own_options())} on is {self.builds_on}: "
                          f"set one")
        return options

    def typical_compile(self, kind: ModelKind) -> Optional[TypicalCompile]:
        """Its own compile cost for a model of this kind, else the one of the workflow it builds on."""
        own = (self.llm_compile_cost if kind == "llm" else None) or self.compile_cost
        return own or (WORKFLOWS[self.builds_on].typical_compile(kind) if self.builds_on else None)

    def own_options(self) -> tuple[str, ...]:
        """The options it reads beyond the workflow it builds on."""
        base = WORKFLOWS[self.builds_on].options.model_fields if self.builds_on else {}
        return tuple(name for name in self.options.model_fields if name not in base)

    @property
    def kinds(self) -> frozenset[ModelKind]:
        """The model kinds it runs: every kind it gives no reason against."""
        return frozenset(kind for kind in get_args(ModelKind) if kind not in self.why_not)


# The workflow every other is measured and checked against: its runs are the speedups' baseline and the correctness
# reference.
REFERENCE = "eager"
# Inductor's compiler (lowering, code generation, the compiled modules' loader), lazily imported by torch.compile, and
# the hashes of the installs its caches are keyed by
_INDUCTOR: dict[str, Any] = {"compiler_modules": ("torch._inductor.compile_fx",), "install_keys": True}
_LLMS_ONLY = "LLMs only: it compiles an LLM's decode loop, which a synthetic model does not have"
_ORT = ("onnxruntime", "onnxscript")



def _compiles(seconds: float, per_billion_s: float = 0.0) -> TypicalCompile:
    return TypicalCompile(seconds=seconds, per_billion_s=per_billion_s)


# Every workflow a job may name. The worker runs each from mlcbench.workers.workflows.<name>; suites take their
# workflows from the kinds; the planner stores a wrong kind's reason without starting a worker. The compile costs are
# estimates, handtuned_decode's rounded from the cold processes of benchmarks/studies/decode-kernels (82-90 s for
# TinyLlama-1.1B, 107-130 s for Llama-2-7B), torchax's LLM one from benchmarks/studies/compile-cuts-h200 (b1 on an
# H200: 111 s for TinyLlama-1.1B, 123 s for Llama-2-7B, 47 and 73 s of it tracing 32 sequence lengths) and
# torch_compile_forward's from the same study (107 s for Llama-2-7B b1, 107 s for TinyLlama-1.1B b16).
WORKFLOWS: dict[str, WorkflowInfo] = {info.name: info for info in (
    WorkflowInfo(name=REFERENCE,
                 description="PyTorch eager (HF generate with the default dynamic cache for LLMs)"),
    WorkflowInfo(name="torch_compile", compile_cost=_compiles(15),
                 dynamo=True, options=TorchCompileOptions, **_INDUCTOR, runs_eager_kernels=True,
                 description="torch.compile, inductor backend (LLMs: the paper's recipe, torch.compile(model) + "
                             "generate(), default dynamic cache)"),
    WorkflowInfo(name="torch_compile_forward", compile_cost=_compiles(105),
                 dynamo=True, options=TorchCompileOptions, **_INDUCTOR,
                 why_not={"synthetic": _LLMS_ONLY},
                 description="LLMs: the forward compiled (inductor), default dynamic cache"),
    WorkflowInfo(name="torch_compile_static", compile_cost=_compiles(30),
                 dynamo=True, options=TorchCompileStaticOptions, **_INDUCTOR,
                 why_not={"synthetic": _LLMS_ONLY},
                 description="LLMs: static KV cache + compiled forward (Hugging Face's recipe)"),
    WorkflowInfo(name="torch_compile_decode", compile_cost=_compiles(115, 4),
                 dynamo=True, **_INDUCTOR,
                 why_not={"synthetic": _LLMS_ONLY}, options=TorchCompileDecodeOptions,
                 techniques=TorchCompileDecodeOptions.TECHNIQUES,
                 description="LLMs: the whole decode step compiled (forward, greedy token, position), CUDA graphs, "
                             "static KV cache in the module, prefill compiled with dynamic shapes (gpt-fast's recipe)"),
    WorkflowInfo(name="handtuned_decode", compile_cost=_compiles(75, 7),
                 dynamo=True, **_INDUCTOR, hand_written=True,
                 why_not={"synthetic": _LLMS_ONLY}, options=HandtunedDecodeOptions, builds_on="torch_compile_decode",
                 techniques=HandtunedDecodeOptions.TECHNIQUES,
                 description="Reference, not a compiler: torch_compile_decode with mlcbench's hand-written Triton "
                             "kernels (one-row projections, one-token attention, few-row split-K GEMM) injected"),
    WorkflowInfo(name="aot_inductor", compile_cost=_compiles(40),
                 **_INDUCTOR,
                 why_not={"llm": "no decode loop runs an AOTInductor package yet"},
                 description="torch.export + AOTInductor package, loaded back and run"),
    WorkflowInfo(name="torchscript", compile_cost=_compiles(5),
                 why_not={
                     "llm": "a trace records one generate() call's Python control flow and cache as constants; no "
                            "decode loop runs a TorchScript module yet"},
                 description="TorchScript (deprecated by torch, still what libtorch and Triton's PyTorch backend "
                             "load): torch.jit.trace, freeze, optimize_for_inference, saved and loaded back"),
    WorkflowInfo(name="onnxruntime", compile_cost=_compiles(15, 20),
                 requires=_ORT, options=OnnxRuntimeOptions,
                 description="torch.onnx export, ONNX Runtime (CUDA EP with IO binding when available, else CPU EP; "
                             "LLMs: the decoder exported with its KV cache)"),
    WorkflowInfo(name="onnxruntime_cuda", compile_cost=_compiles(15, 20),
                 requires=_ORT, options=OnnxRuntimeOptions,
                 description="ONNX Runtime, CUDA execution provider (LLMs: the decoder exported with its KV cache, "
                             "greedy decode through IO binding)"),
    WorkflowInfo(name="onnxruntime_trt", compile_cost=_compiles(60),
                 requires=_ORT, options=OnnxRuntimeOptions, why_not={
                     "llm": "the TensorRT EP is set up for synthetic models only; the decoder exported with its KV "
                            "cache runs on the CUDA EP (onnxruntime_cuda)"},
                 description="ONNX Runtime, TensorRT execution provider (engine cache in the env cache)"),
    WorkflowInfo(name="torch_compile_tensorrt", compile_cost=_compiles(60),
                 dynamo=True, requires=("torch_tensorrt",), options=TensorrtOptions,
                 why_not={
                     "llm": "Torch-TensorRT's torch.compile backend cannot take a static KV cache's in-place "
                            "updates (aot_export_joint_simple) and silently falls back to PyTorch; use the "
                            "torch_tensorrt workflow"},
                 description="torch.compile(backend='tensorrt') through Torch-TensorRT"),
    WorkflowInfo(name="torch_tensorrt", compile_cost=_compiles(60, 20),
                 requires=("torch_tensorrt",), options=TensorrtOptions,
                 description="Torch-TensorRT AOT: torch.export + torch_tensorrt.dynamo.compile, saved and reloaded"),
    WorkflowInfo(name="tensorrt_llm", compile_cost=_compiles(120, 20),
                 requires=("tensorrt_llm",), own_worker=True,
                 why_not={"synthetic": "TensorRT-LLM's LLM API runs LLMs only"},
                 description="TensorRT-LLM LLM API"),
    WorkflowInfo(name="torch_compile_openxla", compile_cost=_compiles(30),
                 dynamo=True, requires=("torch_xla",), own_worker=True, inputs_moved_once=True,
                 description="torch.compile(backend='openxla') on a torch_xla device (LLMs: the forward compiled, "
                             "generate() with the default dynamic cache)"),
    WorkflowInfo(name="torch_compile_openxla_static", compile_cost=_compiles(30),
                 dynamo=True, requires=("torch_xla",), own_worker=True,
                 why_not={"synthetic": "a static KV cache is an LLM's; torch_compile_openxla runs synthetic models"},
                 description="LLMs: torch_compile_openxla on a static KV cache"),
    WorkflowInfo(name="torchax", compile_cost=_compiles(10), llm_compile_cost=_compiles(108, 2),
                 requires=("torchax", "jax"), own_worker=True, inputs_moved_once=True,
                 description="PyTorch modules on JAX/XLA through torchax.compile"),
)}

OWN_WORKER_WORKFLOWS = frozenset(name for name, info in WORKFLOWS.items() if info.own_worker)

# Fault injection for the tests of crash isolation (the worker registers them only when MLCBENCH_TEST_FAULTS=1).
FAULT_WORKFLOWS = frozenset({"fault-kill", "fault-segfault", "fault-hang", "fault-oom"})


def workflows_for(kind: ModelKind) -> list[str]:
    return [name for name, info in WORKFLOWS.items() if kind in info.kinds]


def missing_requirements(workflow: str, missing: list[str]) -> str:
    """Why a workflow whose packages are not importable is `unsupported` (the worker's words, and the planner's for
    an env that runs in the planner's own interpreter)."""
    return f"{workflow}: {', '.join(missing)} not importable in this environment"


def why_not_run(workflow: str, model: "str | ModelInfo") -> Optional[str]:
    """Why the catalog's workflow cannot run the model (a catalog name, or a job's own model: its kind), or None where
    it can or either is not in the catalog (fault workflows, unknown names: refused elsewhere)."""
    info, model_info = WORKFLOWS.get(workflow), MODELS.get(model) if isinstance(model, str) else model
    if info is None or model_info is None:
        return None
    reason = info.why_not.get(model_info.kind)
    return None if reason is None else f"{workflow} does not run {model_info.kind} models: {reason}"
