"""gpt-fast's own decode loop (pytorch-labs/gpt-fast, its generate() with decode_one_token compiled as its --compile
does) on one model and batch size with random weights, timed as mlcbench times an LLM cell: 32 prompt tokens, 32 new
tokens, warm-up calls, then the median of timed whole generate() calls; tokens/s = batch x new tokens / median.

gpt-fast is not part of mlcbench: benchmarks/gptfast_peer.sh fills .peer/gpt-fast (git-ignored) from the mirror and
runs this once per cell in a fresh process. One JSON line per run goes to stdout and, with --jsonl, to that file.

    python3 benchmarks/gptfast_peer.py --model tinyllama-1.1b --batch-size 64 --jsonl results.jsonl
    python3 benchmarks/gptfast_peer.py --model llama-2layer --device cpu --no-compile      # the code path, on a CPU
"""

import argparse
import json
import statistics
import sys
import time
import types
from pathlib import Path

import torch
from torch._dynamo.utils import counters

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}
# mlcbench's catalog names and dtypes; the dims are gpt-fast's "7B" and, where gpt-fast has no entry, the catalog's
MODELS = {
    "llama2-7b": ("7B", "fp16"),
    "tinyllama-1.1b": (dict(n_layer=22, n_head=32, n_local_heads=4, dim=2048, intermediate_size=5632), "bf16"),
    "llama-2layer": (dict(n_layer=2, n_head=8, n_local_heads=2, dim=256, intermediate_size=704, block_size=512),
                     "fp32"),
}


def import_gptfast(gptfast_dir: Path):
    # generate.py imports its tokenizer module (sentencepiece, tiktoken) at the top; a synthetic prompt never uses it
    sys.modules["tokenizer"] = types.SimpleNamespace(get_tokenizer=None)
    sys.path.insert(0, str(gptfast_dir))
    import generate
    import model
    return generate, model


def build_model(gptfast_model, name: str, dtype: torch.dtype, device: str):
    config, _ = MODELS[name]
    args = gptfast_model.ModelArgs.from_name(config) if isinstance(config, str) else gptfast_model.ModelArgs(**config)
    default_dtype = torch.get_default_dtype()
    torch.set_default_dtype(dtype)  # PyTorch's default init, made directly in the dtype on the device
    try:
        with torch.device(device):
            return gptfast_model.Transformer(args).eval(), args
    finally:
        torch.set_default_dtype(default_dtype)


def sync(device: str):
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=MODELS, required=True)
    parser.add_argument("--dtype", choices=DTYPES, help="default: the model's in mlcbench's catalog")
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--prompt-tokens", type=int, default=32)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--warmup", type=int, default=2, help="untimed calls, the first of which compiles")
    parser.add_argument("--calls", type=int, default=5, help="timed calls")
    parser.add_argument("--greedy", action="store_true",
                        help="top_k=1 through gpt-fast's sampler (mlcbench's loop is greedy); default: gpt-fast's "
                             "top_k=200, temperature=0.8")
    parser.add_argument("--no-compile", action="store_true", help="gpt-fast's loop without --compile")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--gptfast-dir", type=Path, default=Path(".peer/gpt-fast"))
    parser.add_argument("--jsonl", type=Path, help="append the result line to this file")
    args = parser.parse_args()
    if args.warmup < 1:
        parser.error("--warmup must be at least 1: the first call compiles")

    generate_module, model_module = import_gptfast(args.gptfast_dir)
    dtype_name = args.dtype or MODELS[args.model][1]
    model, model_args = build_model(model_module, args.model, DTYPES[dtype_name], args.device)
    sampling = dict(top_k=1 if args.greedy else 200, temperature=0.8)
    compile_mode = None if args.no_compile else "reduce-overhead"
    if compile_mode:  # what generate.py's main() does for --compile without --compile_prefill
        generate_module.decode_one_token = torch.compile(generate_module.decode_one_token, mode=compile_mode,
                                                         fullgraph=True)
    torch.manual_seed(1234)
    # generate.py's --prompt <int>: random token ids below 1024, the same prompt repeated for every row
    prompt = torch.randint(0, 1024, (args.prompt_tokens,), device=args.device, dtype=torch.int64)

    def one_call() -> float:
        sync(args.device)
        start = time.perf_counter()
        seq, _ = generate_module.generate(model, prompt, args.new_tokens, batch_size=args.batch_size,
                                          interactive=False, draft_model=None, **sampling)
        sync(args.device)
        elapsed = time.perf_counter() - start
        assert seq.shape == (args.batch_size, args.prompt_tokens + args.new_tokens), seq.shape
        return elapsed

    first_call_s = one_call()
    for _ in range(args.warmup - 1):
        one_call()
    samples_ms = [one_call() * 1e3 for _ in range(args.calls)]
    median_ms = statistics.median(samples_ms)
    commit_file = args.gptfast_dir / "COMMIT"
    result = {
        "model": args.model, "dtype": dtype_name, "batch": args.batch_size,
        "prompt_tokens": args.prompt_tokens, "new_tokens": args.new_tokens,
        "median_ms": round(median_ms, 3),
        "tokens_per_s": round(args.batch_size * args.new_tokens / (median_ms / 1e3), 2),
        "samples_ms": [round(s, 3) for s in samples_ms],
        "first_call_s": round(first_call_s, 2),
        "warmup_calls": args.warmup, "timed_calls": args.calls,
        "sampling": "greedy (top_k=1)" if args.greedy else "gpt-fast default (top_k=200, temperature=0.8)",
        "compile": f"decode_one_token: mode={compile_mode}, fullgraph=True; prefill not compiled"
                   if compile_mode else "none",
        "dynamo_graphs": counters["stats"]["unique_graphs"],
        "cudagraph_skips": counters["inductor"]["cudagraph_skips"],
        "model_args": vars(model_args),
        "device": torch.cuda.get_device_name(args.device) if args.device.startswith("cuda") else args.device,
        "torch": torch.__version__,
        "gptfast_commit": commit_file.read_text().strip() if commit_file.is_file() else "unknown",
    }
    line = json.dumps(result)
    print(line, flush=True)
    if args.jsonl:
        with args.jsonl.open("a") as out:
            out.write(line + "\n")


if __name__ == "__main__":
    main()
