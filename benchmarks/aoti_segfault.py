"""The aot_inductor workflow's crash in under a minute: an AOTInductor package of one nn.Linear, compiled, then loaded
and called in a fresh process (faulthandler on). torch 2.11 (cu130) segfaulted at the load on an H100 (CUDA and CPU
packages alike) and on H200s (the aot_inductor workflow refuses that torch: see its module); torch 2.13 loads and
runs it. Run it with the GPU's torch:

    python benchmarks/aoti_segfault.py [cuda|cpu]   # default: cuda where there is a GPU; compile and load exit codes
"""

import subprocess
import sys
import tempfile
from pathlib import Path

COMPILE = """
import sys, torch
device = sys.argv[1]
model = torch.nn.Linear(256, 512).to(device)
exported = torch.export.export(model, (torch.randn(4, 256, device=device),))
print(torch._inductor.aoti_compile_and_package(exported, package_path=sys.argv[2]))
"""
LOAD = """
import sys, torch
run = torch._inductor.aoti_load_package(sys.argv[2])
print("loaded; output", tuple(run(torch.randn(4, 256, device=sys.argv[1])).shape))
"""


def step(script: str, device: str, package: Path) -> int:
    done = subprocess.run([sys.executable, "-X", "faulthandler", "-c", script, device, str(package)],
                          capture_output=True, text=True, timeout=600)
    print(done.stdout.strip()[-500:], done.stderr.strip()[-1500:], sep="\n", flush=True)
    return done.returncode


def main() -> None:
    import torch

    device = sys.argv[1] if len(sys.argv) > 1 else "cuda" if torch.cuda.is_available() else "cpu"
    print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, "
          f"{torch.cuda.get_device_name() if torch.cuda.is_available() else 'no GPU'}", flush=True)
    with tempfile.TemporaryDirectory() as folder:
        package = Path(folder) / f"{device}.pt2"
        compiled = step(COMPILE, device, package)
        loaded = step(LOAD, device, package) if compiled == 0 else None
        print(f"{device}: compile rc={compiled}, load in a fresh process rc={loaded} (-11: SIGSEGV)", flush=True)


if __name__ == "__main__":
    main()
