"""redact(): URL user info, key-like query parameters, bearer tokens, secret keys and the keys
this process knows are masked; other text is left alone."""

from __future__ import annotations

import pytest

from pytest_resilibench.base.redact import redact, register_secret, register_secrets_in


@pytest.mark.parametrize(("text", "shown"), [
    ("http://alice:pw1@127.0.0.1:8000/v1", "http://***@127.0.0.1:8000/v1"),
    ("at https://tok@host/v1: HTTP 500", "at https://***@host/v1: HTTP 500"),
    ("http://h/v1?api-key=abc123&x=1", "http://h/v1?api-key=***&x=1"),
    ("http://h/v1?x=1&access_token=zz#top", "http://h/v1?x=1&access_token=***#top"),
    ("http://h/v1?Signature=s1g&code=7", "http://h/v1?Signature=***&code=7"),
    ("Authorization: Bearer abcdefghijk", "Authorization: ***"),
    ("key sk-proj-abcdefghijklmnop was refused", "key sk-*** was refused"),
])
def test_credentials_are_masked(text: str, shown: str) -> None:
    assert redact(text).replace("Bearer ***", "***") == shown


def test_registered_and_environment_keys_are_masked_anywhere(
        monkeypatch: pytest.MonkeyPatch) -> None:
    register_secret("gw-private-0042xyz")
    monkeypatch.setenv("OPENAI_API_KEY", "envkey-7777777")
    assert redact('{"error": "bad key gw-private-0042xyz / envkey-7777777"}') == \
        '{"error": "bad key *** / ***"}'


@pytest.mark.parametrize("text", [
    "plain words, key=value pairs and emails like a@b are kept",
    '{"id": "builtin_adaptive-optimal-t0001-r0", "tokens": {"prompt": 12}}',
    "http://127.0.0.1:8000/v1?model=o3",
])
def test_other_text_is_unchanged(text: str) -> None:
    register_secret("none")  # too short to be a secret: must not mask the word
    assert redact(text) == text


def test_key_like_fields_of_json_options_are_registered() -> None:
    register_secrets_in({"metadata": {"Gateway-Token": "gw-0000-1111"},
                         "extra": [{"authorization": "Bearer tok-2222-3333"}],
                         "user": "alice-the-user", "max_tokens": 5})
    text = "gw-0000-1111 tok-2222-3333 alice-the-user"
    assert redact(text) == "*** *** alice-the-user"
