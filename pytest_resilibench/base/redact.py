"""One redaction for every text that leaves the process (the JSON report, JUnit XML through
the failures' messages, the terminal, the HTML built from the report): credentials in URLs and
the API keys this process knows never get written anywhere.

Stripped: URL user info (`https://user:key@host`), the values of key-like query parameters
(`?api-key=...`, `&token=...`), bearer tokens, OpenAI-style secret keys (`sk-...`), and every
secret registered with `register_secret` (a provider registers the key it sends, so a server
that echoes it in an error message cannot get it written) or held in `OPENAI_API_KEY`.
`register_secrets_in` registers the values of key-like fields of a JSON option, so that a key
passed in `--resili-model-args` (say `{"extra_headers": {"api-key": "..."}}`) is masked too.
"""

from __future__ import annotations

import os
import re
from typing import Any

__all__ = ["MASK", "redact", "register_secret", "register_secrets_in"]

MASK = "***"
_MIN_SECRET = 6  # shorter "secrets" (a placeholder such as "none") would mask ordinary words
_SECRETS: set[str] = set()
# What names a secret: in a URL's query (`?api-key=`, where `sig` counts too) and in a JSON
# option's field names.
_SECRET_WORDS = "key|token|secret|password|passwd|pwd|auth|signature|credential"
_SECRET_NAME = re.compile(f"(?i){_SECRET_WORDS}")
# (substrings one of which every match contains: most texts skip the regex, pattern, what
# replaces a match)
_PATTERNS = (
    (("@",), re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^\s/?#@\"']*@"), rf"\1{MASK}@"),
    (("=",), re.compile(rf"(?i)([?&;](?:[a-z0-9_-]*(?:sig|{_SECRET_WORDS})[a-z0-9_-]*)=)"
                        r"[^&#\s\"'<>]*"), rf"\1{MASK}"),
    (("earer", "EARER"), re.compile(r"(?i)\b(bearer\s+)[a-z0-9._~+/=-]{8,}"), rf"\1{MASK}"),
    (("sk-",), re.compile(r"\bsk-[A-Za-z0-9_-]{12,}"), f"sk-{MASK}"),
)


def register_secret(value: str | None) -> None:
    """Mask `value` wherever `redact` sees it, for the rest of this process."""
    if value and len(value) >= _MIN_SECRET:
        _SECRETS.add(value)


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


def redact(text: str) -> str:
    """`text` with every credential it holds replaced by `***`."""
    for markers, pattern, replacement in _PATTERNS:
        if any(marker in text for marker in markers):
            text = pattern.sub(replacement, text)
    env_key = os.environ.get("OPENAI_API_KEY")
    for secret in (*_SECRETS, *((env_key,) if env_key and len(env_key) >= _MIN_SECRET else ())):
        if secret in text:
            text = text.replace(secret, MASK)
    return text
