"""Inductor's on-disk caches (FX graphs, AOTAutograd, Triton kernels, autotuning results) in the env's cache folder,
in a subfolder named after everything that makes a compiled kernel invalid elsewhere: the image, the interpreter,
the torch and Triton versions and the GPU. A stale cache is never read; the next worker process finds a warm one."""

import os
import platform
import re
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from mlcbench.schema.protocol import IMAGE_DIGEST_ENV

if TYPE_CHECKING:
    import torch


def cache_key(python: str, torch_version: str, triton_version: Optional[str], device: str,
              image_digest: Optional[str]) -> str:
    parts = [f"py{python}", f"torch{torch_version}", f"triton{triton_version or '-none'}", device]
    if image_digest:
        parts.append(f"image{image_digest.removeprefix('sha256:')[:16]}")
    return re.sub(r"[^A-Za-z0-9.+_-]", "_", "-".join(parts))


def current_key(device: "torch.device") -> str:
    import torch

    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        device_name = f"{props.name}-sm{props.major}{props.minor}"
    else:
        device_name = f"cpu-{platform.machine()}"
    return cache_key(platform.python_version(), torch.__version__, triton_version, device_name,
                     os.environ.get(IMAGE_DIGEST_ENV))


def use_cache_folder(root: Path, device: "torch.device") -> Path:
    """Point Inductor and Triton at root/inductor/<key> for every compile from now on in this process."""
    folder = root / "inductor" / current_key(device)
    folder.mkdir(parents=True, exist_ok=True)
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(folder)
    # set explicitly: Inductor pins TRITON_CACHE_DIR to its cache folder of the moment at its first kernel
    os.environ["TRITON_CACHE_DIR"] = str(folder / "triton")
    return folder
