"""The model-call cache: replies on disk, keyed by everything that decides them.

A call is identified by (model, base_url, messages, tools, generation parameters, repeat); its
key is a hash of their canonical JSON, never the API key. Each answered call is committed at
once, so a re-run replays without the network, and an interrupted run re-run with the same
cache asks again only what was not yet answered. Only successful replies are stored.

No secret is written, and none is in the key: a secret authorises a call, it does not decide
its reply. The base URL loses its user info, query and fragment (`public_url`); the parameters
are stored and hashed as `redact_json` masks them (`base/redact.py`): every string under a
key-like name (`api_key`, `prompt_cache_key` ...) and every header value (`extra_headers`,
`default_headers`) becomes `***`, and whatever `redact` masks (bearer and Basic credentials,
`sk-` keys, the keys this process registered) too. So the same call made with another key or
header secret hits the same entry, and a call without secrets keeps the key it always had
(masking leaves its parameters equal). A key of an older cache whose parameters held a secret
no longer matches: that call is asked again. Messages are stored as hashes only; a reply's
strings pass through `redact` (field names decide nothing there): a reply that quotes a
secret replays with `***` in its place, so the turns that follow it are asked again.

sqlite3 in WAL mode lets several xdist workers read and write one file at once; each process
opens its own connection (re-opened after a fork).

The cache is never load-bearing: a reply the provider paid for is worth more than its copy.
A file that cannot be opened is refused when the cache is made (a ValueError naming it: the
run's usage error at start-up); once open, a write that fails (a full disk, a file or file
system made read-only, a lock held past the busy timeout) turns writing off and a read that
fails turns reading off, each for the rest of this process, and `problem` keeps one line
naming the file and why, which the run prints at its end; `get` and `put` never raise.

A miss can be explained: `explain_miss` names the components that differ from the closest
stored call of the same model, task and repeat.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from pytest_resilibench.base.redact import redact_json
from pytest_resilibench.runtime.protocol import ModelReply, ToolCall

__all__ = ["CACHE_SCHEMA", "CallKey", "ModelCallCache", "reply_from_json", "reply_to_json"]

CACHE_SCHEMA = "resilibench.model-cache/1"

# The components of a key, in the order a miss explanation names them.
COMPONENTS = ("base_url", "messages", "tools", "params")


def _canonical(obj: object) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=str).encode()


def _digest(obj: object) -> str:
    return hashlib.sha256(_canonical(obj)).hexdigest()


def public_url(url: str | None) -> str:
    """The base URL without user info, query or fragment, which may carry credentials."""
    if not url:
        return ""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))


@dataclass(frozen=True, kw_only=True)
class CallKey:
    """Everything that decides a reply (plus `task_id`, stored to explain misses only)."""

    model: str
    base_url: str
    messages: Sequence[Mapping[str, Any]]
    tools: Sequence[Mapping[str, Any]] | None
    params: Mapping[str, Any]
    repeat: int
    task_id: str = ""
    _hashes: dict[str, str] = field(init=False, repr=False, compare=False)
    _public_params: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Secrets masked before hashing: they decide no reply (the module's docstring).
        params = redact_json(dict(self.params))
        hashes = {
            "base_url": _digest(public_url(self.base_url)),
            "messages": _digest(list(self.messages)),
            "tools": _digest(self.tools),
            "params": _digest(params),
        }
        object.__setattr__(self, "_hashes", hashes)
        object.__setattr__(self, "_public_params", _canonical(params).decode())

    @property
    def component_hashes(self) -> dict[str, str]:
        return dict(self._hashes)

    @property
    def public_params(self) -> str:
        """The parameters' canonical JSON with every secret masked: what the cache stores."""
        return self._public_params

    @property
    def message_hashes(self) -> list[str]:
        return [_digest(message)[:16] for message in self.messages]

    @property
    def digest(self) -> str:
        return _digest([CACHE_SCHEMA, self.model, self.repeat, self._hashes])


def reply_to_json(reply: ModelReply) -> dict[str, Any]:
    return {
        "content": reply.content,
        "tool_calls": [[c.id, c.name, c.arguments] for c in reply.tool_calls],
        "usage": dict(reply.usage),
        "raw": dict(reply.raw) if reply.raw is not None else None,
    }


def reply_from_json(data: Mapping[str, Any]) -> ModelReply:
    return ModelReply(
        content=data.get("content"),
        tool_calls=tuple(ToolCall(*map(str, call)) for call in data.get("tool_calls", ())),
        usage={k: int(v) for k, v in dict(data.get("usage") or {}).items()},
        raw=data.get("raw"),
    )


