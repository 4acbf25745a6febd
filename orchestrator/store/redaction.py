"""Secrets (tokens for real checkpoints) reach workers as environment variables at run time only: never an image
layer, a label, a log line or a stored result. A store URL's credentials, however written (user-info, a password
query parameter, a password holding an unencoded '@'), are masked in everything printed, stored or reported: one
`url_secrets` finds them and one `mask` hides them."""

import json
import os
import re
from typing import Iterable, Mapping, Optional
from urllib.parse import parse_qsl, unquote

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from mlcbench.schema import Result

# Host variables handed to workers at run time.
SECRETS = ("HF_TOKEN",)
MASK = "***"
# shorter values would mask ordinary text ("1", "yes") rather than a secret
MIN_SECRET_CHARS = 8


# query parameters that carry a credential (libpq's and the common drivers' names)
PASSWORD_PARAMETERS = frozenset({"password", "passwd", "pwd", "sslpassword"})
# scheme://USERINFO@...: the user-info up to the last '@' before the path, so an unencoded '@' stays inside it
_USERINFO = re.compile(r"^[A-Za-z][\w+.-]*://(?P<userinfo>[^/?#]*)@")


def url_secrets(url: str) -> list[str]:
    """The credentials in a database URL, each as written and percent-decoded: the password of its user-info and the
    value of every password query parameter."""
    found = set()
    userinfo = _USERINFO.match(url)
    if userinfo and ":" in userinfo["userinfo"]:
        found.add(userinfo["userinfo"].partition(":")[2])
    _, _, query = url.partition("?")
    found.update(value for name, value in parse_qsl(query.partition("#")[0], keep_blank_values=True)
                 if name.lower() in PASSWORD_PARAMETERS)
    found.update(re.findall(r"(?:^|[&;])(?:%s)=([^&;#]*)" % "|".join(PASSWORD_PARAMETERS), query, flags=re.I))
    try:  # a password holding '/' is the driver's to split, not the pattern's
        parsed = make_url(url)
    except (ArgumentError, ValueError):
        parsed = None
    if parsed is not None and parsed.password:
        # SQLAlchemy ends the password at its first '@': the rest, up to the last '@', is in what it calls the host
        found.add(parsed.password + ("@" + parsed.host.rpartition("@")[0] if "@" in (parsed.host or "") else ""))
    return sorted({form for secret in found if secret for form in (secret, unquote(secret))}, key=len, reverse=True)


def mask(text: str, secrets: Iterable[str]) -> str:
    """text with every secret replaced by the mask (longest first, so one that holds another goes whole)."""
    for secret in sorted(secrets, key=len, reverse=True):
        if secret:
            text = text.replace(secret, MASK)
    return text


# the credentials of every store this process opened: masked in any error or warning it prints (a Slurm or database
# message may quote them)
_OPENED: set[str] = set()


def remember(secrets: Iterable[str]) -> None:
    _OPENED.update(secret for secret in secrets if secret)


def mask_remembered(text: str) -> str:
    return mask(text, _OPENED)


def mask_url(url: str) -> str:
    """The URL for messages and reports: its credentials masked."""
    return mask(url, url_secrets(url))


def secret_values(environ: Optional[Mapping[str, str]] = None) -> list[str]:
    environ = os.environ if environ is None else environ
    return [environ[name] for name in SECRETS if len(environ.get(name, "")) >= MIN_SECRET_CHARS]


def redact(result: Result, environ: Optional[Mapping[str, str]] = None, also: Iterable[str] = ()) -> Result:
    """The result with every secret value (and those in `also`: the store URL's) masked wherever it appears (a
    worker may echo its environment in an error or a log tail)."""
    # as they appear inside JSON strings
    values = [json.dumps(value)[1:-1] for value in [*secret_values(environ), *also]]
    text = result.model_dump_json()
    if not any(value in text for value in values):
        return result
    for value in values:
        text = text.replace(value, MASK)
    return Result.model_validate_json(text)
