"""Does the NVML memory sampler thread slow a CPU-launch-bound eager generate()? Prints tokens/s with and without it.

Run on a GPU machine: python benchmarks/sampler_overhead.py [model] (default tinyllama-1.1b, batch 1, 32 in / 32 out)."""

import sys
import time

import torch

from mlcbench.schema import MODELS, JobSpec
from mlcbench.workers.measurement.timing import NvmlMemorySampler
from mlcbench.workers.models import llm
from mlcbench.workers.decode.hf_generate import HFGenerateRunner


def tokens_per_s(runner: HFGenerateRunner, prompt: torch.Tensor, calls: int = 5) -> float:
    runner.generate(prompt, 32)
    torch.cuda.synchronize()
    begin = time.perf_counter()
    for _ in range(calls):
        runner.generate(prompt, 32)
    torch.cuda.synchronize()
    return calls * prompt.shape[0] * 32 / (time.perf_counter() - begin)


def main() -> None:
    name = sys.argv[1] if len(sys.argv) > 1 else "tinyllama-1.1b"
    info = MODELS[name]
    job = JobSpec(model=name, workflow="eager", precision=info.default_precision, batch_size=1)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[job.precision]
    device = torch.device("cuda")
    with torch.no_grad():
        runner = HFGenerateRunner(llm.build(info, job, dtype, device), disable_compile=True)
        prompt = llm.prompt_ids(info, job, device)
        for attempt in range(2):
            plain = tokens_per_s(runner, prompt)
            sampler = NvmlMemorySampler(f"GPU-{torch.cuda.get_device_properties(0).uuid}")
            started = sampler.start()
            sampled = tokens_per_s(runner, prompt)
            sampler.stop()
            print(f"{name} eager b1, round {attempt}: {plain:.1f} tok/s without sampler, {sampled:.1f} tok/s with "
                  f"(sampler running: {started})")


if __name__ == "__main__":
    main()
