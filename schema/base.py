from pydantic import BaseModel, ConfigDict

# Bump when a stored or exchanged model changes shape; readers refuse versions they do not know.
SCHEMA_VERSION = 1


class StrictModel(BaseModel):
    """Base of every boundary model: unknown fields are errors, instances are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)
