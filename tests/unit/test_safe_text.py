"""Text from elsewhere shown as data (base/safe_text.py): in the terminal no control character
gets through and a line is bounded; in markdown nothing becomes a tag, a code span, a link or
a cell boundary, and the text renders as the characters it holds."""

from __future__ import annotations

import html

import pytest
from markdown_it import MarkdownIt

from pytest_resilibench.base.safe_text import ELLIPSIS, for_markdown, for_terminal

# What a hostile model, agent or server may say (tests/plugin/test_untrusted_text.py feeds
# the same through a real run).
HOSTILE = [
    "\x1b[2J\x1b[31mFAKE: all tests passed\x1b[0m",  # clear the screen, recolour
    "\x1b]0;pwned\x07",  # OSC: retitle the window, ended by BEL
    "bell\x07bell \x9b31m C1 CSI \x7f DEL",
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "</table></td></tr> | cell | break |",
    "a|b|c",
    "```fence``` and `tick`",
    "[click](https://evil.example) ![pixel](https://evil.example/p.png)",
    "admin\u202egnp.exe \u2066isolate\u2069",  # bidi override, isolate
    "nul\x00byte \ud800 lone surrogate",
    "line one\nline two\r\nline three \\",
    "L" * 16384,
]
RAW_CONTROLS = {"\x1b", "\x07", "\x00", "\x9b", "\x7f", "\u202e", "\u2066", "\ud800", "\r"}


@pytest.mark.parametrize("text", HOSTILE)
def test_the_terminal_gets_no_control_character_and_a_bounded_line(text: str) -> None:
    shown = for_terminal(text)
    assert not RAW_CONTROLS & set(shown) and "\n" not in shown
    assert len(shown) <= 400
    block = for_terminal(text, block=True)
    assert not RAW_CONTROLS & set(block)
    assert all(len(line) <= 400 for line in block.splitlines())


def test_controls_are_shown_as_their_escapes_and_printable_text_is_kept() -> None:
    assert for_terminal("\x1b]0;pwned\x07") == "\\x1b]0;pwned\\x07"
    assert for_terminal("a\u202eb\x00c\x9b") == "a\\u202eb\\x00c\\x9b"
    assert for_terminal("one\ntwo\tthree") == "one\\ntwo\\tthree"
    assert for_terminal("one\ntwo\tthree\x1b", block=True) == "one\ntwo\tthree\\x1b"
    plain = "full success 80.0% [70.0, 90.0] of 10; é → ✓"
    assert for_terminal(plain) == plain and for_markdown(plain) == plain


def test_a_long_line_is_cut_with_an_ellipsis() -> None:
    shown = for_terminal("L" * 16384, limit=50)
    assert shown == "L" * 49 + ELLIPSIS
    assert for_markdown("L" * 16384, limit=50) == "L" * 49 + ELLIPSIS
    assert for_terminal("short", limit=50) == "short"


def _rendered(md: str) -> tuple[str, list[str]]:
    """The HTML markdown-it renders, and every raw HTML token it found."""
    parser = MarkdownIt("commonmark").enable("table")
    tokens = parser.parse(md)
    found = [t.content for tok in tokens for t in [tok, *(tok.children or [])]
             if t.type in ("html_inline", "html_block")]
    return parser.render(md), found


@pytest.mark.parametrize("text", HOSTILE)
def test_markdown_renders_the_text_inert_in_a_table_cell_and_a_list_item(text: str) -> None:
    cell = for_markdown(text, limit=20000)
    table = f"| model | raised | n |\n|---|---|---|\n| m | {cell} | 1 |\n"
    rendered, tags = _rendered(table + f"\n- **{cell}**: after\n")
    assert set(tags) <= {"<br>"}, tags  # line breaks only: no tag of the text's own
    assert "<script" not in rendered and "<img" not in rendered and "<a " not in rendered
    assert "<code>" not in rendered
    assert rendered.count("<table>") == rendered.count("</table>") == 1
    assert rendered.count("<td>") == 3  # the row kept its three columns
    # The cell shows the text, character for character (controls as their escapes, line
    # breaks as <br>).
    row = rendered[rendered.index("<tbody>"):rendered.index("</tbody>")]
    middle = html.unescape(row.split("<td>")[2].split("</td>")[0])
    expected = "<br>".join(for_terminal(line, limit=20000) for line in text.replace("\r\n", "\n")
                           .split("\n"))
    assert middle == expected


def test_markdown_is_one_line_whatever_the_line_breaks() -> None:
    assert for_markdown("a\nb\r\nc\u2028d") == "a<br>b<br>c<br>d"
    assert for_markdown("x | y `z` <b> & \\") == "x \\| y \\`z\\` &lt;b&gt; &amp; \\\\"
