import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_resilibench.runtime.parsing import (
    MAX_REPLY_CHARS,
    mentions_completion,
    parse_native,
    parse_text,
)
from pytest_resilibench.runtime.protocol import ToolCall

ARGS = {"path": "/data/in.csv"}


@pytest.mark.parametrize(
    "text",
    [
        '<tool_call>{"name": "file_operations_reader", "arguments": {"path": "/data/in.csv"}}'
        "</tool_call>",
        'I will read it.\n<tool_call>\n{"name": "file_operations_reader", "arguments": '
        '{"path": "/data/in.csv"}}\n</tool_call>',
        # unclosed tag (generation stopped at the stop token)
        '<tool_call>{"name": "file_operations_reader", "arguments": {"path": "/data/in.csv"}}',
        '```json\n{"name": "file_operations_reader", "arguments": {"path": "/data/in.csv"}}\n```',
        '```\n{"tool": "file_operations_reader", "parameters": {"path": "/data/in.csv"}}\n```',
        'Calling {"name": "file_operations_reader", "arguments": {"path": "/data/in.csv"}} now',
        '{"name": "file_operations_reader", "arguments": "{\\"path\\": \\"/data/in.csv\\"}"}',
        '{"type": "function", "function": {"name": "file_operations_reader", '
        '"arguments": "{\\"path\\": \\"/data/in.csv\\"}"}}',
        '<function=file_operations_reader>{"path": "/data/in.csv"}</function>',
        '<tool_call>```json\n{"name": "file_operations_reader", "args": {"path": '
        '"/data/in.csv"}}\n```</tool_call>',
    ],
)
def test_call_shapes_models_emit(text: str) -> None:
    parsed = parse_text(text)
    assert parsed.problem is None
    assert parsed.call is not None
    assert (parsed.call.name, parsed.call.arguments) == ("file_operations_reader", ARGS)
    assert not parsed.completed


def test_several_calls_keep_order_first_is_the_call() -> None:
    text = (
        '<tool_call>{"name": "a_tool", "arguments": {}}</tool_call>\n'
        '<tool_call>{"name": "b_tool", "arguments": {"x": 1}}</tool_call>'
    )
    parsed = parse_text(text)
    assert [c.name for c in parsed.calls] == ["a_tool", "b_tool"]
    assert parsed.call is not None and parsed.call.name == "a_tool"


def test_list_inside_one_tag() -> None:
    parsed = parse_text('<tool_call>[{"name": "a", "arguments": {}}, {"name": "b"}]</tool_call>')
    assert [c.name for c in parsed.calls] == ["a", "b"]


def test_completion_signal_alone_completes() -> None:
    assert parse_text("All steps succeeded.\nTASK_COMPLETED").completed
    assert parse_text("TASK_COMPLETED").completed


def test_completion_beside_a_call_is_not_taken() -> None:
    parsed = parse_text('<tool_call>{"name": "a", "arguments": {}}</tool_call> TASK_COMPLETED')
    assert parsed.call is not None and not parsed.completed
    assert mentions_completion("x TASK_COMPLETED")
    assert not mentions_completion("TASK_COMPLETEDNESS")


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "empty reply"),
        ("   \n", "empty reply"),
        (None, "empty reply"),
        ('<tool_call>{"name": "a", "arguments": {</tool_call>', "malformed JSON"),
        ('<tool_call>{"arguments": {}}</tool_call>', "names no tool"),
        ("I think we should read the file first.", "no tool call found"),
        ("x" * (MAX_REPLY_CHARS + 1), "too long"),
        ('```json\n{"records": 3}\n```', "no tool call found"),
    ],
)
def test_unusable_replies_say_why(text: str | None, fragment: str) -> None:
    parsed = parse_text(text)
    assert parsed.call is None and not parsed.completed
    assert parsed.problem is not None and fragment in parsed.problem


def test_malformed_tag_with_signal_is_an_error_not_completion() -> None:
    parsed = parse_text('<tool_call>{"name": </tool_call> TASK_COMPLETED')
    assert not parsed.completed and parsed.problem is not None


def test_undecodable_string_arguments_reach_the_environment() -> None:
    parsed = parse_text('{"name": "a_tool", "arguments": "{not json"}')
    assert parsed.call is not None and parsed.call.arguments == "{not json"


def test_native_calls() -> None:
    calls = (ToolCall("c1", "file_operations_reader", json.dumps(ARGS)),
             ToolCall("c2", "utility_logger", ""))
    parsed = parse_native(calls)
    assert parsed.call is not None
    assert (parsed.call.id, parsed.call.arguments) == ("c1", ARGS)
    assert parsed.calls[1].arguments == {}


