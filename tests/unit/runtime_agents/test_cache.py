"""The model-call cache: keys, explainable misses, replay without the network, interrupted runs,
several processes writing at once, and no secret on disk: not the API key, nor a secret in
the request's parameters or the base URL (none of them in the key either)."""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from pytest_resilibench.runtime.agents.cache import CallKey, ModelCallCache, public_url
from pytest_resilibench.runtime.agents.openai_provider import OpenAIAgent
from pytest_resilibench.runtime.protocol import (
    InfrastructureError,
    ModelReply,
    ModelRequest,
    ToolCall,
)
from pytest_resilibench.servers.testserver import FaultConfig, OpenAITestServer
from tests.full_disk import fill

SECRET = "sk-test-CACHE-SECRET-0987654321"
MESSAGES = [{"role": "system", "content": "You call tools."},
            {"role": "user", "content": "Read /data/a.csv, then summarise it."}]
TOOLS = [{"type": "function", "function": {"name": "read_file", "parameters": {}}}]
REPLY = ModelReply(content=None, tool_calls=(ToolCall("c1", "read_file", '{"path": "a"}'),),
                   usage={"prompt_tokens": 12, "completion_tokens": 4}, raw={"id": "x"})


def key(**changes: Any) -> CallKey:
    fields: dict[str, Any] = {"model": "m", "base_url": "http://127.0.0.1:8000/v1",
                              "messages": MESSAGES, "tools": TOOLS,
                              "params": {"temperature": 0.0}, "repeat": 0, "task_id": "t0001"}
    fields.update(changes)
    return CallKey(**fields)


@pytest.fixture
def cache(tmp_path: Path) -> ModelCallCache:
    return ModelCallCache(tmp_path / "calls.sqlite")


def test_put_get_round_trip_and_counters(cache: ModelCallCache) -> None:
    assert cache.get(key()) is None
    cache.put(key(), REPLY)
    assert cache.get(key()) == REPLY
    assert (cache.hits, cache.misses, len(cache)) == (1, 1, 1)
    assert key() in cache and key(repeat=1) not in cache


def test_every_component_is_in_the_key_but_the_task_id() -> None:
    base = key().digest
    changed = [key(model="m2"), key(base_url="http://127.0.0.1:8001/v1"),
               key(messages=[*MESSAGES, {"role": "assistant", "content": "ok"}]),
               key(tools=None), key(params={"temperature": 0.5}), key(repeat=1)]
    digests = {k.digest for k in changed}
    assert base not in digests and len(digests) == len(changed)
    assert key(task_id="t9999").digest == base  # stored to explain misses only
    assert key(messages=json.loads(json.dumps(MESSAGES))).digest == base  # by value
    assert key(params={"temperature": 0.0}).digest == base


def test_base_url_credentials_stay_out() -> None:
    assert public_url("https://user:pw@host.example:8443/v1/?key=abc#x") == \
        "https://host.example:8443/v1"
    assert key(base_url="http://u:pw@127.0.0.1:8000/v1/").digest == key().digest


def test_explain_miss_names_what_differs(cache: ModelCallCache) -> None:
    later = [*MESSAGES, {"role": "assistant", "content": "calling"},
             {"role": "tool", "content": "ok"}]
    cache.put(key(), REPLY)
    cache.put(key(messages=later), REPLY)
    assert cache.explain_miss(key()) == "hit: the call is stored"

    edited = [MESSAGES[0], {"role": "user", "content": "Read /data/b.csv"}]
    assert "messages differ from message 1 on" in cache.explain_miss(key(messages=edited))
    assert "(a later turn)" in cache.explain_miss(
        key(messages=[*later, {"role": "assistant", "content": "more"}]))
    message = cache.explain_miss(key(params={"temperature": 0.7}))
    assert "params differ" in message and '"temperature":0.7' in message
    assert "messages" not in message  # the closest entry has the same messages
    assert cache.explain_miss(key(tools=None)).endswith("tools differ")
    assert "base_url differs" in cache.explain_miss(key(base_url="http://127.0.0.1:9/v1"))
    two = cache.explain_miss(key(tools=None, params={"seed": 1}))
    assert "tools differ" in two and "params differ" in two

    assert "stored repeats: 0" in cache.explain_miss(key(repeat=3))
    assert "other models only ('m')" in cache.explain_miss(key(model="o3"))
    assert "nothing stored" in cache.explain_miss(key(task_id="t0002", repeat=5))


