"""The built-in suites. `paper` is the study's grid; `smoke` the same kinds of model scaled down for a CPU; `ort`
ONNX Runtime on a GPU; `crossgen` what one GPU generation gains over the next."""

from mlcbench.orchestrator.errors import UsageError
from mlcbench.schema import Repetition, Suite, SuiteEntry, WorkflowOptions, workflows_for

SYNTHETIC_ARCHS = ("matmul", "matmul-relu", "ffn", "ffn-multilayer")
PAPER_BATCHES = [1, 4, 16, 64]
LLMS = ["tinyllama-1.1b", "llama2-7b"]
FFNS = [f"{arch}-{dims}" for dims in ("tinyllama", "llama2") for arch in ("ffn", "ffn-multilayer")]
CROSSGEN_LLM_WORKFLOWS = ["eager", "torch_compile_static", "torch_compile_decode"]


def _both_half_precisions(**entry) -> list[SuiteEntry]:
    return [SuiteEntry(precision=precision, **entry) for precision in ("fp16", "bf16")]

# a fresh worker process per cell costs seconds of start-up on a CPU (importing torch): one process a cell keeps
# `make sweep` within minutes on 2 cores (no interval; a CPU's timings vary too much to decide anything anyway)
SMOKE_REPETITION = Repetition(processes=1)
# how the trust suite measures a cell: sub-millisecond FFN calls in 5 processes, whole LLM generate() calls in 3
# (crossgen times its FFN cells the same way, so that a crossgen sweep into a trust store reuses them)
FFN_TIMING = dict(warmup=10, repeats=30, repetition=Repetition(processes=5), timeout_s=600)
LLM_TIMING = dict(warmup=0, repeats=2, repetition=Repetition(processes=3, max_processes=3), timeout_s=900)
# the ort suite establishes what runs and the host-copy effect (10x and more), in one process per cell: it has to
# fit in minutes of GPU time, exports included
ORT_TIMING = dict(warmup=10, repeats=50, repetition=Repetition(processes=1, max_processes=1), timeout_s=600)
ORT_LLM_TIMING = dict(warmup=2, repeats=5, repetition=Repetition(processes=1, max_processes=1), timeout_s=1200)

# the compiled decode loops beside eager on both LLMs, shared by the decode and crossgen suites (so that a crossgen
# sweep into a store that holds a decode sweep reuses its cells)
DECODE_TIMING = dict(warmup=1, repeats=3, timeout_s=900)
# batch sizes above 1 in one process: a cold whole-step compile costs minutes for each new batch size
DECODE_ONE_PROCESS = dict(repetition=Repetition(processes=1, max_processes=1), **DECODE_TIMING)
DECODE_ENTRIES = [
    SuiteEntry(models=LLMS, workflows=CROSSGEN_LLM_WORKFLOWS, batch_sizes=[1],
               repetition=Repetition(processes=2, max_processes=2), **DECODE_TIMING),
    SuiteEntry(models=LLMS, workflows=CROSSGEN_LLM_WORKFLOWS, batch_sizes=[64], **DECODE_ONE_PROCESS),
]

