"""Where does AOTInductor's package loader crash? Each step runs in its own process, so a segfault in one leaves the
others' answers standing. A CPU package (nn.Linear 256 -> 512): no CUDA involved.

    python benchmarks/aoti_loader.py compile DIR   # torch.export + aoti_compile_and_package, then unzip the package
    python benchmarks/aoti_loader.py dlopen DIR    # ctypes.CDLL of the package's wrapper .so, nothing else
    python benchmarks/aoti_loader.py load DIR      # aoti_load_package and one call

On the device H100 (torch 2.11) it was run with `-X faulthandler`, then `ldd` on the .so and `cuda-gdb -batch -ex run
-ex bt` on the load step; the output is in results/h100-aoti-segfault.txt.
"""

import ctypes
import sys
import zipfile
from pathlib import Path

import torch


def main(step: str, folder: Path) -> None:
    package = folder / "cpu.pt2"
    if step == "compile":
        exported = torch.export.export(torch.nn.Linear(256, 512), (torch.randn(4, 256),))
        print(torch._inductor.aoti_compile_and_package(exported, package_path=str(package)))
        zipfile.ZipFile(package).extractall(folder / "extracted")
    elif step == "dlopen":
        for shared_object in (folder / "extracted").rglob("*.so"):
            ctypes.CDLL(str(shared_object))
            print("dlopen ok", shared_object, flush=True)
    elif step == "load":
        run = torch._inductor.aoti_load_package(str(package))
        print("loaded, output shape", tuple(run(torch.randn(4, 256)).shape), flush=True)
    else:
        sys.exit(f"unknown step {step!r}: compile, dlopen or load")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], Path(sys.argv[2]))