def test_only_the_first_reply_of_a_key_is_kept(cache: ModelCallCache) -> None:
    cache.put(key(), REPLY)
    cache.put(key(), ModelReply(content="other"))
    assert cache.get(key()) == REPLY and len(cache) == 1


def test_several_processes_write_at_once(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite"
    ModelCallCache(path).close()
    writer = textwrap.dedent(f"""
        import sys
        from pytest_resilibench.runtime.protocol import ModelReply
        from pytest_resilibench.runtime.agents.cache import CallKey, ModelCallCache
        cache = ModelCallCache({str(path)!r})
        worker = int(sys.argv[1])
        for i in range(60):
            messages = [{{"role": "user", "content": f"{{worker}}-{{i}}"}}]
            key = CallKey(model="m", base_url="", messages=messages, tools=None, params={{}},
                          repeat=i, task_id=f"t{{worker}}")
            cache.put(key, ModelReply(content=f"{{worker}}-{{i}}"))
            assert cache.get(key).content == f"{{worker}}-{{i}}"
    """)
    workers = [subprocess.Popen([sys.executable, "-c", writer, str(w)]) for w in range(4)]
    assert [w.wait(timeout=120) for w in workers] == [0, 0, 0, 0]
    assert len(ModelCallCache(path)) == 240


# --- with the provider --------------------------------------------------------------------


def scripted(request: ModelRequest) -> ModelReply:
    return ModelReply(content=f"reply to {request.messages[-1]['content']} #{request.repeat}")


def batch(n: int) -> list[ModelRequest]:
    return [ModelRequest(messages=[*MESSAGES, {"role": "user", "content": f"step {i}"}],
                         tools=TOOLS, task_id="t0001", repeat=i % 3) for i in range(n)]


def agent_for(base_url: str, cache: ModelCallCache, **options: Any) -> OpenAIAgent:
    options.setdefault("api_key", SECRET)
    return OpenAIAgent("scripted", base_url=base_url, cache=cache,
                       timeout_s=2.0, backoff_base_s=0.001, backoff_max_s=0.01, **options)


async def ask_all(agent: OpenAIAgent, requests: list[ModelRequest]) -> list[ModelReply]:
    try:
        return list(await asyncio.gather(*(agent.complete(r) for r in requests)))
    finally:
        await agent.aclose()


def test_a_rerun_replays_without_the_network(cache: ModelCallCache) -> None:
    with OpenAITestServer(scripted) as server:
        base_url = server.base_url
        first = asyncio.run(ask_all(agent_for(base_url, cache), batch(12)))
        assert server.stats.requests == 12
    # the server is gone: only the cache can answer now
    replay_agent = agent_for(base_url, cache, max_retries=0)
    again = asyncio.run(ask_all(replay_agent, batch(12)))
    assert [(r.content, r.tool_calls, r.raw) for r in again] == [
        (r.content, r.tool_calls, r.raw) for r in first]
    # replays are not spend: their tokens are counted apart
    assert [r.usage for r in again] == [
        {"prompt_tokens": 0, "completion_tokens": 0,
         "replayed_tokens": r.usage["prompt_tokens"] + r.usage["completion_tokens"]}
        for r in first]
    assert replay_agent.stats.api_calls == 0 and replay_agent.stats.cache_hits == 12
    assert replay_agent.stats.replayed_tokens == sum(
        r.usage["prompt_tokens"] + r.usage["completion_tokens"] for r in first)
    changed = ModelRequest(messages=MESSAGES, task_id="t0001", repeat=0)
    assert "messages differ" in replay_agent.explain_miss(changed)
    other_params = agent_for(base_url, cache, temperature=0.5)
    assert "params differ" in other_params.explain_miss(batch(1)[0])


def test_an_interrupted_run_asks_again_only_what_was_not_answered(
        cache: ModelCallCache) -> None:
    requests = batch(30)
    opened = False
    served = 0

    async def ten_then_hold(request: ModelRequest) -> ModelReply:
        """Answers ten requests, then holds the rest until `opened` (no clock decides how
        many were answered when the run is killed)."""
        nonlocal served
        if served >= 10:
            for _ in range(6000):  # at most a minute: the test fails rather than hangs
                if opened:
                    break
                await asyncio.sleep(0.01)
        served += 1
        return scripted(request)

    with OpenAITestServer(ten_then_hold) as server:
        async def interrupted() -> None:
            agent = agent_for(server.base_url, cache, max_concurrency=4)
            tasks = [asyncio.ensure_future(agent.complete(r)) for r in requests]
            for _ in range(12000):  # bounded: a lost answer fails the test, never hangs it
                if len(cache) >= 10:
                    break
                await asyncio.sleep(0.005)
            for task in tasks:  # the run is killed with requests in flight
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await agent.aclose()

        asyncio.run(interrupted())
        answered = len(cache)
        before = server.stats.requests
        assert answered == 10
        opened = True
        resumed = agent_for(server.base_url, cache)
        replies = asyncio.run(ask_all(resumed, requests))
        assert server.stats.requests - before == 30 - answered
    assert resumed.stats.cache_hits == answered
    assert [r.content for r in replies] == [scripted(r).content for r in requests]


def test_infrastructure_errors_are_not_cached(cache: ModelCallCache) -> None:
    faults = FaultConfig(rate=1.0, kinds=("500",))
    with OpenAITestServer(scripted, faults=faults) as server, pytest.raises(InfrastructureError):
        asyncio.run(ask_all(agent_for(server.base_url, cache, max_retries=1), batch(1)))
    assert len(cache) == 0
    with OpenAITestServer(scripted) as server:
        agent = agent_for(server.base_url, cache)
        asyncio.run(ask_all(agent, batch(1)))
    assert agent.stats.api_calls == 1 and len(cache) == 1


def test_the_api_key_is_never_written(tmp_path: Path) -> None:
    path = tmp_path / "calls.sqlite"
    cache = ModelCallCache(path)
    with OpenAITestServer(scripted) as server:
        asyncio.run(ask_all(agent_for(server.base_url, cache), batch(5)))
    for _ in ("open", "closed"):  # with the WAL and shared-memory files, then checkpointed
        files = list(tmp_path.iterdir())
        assert path in files
        for file in files:
            assert SECRET.encode() not in file.read_bytes()
        cache.close()
    assert len(ModelCallCache(path)) == 5


def _foreign_sqlite(path: Path) -> Path:
    import sqlite3

    db = sqlite3.connect(path)
    db.execute("CREATE TABLE calls (key TEXT PRIMARY KEY, answer TEXT)")
    db.close()
    return path


@pytest.mark.parametrize(("make", "message"), [
    (lambda p: p.write_bytes(b"SQLite format 3\x00" + b"\xff" * 200) or p, "not a usable"),
    (lambda p: p.write_text("not a database at all " * 100) or p, "not a usable"),
    (_foreign_sqlite, "no such column"),
    (lambda p: p.mkdir() or p, "is a directory"),
])
def test_a_file_that_is_not_our_cache_is_one_clear_error(
    tmp_path: Path, make: Any, message: str
) -> None:
    path = tmp_path / "calls.sqlite"
    make(path)
    with pytest.raises(ValueError, match=message) as caught:
        ModelCallCache(path)
    assert str(path) in str(caught.value)


def test_an_edited_row_is_a_miss_not_a_crash(cache: ModelCallCache) -> None:
    cache.put(key(), REPLY)
    cache._db().execute("UPDATE calls SET reply = ?", ('{"tool_calls": [[1]]}',))
    assert cache.get(key()) is None and cache.misses == 1
    cache._db().execute("UPDATE calls SET reply = ?", ("{truncated",))
    assert cache.get(key()) is None


# --- secrets: no part of the key, never stored ----------------------------------------------

# Computed before secrets were masked in keys: a cache written then still replays.
PINNED = {
    "876f8d35bf491d0e8ffe62bee4df3791cb0e3aa68a4e419ea4258b948e6760ab": {"temperature": 0.0},
    "946049eaf4efa5543833faee2e8276bad0f173b92d7097683a487922269af460": {
        "reasoning_effort": "low", "max_completion_tokens": 4000, "seed": 3, "api": "responses",
        "metadata": {"run": "nightly"}, "stop": ["</tool_call>"]},
    "e58942f5e4fa34f42e6006aa70ece797da67ad34a5a80cc7d8267d86ba0a449e": {
        "max_completion_tokens": 16, "probe": True},
}


@pytest.mark.parametrize(("digest", "params"), PINNED.items())
def test_keys_of_calls_without_secrets_are_unchanged(digest: str, params: dict[str, Any]) -> None:
    assert key(params=params).digest == digest


def with_secrets(n: int) -> dict[str, Any]:
    return {"temperature": 0.0, "api_key": f"sk-param-key-{n}-abcdefghij",
            "extra_headers": {"Authorization": f"Bearer hdr-token-{n}-0000",
                              "api-key": f"hdr-key-{n}-1111"},
            "default_headers": {"X-Gateway-Secret": f"gw-secret-{n}-2222"},
            "metadata": {"Session-Token": f"sess-{n}-3333"}}


def secrets_of(n: int) -> list[str]:
    return [f"sk-param-key-{n}-abcdefghij", f"hdr-token-{n}-0000", f"hdr-key-{n}-1111",
            f"gw-secret-{n}-2222", f"sess-{n}-3333"]


def test_secrets_are_no_part_of_the_key_and_never_stored(tmp_path: Path) -> None:
    path = tmp_path / "calls.sqlite"
    cache = ModelCallCache(path)
    cache.put(key(params=with_secrets(1)), REPLY)
    assert cache.get(key(params=with_secrets(2))) == REPLY  # another key, the same entry
    assert key(params=with_secrets(1)).digest == key(params=with_secrets(2)).digest
    assert key(params=with_secrets(1)).digest != key().digest  # the fields themselves count
    (stored,) = cache._db().execute("SELECT params FROM calls").fetchone()
    assert json.loads(stored) == {
        "temperature": 0.0, "api_key": "***",
        "extra_headers": {"Authorization": "***", "api-key": "***"},
        "default_headers": {"X-Gateway-Secret": "***"}, "metadata": {"Session-Token": "***"}}
    for _ in ("open", "closed"):  # with the WAL and shared-memory files, then checkpointed
        for file in tmp_path.iterdir():
            data = file.read_bytes()
            assert not [s for s in secrets_of(1) if s.encode() in data], file
        cache.close()


def test_a_reply_quoting_a_registered_secret_is_stored_masked(cache: ModelCallCache) -> None:
    from pytest_resilibench.base.redact import register_secret

    register_secret("echoed-secret-5150")
    reply = ModelReply(content="your key echoed-secret-5150 works",
                       raw={"debug": {"authorization": "Bearer echoed-secret-5150"}})
    cache.put(key(), reply)
    assert cache.get(key()) == ModelReply(content="your key *** works",
                                          raw={"debug": {"authorization": "Bearer ***"}})


def test_explain_miss_prints_no_secret(cache: ModelCallCache) -> None:
    cache.put(key(params=with_secrets(1)), REPLY)
    asked = {**with_secrets(3), "temperature": 0.7}
    message = cache.explain_miss(key(params=asked))
    assert "params differ" in message and '"temperature":0.7' in message
    assert '"api_key":"***"' in message
    assert not [s for n in (1, 3) for s in secrets_of(n) if s in message]
    # A row an older version stored unmasked is shown masked.
    cache._db().execute("UPDATE calls SET params = ?", (json.dumps(with_secrets(1)),))
    message = cache.explain_miss(key(params=asked))
    assert "params differ" in message and not [s for s in secrets_of(1) if s in message]


def test_url_credentials_never_reach_the_cache(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # the user info alone authenticates
    path = tmp_path / "calls.sqlite"
    cache = ModelCallCache(path)
    with OpenAITestServer(scripted) as server:
        with_user = server.base_url.replace("://", "://cacheuser:cache-pass-6060@")
        asyncio.run(ask_all(agent_for(with_user, cache, api_key=None), batch(3)))
        plain = agent_for(server.base_url, cache, max_retries=0)
        asyncio.run(ask_all(plain, batch(3)))  # the same calls without credentials: hits
    assert server.stats.requests == 3 and plain.stats.cache_hits == 3
    basic = base64.b64encode(b"cacheuser:cache-pass-6060")
    for _ in ("open", "closed"):
        for file in tmp_path.iterdir():
            data = file.read_bytes()
            assert b"cache-pass-6060" not in data and basic not in data, file
        cache.close()


# --- the cache is never load-bearing: a write or read that fails costs no reply -------------


def test_a_full_disk_turns_writing_off_and_keeps_the_replies(small_fs: Path) -> None:
    cache = ModelCallCache(small_fs / "calls.sqlite")
    cache.put(key(), REPLY)
    fill(small_fs)
    many = [key(repeat=n, messages=[*MESSAGES, {"role": "user", "content": "x" * 3000}])
            for n in range(1, 40)]
    with OpenAITestServer(scripted) as server:
        agent = agent_for(server.base_url, cache)
        replies = asyncio.run(ask_all(agent, batch(12)))
        for k in many:  # more than a page's slack in the WAL: the disk is met for sure
            cache.put(k, REPLY)
    assert len(replies) == 12 and all(r.content for r in replies)  # every reply kept
    assert cache.failure is not None and "database or disk is full" in cache.failure
    problem = cache.problem or ""
    assert problem.startswith(f"resilibench: the model-call cache {small_fs / 'calls.sqlite'} "
                              "could not be written") and "replies kept" in problem
    assert cache.get(key()) == REPLY  # reading goes on: what is stored still replays


def test_a_file_system_made_read_only_turns_the_cache_off(small_fs: Path) -> None:
    """Remounted read-only while no connection is open (a busy mount refuses it): the
    connection made anew, as after a fork, cannot write."""
    cache = ModelCallCache(small_fs / "calls.sqlite")
    cache.put(key(), REPLY)
    cache.close()
    subprocess.run(["mount", "-o", "remount,ro", str(small_fs)], check=True)
    cache.put(key(repeat=1), REPLY)  # no exception: the reply is the caller's anyway
    assert cache.get(key()) is None and cache.get(key(repeat=1)) is None
    assert cache.failure is not None and "could not be written" in cache.failure
    assert "replies kept, not stored" in (cache.problem or "")


def test_a_read_only_file_is_refused_when_opened(tmp_path: Path) -> None:
    """Where the file system refuses writes to it (root ignores a file's mode bits: a
    read-only mount stands for it), the cache cannot be made: the run's start-up error."""
    path = tmp_path / "calls.sqlite"
    ModelCallCache(path).close()
    path.chmod(0o444)
    try:
        with open(path, "r+b"):
            pytest.skip("this user writes read-only files (root): the mount test covers it")
    except PermissionError:
        pass
    with pytest.raises(ValueError, match="not a usable model-call cache") as caught:
        ModelCallCache(path)
    assert str(path) in str(caught.value)


def test_a_locked_database_turns_writing_off_and_reading_goes_on(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "calls.sqlite"
    cache = ModelCallCache(path, busy_timeout_s=0.05)
    cache.put(key(), REPLY)
    holder = sqlite3.connect(path, isolation_level=None)  # another process's write, held
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("DELETE FROM calls")
    try:
        cache.put(key(repeat=1), REPLY)
        cache.put(key(repeat=2), REPLY)  # off: no second wait on the lock
        assert cache.failure is not None and "database is locked" in cache.failure
        assert cache.get(key()) == REPLY  # WAL: reading is not blocked by a writer
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    cache.put(key(repeat=3), REPLY)
    assert len(cache) == 1  # writing stays off for the rest of the process


def test_a_cache_that_cannot_be_read_any_more_is_a_miss(tmp_path: Path) -> None:
    path = tmp_path / "calls.sqlite"
    cache = ModelCallCache(path)
    cache.put(key(), REPLY)
    cache.close()
    for name in ("calls.sqlite", "calls.sqlite-wal", "calls.sqlite-shm"):
        (tmp_path / name).unlink(missing_ok=True)
    path.write_bytes(b"not a database at all " * 100)  # replaced under the run
    assert cache.get(key()) is None and cache.get(key()) is None
    assert cache.misses == 2 and "could not be read" in (cache.failure or "")
    assert "every call asked" in (cache.problem or "")
