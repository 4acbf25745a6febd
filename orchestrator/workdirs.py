"""The work folders of sweeps (exchange files, worker logs): a sweep's stay while it runs; once it has ended they
are removed, except those of the latest sweep that had failures (their logs say why). A folder without an end marker
belongs to a sweep still running, or one killed outright, and is left alone."""

import hashlib
import re
import shutil
from pathlib import Path
from typing import Optional

ENDED, FAILED = ".ended", ".failed"  # marker files; their text is the sweep id
# where the default work folders of sweeps go, one per store
ROOT = Path("results/work")


def for_store(identity: str) -> Path:
    """The default work folder of sweeps into one store (named by its identity, recovery.store_identity): what a
    killed sweep left there is read back into its own store only."""
    name = re.sub(r"[^A-Za-z0-9]+", "-", identity.rsplit("/", 1)[-1]).strip("-")[:40] or "store"
    return ROOT / f"{name}-{hashlib.sha256(identity.encode()).hexdigest()[:8]}"


def tidy(workdir: Path, sweep_id: str, failed: bool) -> None:
    """Mark this sweep's folders ended, then remove every ended folder but those of the latest failed sweep."""
    for folder in workdir.glob(f"{sweep_id}-*"):
        if folder.is_dir():
            (folder / (FAILED if failed else ENDED)).write_text(sweep_id, encoding="utf-8")
    ended = {marker: _read(marker) for marker in [*workdir.glob(f"*/{ENDED}"), *workdir.glob(f"*/{FAILED}")]}
    failures = sorted(found for marker, found in ended.items() if found and marker.name == FAILED)
    keep = failures[-1][1] if failures else None
    for marker, found in ended.items():
        if found and found[1] != keep:
            shutil.rmtree(marker.parent, ignore_errors=True)
    if workdir.parent.resolve() == ROOT.resolve() and workdir.is_dir() and not any(workdir.iterdir()):
        workdir.rmdir()  # a store's default folder, left empty


def _read(marker: Path) -> Optional[tuple[float, str]]:
    """(when, sweep id) of an end marker; None when another sweep's tidy removed it meanwhile."""
    try:
        return marker.stat().st_mtime, marker.read_text(encoding="utf-8")
    except OSError:
        return None
