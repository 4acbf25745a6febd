"""The key of mlcbench's own code in every cache that hands a program or an output to a later process: torchax's
exported traces (jax_traces.py), dynamo's precompile and Inductor's folders (inductor_cache.py) and eager's references
(measurement/references.py). Their other keys hold config, shapes, options and versions, not the code that builds the
model and the program: without this one, code changed under a warm cache loaded the old code's traces or graphs (a
bug planted after a clean run passed with the clean run's error). The key is the content of every source file of the
worker and schema packages as this process imports them: any edit changes it, a checkout of the same files does
not."""

import functools
import hashlib
import json
from pathlib import Path
from typing import Mapping

import mlcbench.schema

# the packages whose source is hashed: the worker (this file's package) and the schema it reads its jobs with
SOURCES = {"workers": Path(__file__).resolve().parents[1], "schema": Path(mlcbench.schema.__file__).resolve().parent}


@functools.cache  # the code does not change while a worker runs; hashing it takes a few milliseconds
def worker_code() -> str:
    """sha256 of the worker's and the schema's source files, by path and content."""
    digest = hashlib.sha256()
    for package, root in sorted(SOURCES.items()):
        for source in sorted(root.rglob("*.py")):
            digest.update(f"{package}/{source.relative_to(root).as_posix()}".encode() + b"\0" + source.read_bytes()
                          + b"\0")
    return digest.hexdigest()


def artifact_key(parts: Mapping[str, str]) -> str:
    """A folder or file name for artifacts that depend on exactly `parts` (name -> value) and on the worker's code."""
    keyed = {**parts, "worker_code": worker_code()}
    return hashlib.sha256(json.dumps(keyed, sort_keys=True).encode()).hexdigest()[:24]
