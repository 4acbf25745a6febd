"""The result store and everything that writes to it: the database and its migrations, the provenance stamp, secret
redaction, and merging stores. `record()` is the one way a result enters a store."""

from typing import Optional

from mlcbench.orchestrator.store import provenance
from mlcbench.orchestrator.store.database import DEFAULT_DB, ResultRow, Store, open_engine, safe_url
from mlcbench.orchestrator.store.redaction import redact
from mlcbench.schema import Result


def record(store: Store, result: Result, env: str, gpu_tag: str, image_digest: Optional[str],
           sweep_id: Optional[str], config_key: Optional[str] = None, attempt: Optional[int] = None,
           ) -> tuple[Result, int]:
    """Stamp a worker's (or the planner's) result with its provenance, mask secrets (the store URL's too), store it as
    a new attempt, or as the longer form of the attempt stored in row `attempt`; returns what was stored and its row
    id."""
    stored = redact(provenance.finish(result, env, gpu_tag, image_digest, config_key, sweep_id), also=store.secrets)
    return stored, store.put_attempt(stored, sweep_id=sweep_id, row_id=attempt)


__all__ = ["DEFAULT_DB", "ResultRow", "Store", "open_engine", "record", "safe_url"]
