"""One redaction for every text that leaves the process (the JSON report, JUnit XML through
the failures' messages, the terminal, the HTML built from the report): credentials in URLs and
the API keys this process knows never get written anywhere.

Stripped: URL user info (`https://user:key@host`), the values of key-like query parameters
(`?api-key=...`, `&token=...`), bearer tokens, HTTP Basic credentials (`Basic dXNlcjpwYXNz`:
a base64 token that decodes to `user:password`), OpenAI-style secret keys (`sk-...`), and
every secret registered with `register_secret` (a provider registers the key it sends, so a
server that echoes it in an error message cannot get it written) or held in `OPENAI_API_KEY`,
as written and in base64 (a secret inside any base64 text: each of its three alignments).
`register_secrets_in` registers the values of key-like fields of a JSON option, so that a key
passed in `--resili-model-args` (say `{"extra_headers": {"api-key": "..."}}`) is masked too.
`register_url_credentials` registers a URL's user info in every form it is sent in: httpx
turns `http://user:pass@host` into the header `Authorization: Basic base64(user:pass)`, which
servers echo in error bodies. `redact_json` masks JSON data (a request's parameters) by the same
rule: the values under key-like names and every header value, whatever `redact` masks in the
rest.
"""

from __future__ import annotations

import base64
import binascii
import functools
import os
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote, urlsplit

__all__ = ["MASK", "redact", "redact_json", "register_secret", "register_secrets_in",
           "register_url_credentials"]

MASK = "***"
_MIN_SECRET = 6  # shorter "secrets" (a placeholder such as "none") would mask ordinary words
_SECRETS: set[str] = set()
# What names a secret: in a URL's query (`?api-key=`, where `sig` counts too) and in a JSON
# option's field names.
_SECRET_WORDS = "key|token|secret|password|passwd|pwd|auth|signature|credential"
_SECRET_NAME = re.compile(f"(?i){_SECRET_WORDS}")
# A field of HTTP headers (`extra_headers`, `default_headers`): every value in it is masked.
_HEADERS_NAME = re.compile(r"(?i)headers$")


def _basic(match: re.Match[str]) -> str:
    """`Basic TOKEN` masked when TOKEN is the base64 of `user:password` (so that "basic
    training" is left alone)."""
    token = match.group(2)
    try:
        decoded = base64.b64decode(token + "=" * (-len(token) % 4), validate=True).decode()
    except (binascii.Error, ValueError):
        return match.group(0)
    return match.group(1) + MASK if ":" in decoded and decoded.isprintable() else match.group(0)


# (substrings one of which every match contains: most texts skip the regex, pattern, what
# replaces a match)
_PATTERNS: tuple[tuple[tuple[str, ...], re.Pattern[str], str | Callable[[re.Match[str]], str]],
                 ...] = (
    (("@",), re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^\s/?#@\"']*@"), rf"\1{MASK}@"),
    (("=",), re.compile(rf"(?i)([?&;](?:[a-z0-9_-]*(?:sig|{_SECRET_WORDS})[a-z0-9_-]*)=)"
                        r"[^&#\s\"'<>]*"), rf"\1{MASK}"),
    (("earer", "EARER"), re.compile(r"(?i)\b(bearer\s+)[a-z0-9._~+/=-]{8,}"), rf"\1{MASK}"),
    (("asic", "ASIC"), re.compile(r"(?i)\b(basic\s+)([a-z0-9+/]{4,}={0,2})(?![a-z0-9+/=])"),
     _basic),
    (("sk-",), re.compile(r"\bsk-[A-Za-z0-9_-]{12,}"), f"sk-{MASK}"),
)


@functools.lru_cache(maxsize=256)
def _forms(secret: str) -> tuple[str, ...]:
    """`secret` and its base64 text wherever it stands in a base64 blob (`Basic
    base64(user:secret)`): for each of the three alignments of its bytes, the characters that
    only its bytes decide (the neighbours' bits change the first and last one or two)."""
    data = secret.encode("utf-8", "surrogatepass")
    forms = [secret]
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + data).decode()
        core = encoded[-(-8 * offset // 6): 8 * (offset + len(data)) // 6]
        if len(core) >= _MIN_SECRET:
            forms.append(core)
    return tuple(forms)


def register_secret(value: str | None) -> None:
    """Mask `value` wherever `redact` sees it, for the rest of this process."""
    if value and len(value) >= _MIN_SECRET:
        _SECRETS.update(_forms(value))


def register_secrets_in(value: Any) -> None:
    """Register every string held under a key-like name anywhere in `value` (JSON data)."""
    if isinstance(value, dict):
        for name, item in value.items():
            if isinstance(item, str) and _SECRET_NAME.search(str(name)):
                register_secret(item)
                register_secret(item.partition(" ")[2])  # "Bearer KEY": the key alone too
            else:
                register_secrets_in(item)
    elif isinstance(value, list):
        for item in value:
            register_secrets_in(item)


def register_url_credentials(url: str | None) -> None:
    """Register the user info of `url` (`http://user:pass@host/v1`) in every form it is sent
    in: as written, percent-decoded, the password alone (the user name when there is no
    password: a token), and the HTTP Basic credential httpx makes of it, the base64 of
    `user:pass` (percent-decoded)."""
    if not url:
        return
    try:
        netloc = urlsplit(url.strip()).netloc
    except ValueError:
        return
    userinfo, at, _host = netloc.rpartition("@")
    if not at or not userinfo:
        return
    user, colon, password = userinfo.partition(":")
    for value in (userinfo, password if colon else user):
        register_secret(value)
        register_secret(unquote(value))
    credential = f"{unquote(user)}:{unquote(password)}"
    register_secret(credential)
    basic = base64.b64encode(credential.encode()).decode()
    if len(basic) >= _MIN_SECRET:
        _SECRETS.add(basic)  # whole (its password's forms alone leave the user's part)


def redact(text: str) -> str:
    """`text` with every credential it holds replaced by `***`."""
    for markers, pattern, replacement in _PATTERNS:
        if any(marker in text for marker in markers):
            text = pattern.sub(replacement, text)
    env_key = os.environ.get("OPENAI_API_KEY")
    env = _forms(env_key) if env_key and len(env_key) >= _MIN_SECRET else ()
    # Longest first: a whole Basic token goes before the base64 of its password within it.
    for secret in sorted({s for s in (*_SECRETS, *env) if s in text}, key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text


def redact_json(value: Any, *, by_name: bool = True) -> Any:
    """A copy of `value` (JSON data, say a request's parameters) that holds no secret: every
    string under a key-like name (`register_secrets_in`'s rule) or in a field of HTTP headers
    (`extra_headers`, `default_headers`: all their values) is `***`; every other string, field
    names included, passes through `redact`. Numbers, booleans and null are kept as they are
    (`max_tokens` names no secret), so data with nothing to mask comes back equal.
    `by_name=False` applies `redact` alone, for data whose field names say nothing of secrets
    (a server's reply, where `logprobs` hold a `token` field)."""
    return _redact_json(value, hide=False, by_name=by_name)


def _redact_json(value: Any, *, hide: bool, by_name: bool) -> Any:
    if isinstance(value, dict):
        return {redact(name) if isinstance(name, str) else name: _redact_json(
                    item, by_name=by_name,
                    hide=hide or (by_name and bool(_SECRET_NAME.search(str(name))
                                                   or _HEADERS_NAME.search(str(name)))))
                for name, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_redact_json(item, hide=hide, by_name=by_name) for item in value]
    if isinstance(value, str):
        return MASK if hide else redact(value)
    return value
