"""What compiling Inductor's generated modules from source costs a process that loads them from the caches: every
module under a cache folder (warm_start.py --cache-root leaves them) compiled, the fastest of three; wrappers (a
compiled graph's `call`) apart from the rest (each Triton kernel's module).

    python benchmarks/module_load_probe.py CACHE_ROOT [--json probe.json]

On the H100 (2026-11-26, Llama-2-7B b1, torch_compile_static) the wrapper compiled in 0.045 s, of a 1.2-1.7-s load of
the compiled module: keeping its bytecode between processes (tried at 1237eeb) saved nothing measurable.
"""

import argparse
import json
import sys
import time
from pathlib import Path


def fastest(action, times: int = 3) -> float:
    best = float("inf")
    for _ in range(times):
        start = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - start)
    return best


def probe(path: Path) -> dict:
    source = path.read_text()
    return {"path": str(path), "bytes": len(source), "lines": source.count("\n"), "wrapper": "def call(" in source,
            "compile_s": fastest(lambda: compile(source, str(path), "exec", dont_inherit=True))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    modules = [probe(path) for path in sorted(args.root.rglob("*.py"))]
    summary = {kind: {"count": len(rows), "bytes": sum(m["bytes"] for m in rows),
                      "compile_s": round(sum(m["compile_s"] for m in rows), 4)}
               for kind, rows in (("wrappers", [m for m in modules if m["wrapper"]]),
                                  ("other modules", [m for m in modules if not m["wrapper"]]))}
    print(json.dumps(summary, indent=1))
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "modules": modules}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