def test_native_malformed_arguments_and_missing_name() -> None:
    assert "not valid JSON" in (parse_native((ToolCall("c1", "a", "{oops"),)).problem or "")
    assert parse_native((ToolCall("c1", "", "{}"),)).problem is not None
    # a broken second call does not spoil the first
    parsed = parse_native((ToolCall("c1", "a", "{}"), ToolCall("c2", "b", "{oops")))
    assert parsed.problem is None and [c.name for c in parsed.calls] == ["a"]


def test_native_without_calls_falls_back_to_text() -> None:
    assert parse_native((), "TASK_COMPLETED").completed
    parsed = parse_native((), '<tool_call>{"name": "a", "arguments": {}}</tool_call>')
    assert parsed.call is not None and parsed.call.name == "a"


def test_pathological_nesting_does_not_raise() -> None:
    for text in ("[" * 100_00, "{" * 10_000, '{"a":' * 5000, "<tool_call>" + "[" * 10_000):
        parse_text(text)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_arbitrary_text_never_raises(text: str) -> None:
    parsed = parse_text(text)
    assert parsed.completed or parsed.call is not None or parsed.problem


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=3),
    max_leaves=10,
)


@settings(max_examples=200, deadline=None)
@given(_json_values, st.sampled_from(["<tool_call>{}</tool_call>", "```json\n{}\n```", "{}"]))
def test_arbitrary_json_in_any_wrapper_never_raises(value: object, wrapper: str) -> None:
    parse_text(wrapper.replace("{}", json.dumps(value), 1))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.text(max_size=5), st.text(max_size=20), st.text(max_size=30)),
                max_size=3), st.none() | st.text(max_size=50))
def test_arbitrary_native_calls_never_raise(calls: list[tuple[str, str, str]],
                                            content: str | None) -> None:
    parse_native(tuple(ToolCall(*c) for c in calls), content)


@pytest.mark.parametrize("text", [
    '<tool_call>{"name": "a", "arguments": {}}</tool_call>',
    '<TOOL_CALL>{"name": "a"}</Tool_Call>',
    "<tool_call></tool_call>",
    '<tool_call>{"name": "a"}</tool_call><tool_call>{"name": "b"}</tool_call>',
    '<tool_call>{"name": "a"}</tool_call> trailing',
    '<tool_call>{"name": "a"}',
    'say <tool_call>{"name": "a"}</tool_call>',
])
def test_one_tag_shortcut_reads_what_the_pattern_reads(text: str) -> None:
    from pytest_resilibench.runtime.parsing import _TAG, _single_tag

    found = _single_tag(text)
    assert found is None or found == [m.group(1) for m in _TAG.finditer(text)]
    assert found is not None or not (text.startswith("<tool_call>")
                                     and text.endswith("</tool_call>") and text.count("<") == 2)


def test_a_quoted_observation_is_not_a_call() -> None:
    reply = ('{"tool": "data_processing_parser", "status": "success", "output": {"ref": '
             '"data_processing_parser#1"}}. TASK_COMPLETED')
    parsed = parse_text(reply)
    assert parsed.calls == () and parsed.completed


def test_keys_beside_the_arguments_are_listed_as_ignored() -> None:
    parsed = parse_text('{"name": "data_processing_filter", "arguments": {"condition": '
                        '"days_overdue > 30"}, "source": "data_processing_parser#3"}')
    assert parsed.call is not None
    assert parsed.call.arguments == {"condition": "days_overdue > 30"}
    assert parsed.call.ignored == ("source",)
    assert parse_text('<tool_call>{"name": "utility_logger", "arguments": {}}</tool_call>'
                      ).calls[0].ignored == ()


@pytest.mark.parametrize("arguments", [ARGS, {"path": "/data/in.csv", "fields": ["a", "b"]}])
def test_a_reply_parsed_again_is_the_same_call_with_arguments_of_its_own(
    arguments: dict[str, object],
) -> None:
    """Parses of a recurring reply are memoised (flat arguments): each parse still hands out
    arguments of its own, since the environment and the record keep them."""
    text = f"<tool_call>{json.dumps({'name': 'file_operations_reader', 'arguments': arguments})}" \
        "</tool_call>"
    first = parse_text(text)
    assert first.call is not None
    first.call.arguments["path"] = "/somewhere/else"
    again, third = parse_text(text), parse_text(text)
    assert again.call is not None and third.call is not None
    assert again.call.arguments == arguments
    assert again.call.arguments is not third.call.arguments
    assert again == third == parse_text(text)
