"""Lenient parsing of tool calls out of what models really send (docs/BENCHMARK.md: Episode).

Text mode accepts, in this order of preference:
- `<tool_call>{...}</tool_call>` tags (Hermes/Qwen; an unclosed last tag is read to the end),
- `<function=NAME>{...}</function>` (Llama 3.1 style),
- fenced code blocks (```json ... ``` or plain ```),
- bare JSON objects anywhere in the text.

A call object may be `{"name", "arguments"}`, `{"tool", "parameters"}`, `{"function": {"name",
"arguments"}}` (OpenAI's nested shape) or use `args`/`input`/`tool_name`; `arguments` may be an
object or a JSON string of one. JSON objects that name no tool are ignored (a model may show
data in a code block), and so are quoted observations (an object with a `status` and no
arguments: `{"tool": ..., "status": "success", ...}` is a result, not a call). Keys beside the
call's name and arguments are not read as arguments (which tool parameter a stray key means is
not always clear): the call lists them in `ignored`, and the episode tells the model so.
The completion signal `TASK_COMPLETED` counts only in a reply without
a tool call: a call with the signal beside it is executed, and the signal is not taken, because
the model claimed completion before seeing the call's result.

`parse_text` and `parse_native` never raise: whatever the input, the answer is a `ParsedReply`
whose `problem` says what was wrong when no usable call came out of it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_resilibench.base.names import COMPLETION_SIGNAL
from pytest_resilibench.base.plainkey import is_flat
from pytest_resilibench.runtime.protocol import ToolCall

__all__ = [
    "COMPLETION_SIGNAL",
    "MAX_REPLY_CHARS",
    "ParsedCall",
    "ParsedReply",
    "mentions_completion",
    "parse_native",
    "parse_text",
]

# Longer replies are refused unread: a runaway generation is an error turn, and scanning
# megabytes for JSON objects would let one reply stall the harness.
MAX_REPLY_CHARS = 32_000

_NAME_KEYS = ("name", "tool", "tool_name", "function_name")
_ARGUMENT_KEYS = ("arguments", "parameters", "args", "input", "params")
_OPEN_TAG, _CLOSE_TAG = "<tool_call>", "</tool_call>"
_TAG = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL | re.IGNORECASE)
_FUNCTION_TAG = re.compile(r"<function=([\w.\-]+)>(.*?)(?:</function>|$)", re.DOTALL)
_FENCE = re.compile(r"```[ \t]*([\w+-]*)[ \t]*\n?(.*?)```", re.DOTALL)
_SIGNAL = re.compile(rf"\b{COMPLETION_SIGNAL}\b")
_DECODER = json.JSONDecoder()


# Made every turn, never changed once made: slotted, not frozen (a frozen dataclass's
# __init__ costs twice as much on this hot path).
@dataclass(slots=True)
class ParsedCall:
    """One call as understood: `arguments` is whatever JSON value the model gave (usually an
    object; anything else is the environment's to refuse). `id` is the native call id."""

    name: str
    arguments: Any
    id: str | None = None
    ignored: tuple[str, ...] = ()  # keys beside the name and arguments, not read


@dataclass(slots=True)
class ParsedReply:
    """What a reply asks for: calls (only the first is executed), the completion signal, and
    the problem that made a would-be call unusable (None when there was none)."""

    calls: tuple[ParsedCall, ...] = ()
    completed: bool = False
    problem: str | None = None

    @property
    def call(self) -> ParsedCall | None:
        return self.calls[0] if self.calls else None


# Replies recur: a retry resends its call, and every variant of a task makes the same calls.
# The parse of a one-call reply whose arguments are a flat JSON object is memoised by its
# text (bounded; a miss parses), and every hit gets arguments of its own, since the
# environment and the record keep them.
_ONE_CALL: dict[str, ParsedCall] = {}
_MEMO_SIZE = 4096


def parse_text(text: Any) -> ParsedReply:
    """The calls and completion signal in a text reply. Never raises."""
    known = _ONE_CALL.get(text) if type(text) is str else None
    if known is not None:
        return ParsedReply(calls=(ParsedCall(known.name, dict(known.arguments), known.id,
                                             known.ignored),))
    parsed = _parse_text(text)
    if len(parsed.calls) == 1 and type(text) is str:
        call = parsed.calls[0]
        if is_flat(call.arguments):
            if len(_ONE_CALL) >= _MEMO_SIZE:
                _ONE_CALL.clear()
            _ONE_CALL[text] = ParsedCall(call.name, dict(call.arguments), call.id, call.ignored)
    return parsed


def _parse_text(text: Any) -> ParsedReply:
    if text is None or (isinstance(text, str) and not text.strip()):
        return ParsedReply(problem="empty reply: send one tool call or TASK_COMPLETED")
    if not isinstance(text, str):
        return ParsedReply(problem=f"reply is not text ({type(text).__name__})")
    if len(text) > MAX_REPLY_CHARS:
        return ParsedReply(
            problem=f"reply too long ({len(text)} characters > {MAX_REPLY_CHARS}); "
            "send one short tool call"
        )
    calls, problem = _text_calls(text)
    if calls:
        return ParsedReply(calls=tuple(calls))
    if problem is None and COMPLETION_SIGNAL in text and _SIGNAL.search(text):
        return ParsedReply(completed=True)
    return ParsedReply(problem=problem or _NO_CALL)


def parse_native(tool_calls: Sequence[ToolCall], content: Any = None) -> ParsedReply:
    """Native function calls (arguments are raw JSON strings); text content is parsed as a
    fallback when there are none, since many servers leave tool calls in the text."""
    if not tool_calls:
        return parse_text(content)
    calls: list[ParsedCall] = []
    for call in tool_calls:
        name = getattr(call, "name", None)
        raw = getattr(call, "arguments", None)
        call_id = getattr(call, "id", None)
        if not isinstance(name, str) or not name.strip():
            problem = "a tool call has no function name"
            return ParsedReply(calls=tuple(calls), problem=None if calls else problem)
        arguments, bad = _decode_arguments(raw)
        if bad is not None:
            if calls:  # only the first call is executed: a bad later one does not matter
                break
            return ParsedReply(problem=f"tool call {name!r}: {bad}")
        calls.append(ParsedCall(name.strip(), arguments, call_id if isinstance(call_id, str)
                                else None))
    return ParsedReply(calls=tuple(calls))


def mentions_completion(text: Any) -> bool:
    """Whether a text carries the completion signal (as a word)."""
    return (isinstance(text, str) and len(text) <= MAX_REPLY_CHARS
            and COMPLETION_SIGNAL in text and bool(_SIGNAL.search(text)))


_NO_CALL = (
    "no tool call found: reply with exactly one "
    '<tool_call>{"name": "...", "arguments": {...}}</tool_call>, or TASK_COMPLETED when done'
)


def _text_calls(text: str) -> tuple[list[ParsedCall], str | None]:
    """Calls from the most explicit syntax present; the problem if that syntax was broken."""
    tagged = _single_tag(text)
    if tagged is None:
        tagged = [m.group(1) for m in _TAG.finditer(text)]
    if tagged:
        return _calls_from_chunks(tagged, "<tool_call>")
    functions = list(_FUNCTION_TAG.finditer(text))
    if functions:
        calls: list[ParsedCall] = []
        for match in functions:
            arguments, problem = _decode_arguments(match.group(2).strip() or "{}")
            if problem is not None:
                return calls, None if calls else f"<function={match.group(1)}>: {problem}"
            calls.append(ParsedCall(match.group(1), arguments))
        return calls, None
    fenced = [m.group(2) for m in _FENCE.finditer(text) if m.group(1).lower() in
              ("", "json", "tool_call", "tool", "javascript", "js")]
    if fenced:
        calls, problem = _calls_from_chunks(fenced, "code block", quiet=True)
        if calls:
            return calls, None
    return [c for obj in _json_objects(text) if (c := _as_call(obj)) is not None], None


def _single_tag(text: str) -> list[str] | None:
    """The body of a reply that is exactly one `<tool_call>...</tool_call>` (what `_TAG`
    finds there, without its lazy scan: the common reply, parsed every turn); else None."""
    lowered = text.lower()
    if (lowered.startswith(_OPEN_TAG) and lowered.endswith(_CLOSE_TAG)
            and lowered.count(_OPEN_TAG) == 1 and lowered.count(_CLOSE_TAG) == 1):
        return [text[len(_OPEN_TAG):-len(_CLOSE_TAG)]]
    return None


def _calls_from_chunks(
    chunks: list[str], where: str, *, quiet: bool = False
) -> tuple[list[ParsedCall], str | None]:
    """Calls from explicit call containers: broken JSON there is the model's error (unless
    `quiet`: a code block may hold anything)."""
    calls: list[ParsedCall] = []
    problem: str | None = None
    for chunk in chunks:
        body = _strip_fence(chunk.strip())
        try:
            value = json.loads(body)
        except (ValueError, RecursionError) as exc:
            found = [c for obj in _json_objects(body) if (c := _as_call(obj)) is not None]
            if found:
                calls.extend(found)
            elif problem is None and not quiet:
                problem = f"malformed JSON in {where}: {exc}"
            continue
        items = value if isinstance(value, list) else [value]
        for item in items:
            call = _as_call(item)
            if call is not None:
                calls.append(call)
            elif problem is None and not quiet:
                problem = (f"the JSON in {where} names no tool: expected "
                           '{"name": "...", "arguments": {...}}')
    return calls, None if calls else problem


def _strip_fence(body: str) -> str:
    if "```" not in body:  # the common case, without running the pattern
        return body
    match = _FENCE.search(body)
    return match.group(2).strip() if match else body


def _json_objects(text: str) -> Iterator[Any]:
    """Every top-level JSON object in free text, left to right."""
    start = text.find("{")
    while start != -1:
        try:
            value, end = _DECODER.raw_decode(text, start)
        except (ValueError, RecursionError):
            start = text.find("{", start + 1)
            continue
        yield value
        start = text.find("{", end)


def _as_call(value: Any) -> ParsedCall | None:
    """A call out of one JSON value in any of the shapes models use, or None."""
    if not isinstance(value, Mapping):
        return None
    function = value.get("function")
    if isinstance(function, Mapping) and isinstance(function.get("name"), str):
        value = function
    name = None
    for key in _NAME_KEYS:
        if isinstance(value.get(key), str):
            name = value[key]
            break
    if name is None or not name.strip():
        return None
    raw: Any = {}
    for key in _ARGUMENT_KEYS:  # loops, not generators: this runs every turn
        if key in value:
            raw = value[key]
            break
    else:
        if "status" in value:
            return None  # a quoted observation, not a call
    arguments, problem = _decode_arguments(raw)
    ignored = () if _ENVELOPE_KEYS.issuperset(value) else tuple(
        str(k) for k in value if k not in _ENVELOPE_KEYS)
    # Undecodable string arguments go to the environment as they are: it answers with
    # INVALID_INPUT and the model learns what was wrong.
    return ParsedCall(name.strip(), raw if problem is not None else arguments, ignored=ignored)


# Keys of a call object that are not arguments: its name, its arguments, its envelope.
_ENVELOPE_KEYS = frozenset({*_NAME_KEYS, *_ARGUMENT_KEYS, "function", "id", "type"})


def _decode_arguments(raw: Any) -> tuple[Any, str | None]:
    """Arguments as a JSON value: objects pass, strings are decoded (empty means {})."""
    if raw is None:
        return {}, None
    if not isinstance(raw, str):
        return raw, None
    if not raw.strip():
        return {}, None
    try:
        return json.loads(raw), None
    except (ValueError, RecursionError) as exc:
        return None, f"arguments are not valid JSON ({exc})"
