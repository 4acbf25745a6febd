"""PyTorch's own AOT path: torch.export, then AOTInductor compiles a package (a shared library + weights) that is
loaded back and called. Compile cost is the build; the package lands in the env cache."""

import torch

from mlcbench.schema import Applied
from mlcbench.workers.interface import Prepared, Workflow


class AOTInductor(Workflow):
    def compile_module(self, module, inputs, ctx):
        exported = torch.export.export(module, inputs)
        package = ctx.cache_dir / "aot_inductor" / f"{ctx.job.job_id}.pt2"
        package.parent.mkdir(parents=True, exist_ok=True)
        path = torch._inductor.aoti_compile_and_package(exported, package_path=str(package))
        return Prepared(torch._inductor.aoti_load_package(path),
                        Applied(backend="inductor", export="torch.export", dynamic_shapes=False),
                        notes={"package": str(path)})
