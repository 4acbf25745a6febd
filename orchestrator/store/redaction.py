"""Secrets (tokens for real checkpoints) reach workers as environment variables at run time only: never an image
layer, a label, a log line or a stored result. A store URL's credentials, however written (user-info, a password
query parameter, a password holding an unencoded '@'), are masked in everything printed, stored or reported: one
`url_secrets` finds them and one `mask` hides them."""

import json
import os
import re
from typing import Iterable, Mapping, Optional
from urllib.parse import unquote

from mlcbench.schema import Result

# Host variables handed to workers at run time.
SECRETS = ("HF_TOKEN",)
MASK = "***"
# shorter values would mask ordinary text ("1", "yes") rather than a secret
MIN_SECRET_CHARS = 8


# query parameters that carry a credential (libpq's and the common drivers' names)
PASSWORD_PARAMETERS = ("password", "passwd", "pwd", "sslpassword")
_QUERY_PASSWORD = re.compile(r"([?&;](?:%s)=)([^&;#]*)" % "|".join(PASSWORD_PARAMETERS), re.I)
# scheme://USER:PASSWORD@...: the password up to the last '@' before the path (so an unencoded '@' stays in it) ...
_LENIENT_USERINFO = re.compile(r"^[A-Za-z][\w+.-]*://[^:/?#@]*:(?P<password>[^/?#]*)@")
# ... or, as SQLAlchemy reads it, up to the first '@' (so it may hold '/'); an unencoded '@' then runs into the host
_SQLALCHEMY_USERINFO = re.compile(r"^[\w+.-]+://[^:/]*:(?P<password>[^@]*)@(?P<host>[^/:?]*)")
# the fields of a result that hold what something said, rather than a name or a figure
FREE_TEXT = ("reason", "error", "log_tail")
# a store password shorter than this is masked by its place where a URL is shown, but not searched for in other text:
# there it would stand for ordinary letters ("p" of every word) and could break a stored result's JSON
MIN_TEXT_SECRET_CHARS = 4


def _userinfo_passwords(url: str) -> set[str]:
    """The password of a URL's user-info, as written, however it is read."""
    found = set()
    lenient = _LENIENT_USERINFO.match(url)
    if lenient:
        found.add(lenient["password"])
    strict = _SQLALCHEMY_USERINFO.match(url)
    if strict:
        host = strict["host"]
        found.add(strict["password"] + ("@" + host.rpartition("@")[0] if "@" in host else ""))
    return {password for password in found if password}


def url_secrets(url: str) -> list[str]:
    """The credentials in a database URL long enough to be looked for in any text (MIN_TEXT_SECRET_CHARS), each as
    written and percent-decoded: the password of its user-info and the value of every password query parameter."""
    written = _userinfo_passwords(url) | {match[2] for match in _QUERY_PASSWORD.finditer(url) if match[2]}
    forms = {form for secret in written for form in (secret, unquote(secret))}
    return sorted((form for form in forms if len(form) >= MIN_TEXT_SECRET_CHARS), key=len, reverse=True)


def mask(text: str, secrets: Iterable[str]) -> str:
    """text with every secret replaced by the mask (longest first, so one that holds another goes whole)."""
    for secret in sorted(secrets, key=len, reverse=True):
        if secret:
            text = text.replace(secret, MASK)
    return text


def mask_url(url: str) -> str:
    """The URL for messages, stores and reports: its credentials masked where they stand, however short."""
    masked = _QUERY_PASSWORD.sub(lambda match: match[1] + MASK, url)
    for password in sorted(_userinfo_passwords(url), key=len, reverse=True):
        if f":{password}@" in masked:
            return masked.replace(f":{password}@", f":{MASK}@", 1)
    return masked


# the credentials of every store this process opened: masked in any error or warning it prints (a Slurm or database
# message may quote them)
_OPENED: set[str] = set()


def remember(secrets: Iterable[str]) -> None:
    _OPENED.update(secret for secret in secrets if secret)


def forget() -> None:
    """A new command begins: the stores an earlier one in this process opened are none of its concern."""
    _OPENED.clear()


def mask_remembered(text: str) -> str:
    return mask(text, _OPENED)


def secret_values(environ: Optional[Mapping[str, str]] = None) -> list[str]:
    environ = os.environ if environ is None else environ
    return [environ[name] for name in SECRETS if len(environ.get(name, "")) >= MIN_SECRET_CHARS]


def redact(result: Result, environ: Optional[Mapping[str, str]] = None, also: Iterable[str] = ()) -> Result:
    """The result with every secret value masked wherever it appears (a worker may echo its environment in an error
    or a log tail), and those in `also` (the store URL's, which no worker is given) in its free text: a short one
    could also spell a model's or a workflow's name."""
    # as they appear inside JSON strings
    values = [json.dumps(value)[1:-1] for value in secret_values(environ)]
    text = result.model_dump_json()
    if any(value in text for value in values):
        for value in values:
            text = text.replace(value, MASK)
        result = Result.model_validate_json(text)
    free_text = {name: mask(value, also) for name in FREE_TEXT if (value := getattr(result, name)) is not None}
    return result.model_copy(update=free_text) if free_text != {name: getattr(result, name) for name in free_text} \
        else result
