"""The live key's one origin (servers/live/key_scope.py)."""

from __future__ import annotations

import pytest

from pytest_resilibench.servers.live.key_scope import key_origin, origin


@pytest.mark.parametrize(("url", "expected"), [
    ("http://bench:8765/weather_forecast", "http://bench:8765"),
    ("HTTPS://API.Example.com/jokes?x=1", "https://api.example.com:443"),
    ("https://api.example.com:443", "https://api.example.com:443"),
    ("http://user:secret@bench/x", "http://bench:80"),
    ("http://[::1]:9000/x", "http://[::1]:9000"),
])
def test_an_origin_is_scheme_host_and_port(url: str, expected: str) -> None:
    assert origin(url) == expected


@pytest.mark.parametrize("url", ["ftp://bench/x", "bench:8765", "http:///x", ""])
def test_a_url_without_an_http_origin_is_refused(url: str) -> None:
    with pytest.raises(ValueError, match="not an http"):
        origin(url)


def test_the_key_goes_to_the_server_named_else_to_the_one_origin_of_the_urls() -> None:
    mixed = ["http://bench:8765/weather_forecast", "https://api.example.com/jokes"]
    assert key_origin("http://bench:8765", mixed) == "http://bench:8765"
    assert key_origin(None, mixed[:1] * 3) == "http://bench:8765"
    assert key_origin(None, []) is None
    with pytest.raises(ValueError) as refused:
        key_origin(None, mixed)
    message = str(refused.value)
    assert "https://api.example.com:443" in message and "http://bench:8765" in message
    assert "--resili-live-server" in message
