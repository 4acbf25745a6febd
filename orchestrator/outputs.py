"""Files and folders a user names for output (`export --out`, `report --markdown`, `report --html`): checked before
any work, and written through to what the path names. A symlink is followed to its target (the link stays a link); a
FIFO, a device, a folder where a file is wanted or a file where a folder is wanted is refused, naming the user's path.
A file is written beside its target and renamed over it: a failure leaves the previous file whole. An output that is
a file the command reads (its SQLite store, through any name) is refused: writing it would destroy what it reads."""

import os
import stat
from pathlib import Path
from typing import Callable, Iterable

from mlcbench.orchestrator.errors import EnvironmentFailure, UsageError

STDOUT = Path("-")
REGULAR_FILE, FOLDER = "a regular file", "a folder"


def output_file(path: Path, option: str, reads: Iterable[Path] = ()) -> Path:
    """The regular file `path` names (through any symlinks), which may not exist yet; a UsageError if it cannot be
    one, or if it is one of the files the command `reads`."""
    target = _resolved(path, option)
    for read in reads:
        if _is_same_file(target, read):
            raise UsageError(f"{option} {path}: {_named(path, target)} is {read}, which this command reads; writing "
                             f"it would destroy it; name another file")
    if target.exists():
        kind = _kind(target)
        if kind != REGULAR_FILE:
            raise UsageError(f"{option} {path}: {_named(path, target)} is {kind}, not a regular file; name a file")
    _folder_or_creatable(target.parent, option, path)
    if target.exists() and not os.access(target, os.W_OK):
        raise UsageError(f"{option} {path}: {_named(path, target)} cannot be written; choose a file you can write")
    return target


def output_folder(path: Path, option: str) -> Path:
    """The folder `path` names (through any symlinks), which may not exist yet; a UsageError if it cannot be one."""
    target = _resolved(path, option)
    _folder_or_creatable(target, option, path)
    return target


def write_atomically(path: Path, write: Callable[[Path], None]) -> None:
    """write() a temporary file beside the file `path` names, then rename it over that file: a failure leaves the
    previous file whole. A failing machine (full disk) is an EnvironmentFailure naming `path`."""
    target = output_file(path, "output")
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        write(temporary)
        os.replace(temporary, target)
    except OSError as error:
        raise EnvironmentFailure(f"cannot write {path}: {error.strerror or error}; free space or choose another "
                                 f"place, then run the same command again") from None
    finally:
        temporary.unlink(missing_ok=True)


def _resolved(path: Path, option: str) -> Path:
    try:
        return path.expanduser().resolve()
    except (OSError, RuntimeError) as error:  # a symlink loop
        raise UsageError(f"{option} {path}: cannot follow the path ({error})") from None


def _is_same_file(target: Path, read: Path) -> bool:
    """The same file by path (through symlinks) or, where both exist, by inode (a hard link)."""
    resolved = read.expanduser().resolve()
    if target == resolved:
        return True
    return target.exists() and resolved.exists() and os.path.samefile(target, resolved)


def _folder_or_creatable(folder: Path, option: str, given: Path) -> None:
    """A folder that exists, or whose nearest existing ancestor is a folder that can be written."""
    existing = folder
    while not existing.exists():
        existing = existing.parent
    kind = _kind(existing)
    if kind != FOLDER:
        raise UsageError(f"{option} {given}: {existing} is {kind}, not a folder; choose a folder")
    if not os.access(existing, os.W_OK):
        raise UsageError(f"{option} {given}: the folder {existing} cannot be written; choose a place you can write to")


def _kind(path: Path) -> str:
    mode = path.stat().st_mode
    if stat.S_ISREG(mode):
        return REGULAR_FILE
    if stat.S_ISDIR(mode):
        return FOLDER
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _named(given: Path, target: Path) -> str:
    return str(given) if given.expanduser().absolute() == target else f"{given} (-> {target})"