_SCHEMA_SQL = """
CREATE TABLE IF NOT EXISTS calls (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    task_id TEXT NOT NULL,
    repeat INTEGER NOT NULL,
    base_url TEXT NOT NULL,
    base_url_hash TEXT NOT NULL,
    messages_hash TEXT NOT NULL,
    tools_hash TEXT NOT NULL,
    params_hash TEXT NOT NULL,
    params TEXT NOT NULL,
    message_hashes TEXT NOT NULL,
    reply TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS calls_by_episode ON calls (model, task_id, repeat);
"""
_COLUMNS = ("key", "model", "task_id", "repeat", "base_url", "base_url_hash", "messages_hash",
            "tools_hash", "params_hash", "params", "message_hashes", "reply")


class ModelCallCache:
    """A sqlite file of answered model calls; safe for several processes at once."""

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout_s: float = 60.0) -> None:
        self.path = Path(path)
        self.busy_timeout_s = busy_timeout_s
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()
        self._connection: sqlite3.Connection | None = None
        self._pid = -1
        # Once a read or a write failed: off for the rest of the process (the docstring);
        # `failure` says which first, and why.
        self.failure: str | None = None
        self._reads_off = False
        self._writes_off = False
        if self.path.is_dir():
            raise ValueError(f"{self.path}: is a directory, not a model-call cache file")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db()  # fail early on a bad path or a file that is not ours

    def _open(self) -> sqlite3.Connection:
        """A connection to a file that holds our table (created if the file is new); one
        ValueError naming the file for anything else (not sqlite, another schema, no
        write access: a cache that cannot store would silently re-ask every call)."""
        try:
            # autocommit (isolation_level=None): every put is durable when it returns.
            db = sqlite3.connect(self.path, timeout=self.busy_timeout_s, isolation_level=None,
                                 check_same_thread=False)
            try:
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=NORMAL")
                db.executescript(_SCHEMA_SQL)
                columns = [row[1] for row in db.execute("PRAGMA table_info(calls)")]
                db.execute("BEGIN IMMEDIATE")  # proves the file writable, writes nothing
                db.execute("ROLLBACK")
            except BaseException:
                db.close()
                raise
        except sqlite3.Error as exc:
            raise ValueError(f"{self.path}: not a usable model-call cache ({exc})") from None
        if columns != list(_COLUMNS):
            db.close()
            raise ValueError(f"{self.path}: not a model-call cache of schema {CACHE_SCHEMA} "
                             f"(its 'calls' table has columns {columns})")
        return db

    def _db(self) -> sqlite3.Connection:
        if self._connection is None or self._pid != os.getpid():
            self._connection, self._pid = self._open(), os.getpid()
        return self._connection

    def get(self, key: CallKey) -> ModelReply | None:
        """The stored reply of `key`, or None (not stored, or the cache cannot be read)."""
        row = None
        if not self._reads_off:
            try:
                with self._lock:
                    row = self._db().execute("SELECT reply FROM calls WHERE key = ?",
                                             (key.digest,)).fetchone()
            except (sqlite3.Error, ValueError) as exc:  # ValueError: re-opened after a fork
                self._reads_off = True
                self._fail("read", exc)
        if row is None:
            self.misses += 1
            return None
        try:
            reply = reply_from_json(json.loads(row[0]))
        except (ValueError, TypeError, KeyError, AttributeError):  # an edited row: ask again
            self.misses += 1
            return None
        self.hits += 1
        return reply

    def put(self, key: CallKey, reply: ModelReply) -> None:
        """Store a successful reply; the first writer of a key wins (replies to one key agree).
        A write that fails turns writing off (the module's docstring): the reply is the
        caller's all the same."""
        if self._writes_off:
            return
        hashes = key.component_hashes
        row = (key.digest, key.model, key.task_id, key.repeat, public_url(key.base_url),
               hashes["base_url"], hashes["messages"], hashes["tools"], hashes["params"],
               key.public_params, json.dumps(key.message_hashes),
               _canonical(redact_json(reply_to_json(reply), by_name=False)).decode())
        try:
            with self._lock:
                self._db().execute(
                    "INSERT OR IGNORE INTO calls VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", row)
        except (sqlite3.Error, ValueError) as exc:
            self._writes_off = True
            self._fail("written", exc)

    def _fail(self, what: str, exc: Exception) -> None:
        if self.failure is None:  # the first failure says why; the rest follow from it
            from pytest_resilibench.base.redact import redact

            self.failure = redact(f"{self.path} could not be {what} ({exc})")

    @property
    def problem(self) -> str | None:
        """The one line a run prints at its end when the cache failed it, else None."""
        if self.failure is None:
            return None
        then = "replies kept, not stored" if self._writes_off else "every call asked"
        return f"resilibench: the model-call cache {self.failure}: the run went on " \
               f"without it ({then})"

    def __len__(self) -> int:
        with self._lock:
            return int(self._db().execute("SELECT COUNT(*) FROM calls").fetchone()[0])

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, CallKey):
            return False
        with self._lock:
            return self._db().execute("SELECT 1 FROM calls WHERE key = ?",
                                      (key.digest,)).fetchone() is not None

    def explain_miss(self, key: CallKey) -> str:
        """Why `key` is not stored: the components that differ from the closest stored call of
        the same model, task and repeat (for messages, the first message that differs)."""
        with self._lock:
            db = self._db()
            if db.execute("SELECT 1 FROM calls WHERE key = ?", (key.digest,)).fetchone():
                return "hit: the call is stored"
            rows = db.execute(
                "SELECT base_url, base_url_hash, messages_hash, tools_hash, params_hash, params,"
                " message_hashes FROM calls WHERE model = ? AND task_id = ? AND repeat = ?",
                (key.model, key.task_id, key.repeat)).fetchall()
            if not rows:
                return self._explain_no_episode(db, key)
        hashes = key.component_hashes
        mine = key.message_hashes

        def closeness(row: tuple[Any, ...]) -> tuple[int, int]:
            same = sum(h == hashes[c] for c, h in zip(COMPONENTS, row[1:5], strict=True))
            return same, _common_prefix(mine, json.loads(row[6]))

        best = max(rows, key=closeness)
        reasons = []
        for component, stored in zip(COMPONENTS, best[1:5], strict=True):
            if stored == hashes[component]:
                continue
            if component == "messages":
                reasons.append(_messages_reason(mine, json.loads(best[6])))
            elif component == "params":
                reasons.append(f"params differ: stored {_public(best[5])}, "
                               f"asked {key.public_params}")
            elif component == "base_url":
                reasons.append(f"base_url differs: stored {best[0]!r}, "
                               f"asked {public_url(key.base_url)!r}")
            else:
                reasons.append("tools differ")
        where = f"model {key.model!r}, task {key.task_id!r}, repeat {key.repeat}"
        return f"miss ({where}; closest of {len(rows)} stored): " + "; ".join(reasons)

    def _explain_no_episode(self, db: sqlite3.Connection, key: CallKey) -> str:
        same_task = db.execute("SELECT DISTINCT repeat FROM calls WHERE model = ? AND task_id = ?"
                               " ORDER BY repeat LIMIT 10", (key.model, key.task_id)).fetchall()
        if same_task:
            repeats = ", ".join(str(r[0]) for r in same_task)
            return (f"miss: no stored call of model {key.model!r}, task {key.task_id!r} with "
                    f"repeat {key.repeat} (stored repeats: {repeats})")
        models = db.execute("SELECT DISTINCT model FROM calls WHERE task_id = ? LIMIT 10",
                            (key.task_id,)).fetchall()
        if models:
            names = ", ".join(repr(m[0]) for m in models)
            return (f"miss: task {key.task_id!r} is stored for other models only ({names}), "
                    f"not {key.model!r}")
        return f"miss: nothing stored for model {key.model!r} and task {key.task_id!r}"

    def close(self) -> None:
        with self._lock:
            if self._connection is not None and self._pid == os.getpid():
                self._connection.close()
            self._connection = None

    def __enter__(self) -> ModelCallCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ModelCallCache({str(self.path)!r})"


def _public(stored: str) -> str:
    """Stored parameters as shown: masked again, for a row an older version wrote unmasked."""
    try:
        return _canonical(redact_json(json.loads(stored))).decode()
    except ValueError:
        return "(unreadable)"


def _common_prefix(a: Sequence[str], b: Sequence[str]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _messages_reason(mine: Sequence[str], stored: Sequence[str]) -> str:
    n = _common_prefix(mine, stored)
    if n == len(mine) == len(stored):
        return "messages differ"
    if n == len(stored):
        return (f"messages differ: the stored call has {len(stored)} messages, "
                f"this one {len(mine)} (a later turn)")
    if n == len(mine):
        return (f"messages differ: this call has {len(mine)} messages, "
                f"the stored one {len(stored)} (an earlier turn)")
    return f"messages differ from message {n} on (of {len(mine)} asked, {len(stored)} stored)"
