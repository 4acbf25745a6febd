"""PyTorch's own AOT path: torch.export, then AOTInductor compiles a package (a shared library + weights) that is
loaded back and called. Compile cost is the build; the package lands in the env cache.

torch 2.11's package loader segfaults in the generated model container's constructor, for any package (a CPU
nn.Linear's too, so not CUDA), in a fresh process as in the compiling one, on H100s and H200s (docs/workflows.md);
torch 2.13 loads the same package. No loader of that torch avoids the constructor, so a job on it is unsupported
before anything is compiled; `STEP=aoti bash benchmarks/paper_device.sh` reproduces the crash on a GPU in under two
minutes."""

from typing import Callable

import torch

from mlcbench.schema import Applied
from mlcbench.schema.options import NoOptions
from mlcbench.workers.interface import Prepared, Unsupported, Workflow, WorkflowContext

# torch releases (major, minor) whose AOTInductor package loader segfaults at load
LOADER_SEGFAULTS = frozenset({(2, 11)})


def loader_segfaults(version: str) -> bool:
    return torch.torch_version.Version(version).release[:2] in LOADER_SEGFAULTS


class AOTInductor(Workflow[NoOptions]):
    def compile_module(self, module: torch.nn.Module, inputs: tuple[torch.Tensor, ...],
                       ctx: WorkflowContext[NoOptions]) -> Prepared[Callable[..., object]]:
        if loader_segfaults(torch.__version__):
            raise Unsupported(f"aot_inductor: torch {torch.__version__}'s aoti_load_package segfaults in the generated "
                              "model container's constructor (CPU and CUDA packages, fresh processes too; cf. "
                              "pytorch/pytorch#166415); torch 2.13 loads the same package "
                              "(STEP=aoti benchmarks/paper_device.sh)")
        exported = torch.export.export(module, inputs)
        package = ctx.cache_dir / "aot_inductor" / f"{ctx.job.job_id}.pt2"
        package.parent.mkdir(parents=True, exist_ok=True)
        path = torch._inductor.aoti_compile_and_package(exported, package_path=str(package))
        return Prepared(torch._inductor.aoti_load_package(path),
                        Applied(backend="inductor", export="torch.export", dynamic_shapes=False),
                        notes={"package": str(path)})
