"""Files the worker writes that another process may read at the same moment (a cache, a calibration)."""

import os
import tempfile
from pathlib import Path
from typing import BinaryIO, Callable


def write_atomically(path: Path, write: Callable[[BinaryIO], object]) -> None:
    """write() into a temporary file beside `path`, then rename it over `path`: a reader finds it whole or not at all."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as file:
            write(file)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
