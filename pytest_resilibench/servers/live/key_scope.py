"""Where the live services' key may go: one origin, the `resilibench serve-live --api-key KEY`
that asks for it, never a public API that a `--resili-live-base-url` names beside it.

An origin is scheme, host and port (RFC 6454): `http://bench:8765/weather_forecast` and
`http://bench:8765/random_fact` share one; `https://api.example.com/jokes` is another. The key's
origin is that of `--resili-live-server` when given; else the one origin the service URLs share;
URLs on several origins with no server named are refused (the key would reach them all).
Pure functions: option parsing and `LiveEnvironment` use them alike.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

__all__ = ["key_origin", "origin"]

_DEFAULT_PORTS = {"http": 80, "https": 443}


def origin(url: str) -> str:
    """`scheme://host:port` of an http(s) URL, the port spelled out (so `https://a` and
    `https://a:443` are one origin); user info and path dropped. ValueError if no host."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        raise ValueError(f"not an http(s) URL with a host: {url!r}")
    host = parts.hostname  # lower-cased by urlsplit; an IPv6 address without its brackets
    if ":" in host:
        host = f"[{host}]"
    return f"{scheme}://{host}:{parts.port or _DEFAULT_PORTS[scheme]}"


def key_origin(server: str | None, service_urls: Iterable[str]) -> str | None:
    """The one origin the key goes to: the server's, else the one the service URLs share (None
    when there are none: the run's own loopback services take no key). ValueError naming the
    origins when the URLs span several and no server is named."""
    if server is not None:
        return origin(server)
    origins = sorted({origin(url) for url in service_urls})
    if len(origins) > 1:
        raise ValueError(
            f"the live service URLs are on {len(origins)} origins ({', '.join(origins)}): name "
            "the serve-live that takes the key with --resili-live-server URL (the key goes to "
            "that origin only, never to the others)")
    return origins[0] if origins else None
