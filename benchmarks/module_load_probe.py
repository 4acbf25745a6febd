"""What compiling Inductor's generated modules costs a process that loads them from the caches, against loading the
bytecode the worker keeps beside them (inductor_cache.keep_compiled_bytecode): every module source under a cache
folder (warm_start.py --cache-root leaves them), each compiled and each kept code object loaded, the fastest of three.

    python benchmarks/module_load_probe.py CACHE_ROOT [--json probe.json]
"""

import argparse
import json
import marshal
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
    kept = sorted(path.parent.glob(f"{path.name}.{sys.implementation.cache_tag}-*.code"))
    return {"path": str(path), "bytes": len(source), "lines": source.count("\n"),
            "wrapper": "def call(" in source,
            "compile_s": fastest(lambda: compile(source, str(path), "exec", dont_inherit=True)),
            "kept_load_s": fastest(lambda: marshal.loads(kept[-1].read_bytes())) if kept else None}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    modules = [probe(path) for path in sorted(args.root.rglob("*.py"))]
    summary = {}
    for kind, rows in (("wrappers", [m for m in modules if m["wrapper"]]),
                       ("other modules", [m for m in modules if not m["wrapper"]])):
        summary[kind] = {"count": len(rows), "bytes": sum(m["bytes"] for m in rows),
                         "compile_s": round(sum(m["compile_s"] for m in rows), 4),
                         "kept_load_s": round(sum(m["kept_load_s"] or 0.0 for m in rows), 4),
                         "kept": sum(m["kept_load_s"] is not None for m in rows)}
    print(json.dumps(summary, indent=1))
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "modules": modules}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
