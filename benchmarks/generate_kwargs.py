"""What the arguments mlcbench passes to generate() cost: eager TinyLlama tokens/s with mlcbench's runner (fixed length,
attention mask, dict output) against a bare generate() call, same model, same prompt, CUDA events.

    python benchmarks/generate_kwargs.py [--model tinyllama-1.1b] [--batch 1 --batch 64] [--repeats 10]

A check that the LLM figures mlcbench stores are those of generate() itself, not of its harness.
"""

import argparse
import statistics

import torch

from mlcbench.schema import MODELS, JobSpec
from mlcbench.workers.decode.hf_generate import HFGenerateRunner
from mlcbench.workers.models import llm

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def median_ms(call, warmup: int, repeats: int) -> float:
    for _ in range(warmup):
        call()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        call()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tinyllama-1.1b")
    parser.add_argument("--batch", type=int, action="append")
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    info = MODELS[args.model]
    device = torch.device("cuda")
    print(f"# {torch.cuda.get_device_name()} torch {torch.__version__}, {args.model} {info.default_precision}, 32 in / 32 out, "
          f"median of {args.repeats}")
    print(f"{'batch':>5} {'variant':<48} {'tok/s':>9}")
    for batch in args.batch or [1, 64]:
        measure_batch(args.model, batch, args.repeats, device)
        torch.cuda.empty_cache()  # the batch's model was freed when measure_batch returned


def measure_batch(model_name: str, batch: int, repeats: int, device: torch.device) -> None:
    info = MODELS[model_name]
    job = JobSpec(model=model_name, workflow="eager", precision=info.default_precision, batch_size=batch)
    model = llm.build(info, job, DTYPES[info.default_precision], device)
    prompt = llm.prompt_ids(info, job, device)
    variants = {
        "mlcbench HFGenerateRunner": lambda: HFGenerateRunner(model).generate(prompt, 32),
        "generate(max/min_new_tokens=32)": lambda: model.generate(
            prompt, do_sample=False, max_new_tokens=32, min_new_tokens=32, pad_token_id=2),
        "generate(max_new_tokens=32), may stop at EOS": lambda: model.generate(
            prompt, do_sample=False, max_new_tokens=32, pad_token_id=2),
    }
    with torch.no_grad():
        for name, call in variants.items():
            ms = median_ms(call, warmup=3, repeats=repeats)
            print(f"{batch:>5} {name:<48} {batch * 32 / (ms * 1e-3):>9.1f}", flush=True)


if __name__ == "__main__":
    main()
