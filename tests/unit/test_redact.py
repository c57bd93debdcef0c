"""redact(): URL user info, key-like query parameters, bearer and Basic credentials, secret keys
and the keys this process knows (as written and in base64) are masked; other text is left
alone. redact_json(): JSON data masked by field name too (key-like names, headers)."""

from __future__ import annotations

import base64

import pytest

from pytest_resilibench.base.redact import (
    MASK,
    redact,
    redact_json,
    register_secret,
    register_secrets_in,
    register_url_credentials,
)


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


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


@pytest.mark.parametrize(("text", "shown"), [
    (f"Authorization: Basic {b64('alice:pw1')}", "Authorization: Basic ***"),
    (f'{{"error": "got basic {b64("u:p")} for /v1"}}', '{"error": "got basic *** for /v1"}'),
    (f"BASIC {b64('token-only:')}.", "BASIC ***."),
])
def test_basic_credentials_are_masked(text: str, shown: str) -> None:
    assert redact(text) == shown


@pytest.mark.parametrize("text", [
    "a basic understanding, Basic idea, basic training and Basic auth are words",
    "basic_task and Basic tasks",
    f"Basic {base64.b64encode(bytes(range(200, 209))).decode()} is no credential",
])
def test_basic_words_and_other_base64_are_kept(text: str) -> None:
    assert redact(text) == text


@pytest.mark.parametrize("before", ["", "a", "ab", "user:", "x" * 50])
def test_a_registered_secret_is_masked_in_base64_at_every_alignment(before: str) -> None:
    secret = "gw-b64-secret-4711"
    register_secret(secret)
    encoded = b64(f"{before}{secret}-and-more-after")
    left, mask, right = redact(encoded).partition(MASK)
    assert mask and encoded.startswith(left) and encoded.endswith(right)
    # Masked: every base64 character that only the secret's bits decide (6 bits a character).
    first, end = len(before) * 8, (len(before) + len(secret)) * 8
    assert len(left) <= -(-first // 6) and len(encoded) - len(right) >= end // 6
    assert redact(b64(secret)) == MASK


def test_the_environment_key_is_masked_in_base64(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "envkey-b64-8888888")
    assert redact(f"x {b64('envkey-b64-8888888')} y") == "x *** y"
    inside = b64("user:envkey-b64-8888888")
    left, mask, right = redact(inside).partition(MASK)
    # Left: "user:" (40 bits: 6⅔ characters); right: the last character and the padding.
    assert mask and len(left) <= 7 and len(right) <= 3


@pytest.mark.parametrize("url", ["http://alice:p%40ss-word-9@127.0.0.1:8000/v1",
                                 "https://alice:p%40ss-word-9@gw.example/v1?x=1"])
def test_url_credentials_are_masked_in_every_form(url: str) -> None:
    register_url_credentials(url)
    for form in ("p%40ss-word-9", "p@ss-word-9", "alice:p@ss-word-9", b64("alice:p@ss-word-9")):
        assert form not in redact(f"echo {form} echo"), form
    assert redact(f"got {b64('alice:p@ss-word-9')}") == "got ***"
    assert redact("alice is a name") == "alice is a name"


def test_a_token_as_url_user_info_is_masked() -> None:
    register_url_credentials("https://tok-only-123456@gw.example/v1")
    assert redact(f"{b64('tok-only-123456:')} tok-only-123456") == "*** ***"
    register_url_credentials("http://127.0.0.1:8000/v1")  # nothing to register
    register_url_credentials(None)


def test_redact_json_masks_by_name_headers_and_text() -> None:
    register_secret("gw-json-secret-31337")
    params = {"temperature": 0, "max_completion_tokens": 400, "reasoning_effort": "low",
              "extra_headers": {"Authorization": "Bearer abc-123-def", "x-title": "bench"},
              "default_headers": {"api-key": "hk-1"}, "api_key": "short",
              "metadata": {"note": "uses gw-json-secret-31337 and sk-proj-abcdefghijklmnop",
                           "Gateway-Token": ["t1", {"inner": "t2"}]},
              "stop": ["</tool_call>"], "logit_bias": {"50256": -100}}
    assert redact_json(params) == {
        "temperature": 0, "max_completion_tokens": 400, "reasoning_effort": "low",
        "extra_headers": {"Authorization": MASK, "x-title": MASK},
        "default_headers": {"api-key": MASK}, "api_key": MASK,
        "metadata": {"note": f"uses {MASK} and sk-{MASK}",
                     "Gateway-Token": [MASK, {"inner": MASK}]},
        "stop": ["</tool_call>"], "logit_bias": {"50256": -100}}
    assert params["api_key"] == "short"  # a copy


def test_redact_json_leaves_data_without_secrets_equal() -> None:
    data = {"model": "o3", "seed": 3, "store": False, "x": None, "include": ["a", "b"],
            "metadata": {"run": "nightly"}, "max_tokens": 10, "usage": {"prompt_tokens": 5}}
    assert redact_json(data) == data
    reply = {"logprobs": {"content": [{"token": "Hello", "logprob": -0.1}]}}
    assert redact_json(reply, by_name=False) == reply
    assert redact_json({"text": "Bearer abcdefghijk"}, by_name=False) == {"text": f"Bearer {MASK}"}
