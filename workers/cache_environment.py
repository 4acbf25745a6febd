"""Where a worker process's libraries write: every folder under its cache folder (--cache-dir), named in the
process's environment as its first step (the worker's, or the zygote's before it imports torch), before any library
has read one.

Compilers' caches (Inductor with its FX graphs and AOTAutograd, Triton), Hugging Face's, and the home and temporary
folders that libraries fall back to (Triton's ~/.triton, Inductor's /tmp/torchinductor_<user>, CUDA's ~/.nv, the
temporary files of gcc and Python): whether a process compiles cold or warm then depends on the cache folder alone,
never on what /tmp or the user's home hold, and a container's unprivileged user writes only there and in its
exchange folder (orchestrator/runtimes/docker.py gives it nothing else). A workflow may still point a compiler at a
folder of its own below the cache folder (stacks/inductor_cache.py, torchax's JAX cache)."""

import os
import site
from pathlib import Path

# the cache folder's subfolder that holds them all
PROCESS_FOLDER = "process"
# variable -> its folder in PROCESS_FOLDER
FOLDERS = {"HOME": "home", "XDG_CACHE_HOME": "home/.cache", "TRITON_HOME": "home", "TMPDIR": "tmp",
           "TORCHINDUCTOR_CACHE_DIR": "inductor", "TRITON_CACHE_DIR": "triton", "HF_HOME": "huggingface"}


def use_cache_folder_only(cache_dir: Path) -> None:
    """Point every variable of FOLDERS at its folder under `cache_dir`, made where missing."""
    # a new HOME would move the user's own site-packages for the interpreters this one starts (Inductor's compile
    # workers): they stay where the user's home had them
    os.environ.setdefault("PYTHONUSERBASE", site.getuserbase())
    root = cache_dir.resolve() / PROCESS_FOLDER
    for variable, folder in FOLDERS.items():
        (root / folder).mkdir(parents=True, exist_ok=True)
        os.environ[variable] = str(root / folder)
