from typing import Annotated, Final

from pydantic import AfterValidator, BaseModel, ConfigDict
from pydantic_core import PydanticCustomError

# Bump when a stored or exchanged model changes shape; readers refuse versions they do not know.
SCHEMA_VERSION: Final = 1


def invalid(message: str) -> PydanticCustomError:
    """A validator's error, read as `message` wherever it is shown (a ValueError's reads "Value error, message")."""
    return PydanticCustomError("invalid", message)


class StrictModel(BaseModel):
    """Base of every boundary model: unknown fields are errors, instances are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


# a name's most characters: the store's text columns hold 64 (PostgreSQL refuses more, after the job has run)
NAME_MAX_CHARS = 64
# characters a name may not hold: path separators (a name becomes a cache folder) and rich's markup brackets
NAME_FORBIDDEN = "/\\[]"


def _safe_name(name: str) -> str:
    if not name or name != name.strip() or name in (".", ".."):
        raise invalid(f"{name!r}: a name is not empty, '.' or '..' and has no spaces around it")
    if len(name) > NAME_MAX_CHARS:
        raise invalid(f"{name[:NAME_MAX_CHARS]!r}... is {len(name)} characters; a name has at most {NAME_MAX_CHARS}")
    unsafe = sorted({char for char in name if not char.isprintable() or char in NAME_FORBIDDEN})
    if unsafe:
        raise invalid(f"{name!r} holds {', '.join(map(repr, unsafe))}: a name becomes a folder, a value in the "
                      f"store and terminal text (letters, digits and . _ + - are safe)")
    return name


# a name a user gives (a suite, a model): checked once, where it enters, for everything it becomes
Name = Annotated[str, AfterValidator(_safe_name)]