SUITES: dict[str, Suite] = {
    "paper": Suite(
        name="paper",
        description="the study's grid: 4 synthetic models x 2 dim sets and TinyLlama-1.1B / Llama-2-7B, "
                    "batch 1/4/16/64, 32 tokens in, 32 out",
        entries=[
            SuiteEntry(models=[f"{arch}-{dims}" for dims in ("tinyllama", "llama2") for arch in SYNTHETIC_ARCHS],
                       workflows=workflows_for("synthetic"), batch_sizes=PAPER_BATCHES, warmup=10, repeats=50,
                       timeout_s=900),
            SuiteEntry(models=["tinyllama-1.1b", "llama2-7b"], workflows=workflows_for("llm"), batch_sizes=PAPER_BATCHES,
                       warmup=2, repeats=5, timeout_s=1800),
        ],
    ),
    "smoke": Suite(
        name="smoke",
        description="the paper's kinds of model scaled down, each cell in one fresh worker process, so that a whole sweep "
                    "ends in minutes on 2 CPU cores",
        entries=[
            SuiteEntry(models=[f"{arch}-small" for arch in SYNTHETIC_ARCHS],
                       workflows=["eager", "torch_compile", "onnxruntime", "torch_compile_openxla"],
                       batch_sizes=[1, 4], warmup=1, repeats=5, repetition=SMOKE_REPETITION, timeout_s=300),
            SuiteEntry(models=["ffn-small"], workflows=["aot_inductor"], batch_sizes=[1], warmup=1, repeats=5,
                       repetition=SMOKE_REPETITION, timeout_s=300),
            SuiteEntry(models=["llama-2layer"], workflows=["eager", "torch_compile", "torch_compile_forward",
                                                                "torch_compile_static", "torch_compile_openxla",
                                                                "torch_compile_openxla_static"],
                       batch_sizes=[1], output_len=8, warmup=0, repeats=2, repetition=SMOKE_REPETITION, timeout_s=300),
        ],
    ),
    "trust": Suite(
        name="trust",
        description="how far two sweeps of the same cells agree: eager, torch_compile and torch_compile_static on "
                    "both LLMs and the FFNs at both dims, batch 1 and 64, each cell in 3 or 5 worker processes "
                    "(LLMs: 3, 2 timed generate calls each); sweep it into two stores, then compare them",
        entries=[
            SuiteEntry(models=FFNS, workflows=["eager", "torch_compile"], batch_sizes=[1, 64], **FFN_TIMING),
            SuiteEntry(models=LLMS, workflows=["eager", "torch_compile", "torch_compile_static"],
                       batch_sizes=[1, 64], **LLM_TIMING),
        ],
    ),
    "decode": Suite(
        name="decode",
        description="the compiled decode loops beside eager on both LLMs at batch 1 and 64; batch 1 in 2 worker "
                    "processes (the first compiles cold, the second warm from the env's Inductor cache), batch 64 in "
                    "one: a whole-step compile costs minutes cold",
        entries=DECODE_ENTRIES,
    ),
    "ort": Suite(
        name="ort",
        description="ONNX Runtime's CUDA EP beside eager on the FFN models at both dims, fp16 and bf16, IO binding on "
                    "and off; the static-shape export at b1/b64; TinyLlama decoded through its ONNX KV-cache graph",
        entries=[
            *_both_half_precisions(models=FFNS, workflows=["eager", "onnxruntime_cuda"], batch_sizes=[1, 16, 64],
                                   **ORT_TIMING),
            *_both_half_precisions(models=FFNS, workflows=["onnxruntime_cuda"], batch_sizes=[1, 64],
                                   options=WorkflowOptions(io_binding=False), **ORT_TIMING),
            *_both_half_precisions(models=["ffn-llama2"], workflows=["onnxruntime"], batch_sizes=[1, 64],
                                   **ORT_TIMING),
            SuiteEntry(models=["tinyllama-1.1b"], workflows=["eager", "onnxruntime_cuda"], batch_sizes=[1, 16, 64],
                       **ORT_LLM_TIMING),
            SuiteEntry(models=["tinyllama-1.1b"], workflows=["onnxruntime_cuda"], batch_sizes=[1, 64],
                       options=WorkflowOptions(io_binding=False), **ORT_LLM_TIMING),
            # fp16 too: the CUDA EP may lack bf16 kernels for some ops, and this row tells the path from the dtype
            SuiteEntry(models=["tinyllama-1.1b"], workflows=["eager", "onnxruntime_cuda"], batch_sizes=[1],
                       precision="fp16", **ORT_LLM_TIMING),
        ],
    ),
    "crossgen": Suite(
        name="crossgen",
        description="one GPU generation against the next: the FFN models at batch 1/16/64 as the trust suite times "
                    "them, both LLMs (eager and the compiled decode loops) at batch 1/16/64 as the decode suite times "
                    "them (b1 in 2 processes, the others in 1: a cold whole-step compile costs minutes); run it on "
                    "each GPU, merge the stores, then `mlcbench compare --gpu A --gpu B`",
        entries=[
            SuiteEntry(models=FFNS, workflows=["eager", "torch_compile"], batch_sizes=[1, 16, 64], **FFN_TIMING),
            *DECODE_ENTRIES,
            SuiteEntry(models=LLMS, workflows=CROSSGEN_LLM_WORKFLOWS, batch_sizes=[16], **DECODE_ONE_PROCESS),
        ],
    ),
    "tiny": Suite(
        name="tiny",
        description="eight eager runs of small synthetic models in one worker process each, seconds in all: for "
                    "checking a setup, and for tests (one process: no interval)",
        entries=[
            SuiteEntry(models=["matmul-small", "matmul-relu-small"], workflows=["eager"], batch_sizes=[1, 2, 4, 8],
                       warmup=1, repeats=3, repetition=Repetition(processes=1, max_processes=1), timeout_s=120),
        ],
    ),
}


def get_suite(name: str) -> Suite:
    if name not in SUITES:
        raise UsageError(f"unknown suite {name!r}; known: {', '.join(SUITES)}")
    return SUITES[name]


def default_suite(device: str) -> str:
    return "paper" if device == "cuda" else "smoke"
