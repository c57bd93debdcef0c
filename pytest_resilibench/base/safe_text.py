"""Text that came from elsewhere (a model, a server, an agent: error messages, infra causes,
model and agent names, tool output, why-lines) shown as data, never obeyed: one function per
medium, applied where text is shown, never to the data itself (the JSON report keeps every
byte; `redact.py` has already masked credentials).

`for_terminal`: every control character shown as its escape (`\\x1b`, `\\x07`, `\\x00`,
`\\u202e`), so that no escape sequence can clear the screen, recolour a line, retitle the
window or hide text, and a reader sees what the sender tried; a line cut at `limit` characters
with an ellipsis. Control means C0 (newline and tab kept in a block), DEL, C1, the Unicode
line and paragraph separators, the bidirectional embeddings, overrides and isolates (which
reorder what follows them: "Trojan Source", CVE-2021-42574) and lone surrogates (which a UTF-8
terminal cannot even encode).

`for_markdown`: the same escapes, then HTML's specials escaped (`&`, `<`, `>`: no tag, no
comment, no autolink), the backslash, backtick and pipe backslash-escaped (no code span, no
cell boundary: a table keeps its columns), `](` broken (no inline link or image), and line
breaks written `<br>` (one line: a table row or a list item stays whole). CommonMark allows a
backslash before any ASCII punctuation, so the text renders exactly as it came.
"""

from __future__ import annotations

import re

__all__ = ["CELL_LIMIT", "LINE_LIMIT", "MARKDOWN_LIMIT", "for_markdown", "for_terminal"]

LINE_LIMIT = 400  # characters of a terminal line from elsewhere (a 16 KB message floods it)
CELL_LIMIT = 200  # of a table cell, terminal or markdown (the table's width follows it)
MARKDOWN_LIMIT = 1000  # of a markdown field outside a table (a headline's error line)
ELLIPSIS = "…"

_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_BEYOND_C0 = f"\x7f-\x9f\u2028\u2029{_BIDI}\ud800-\udfff"
_ANY_CONTROL = re.compile(f"[\x00-\x1f{_BEYOND_C0}]")
_BLOCK_CONTROL = re.compile(f"[\x00-\x08\x0b-\x1f{_BEYOND_C0}]")  # tab and newline kept
_NEWLINES = re.compile(r"\r\n|[\r\n\v\f\x1c-\x1e\x85\u2028\u2029]")
_MARKDOWN = re.compile(r"[\\`|&<>]|\]\(")
_MARKDOWN_ESCAPES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", "](": "]\\("}


_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    return _NAMED.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + ELLIPSIS


def for_terminal(text: object, *, limit: int = LINE_LIMIT, block: bool = False) -> str:
    """`text` safe to print: control characters as escapes, cut to `limit` characters. A
    `block` keeps its newlines and tabs and cuts each line to `limit`; otherwise a newline
    is shown as `\\n` too (one line stays one line)."""
    text = str(text)
    if block:
        return "\n".join(_cut(_BLOCK_CONTROL.sub(_escape, line), limit)
                         for line in text.split("\n"))
    return _cut(_ANY_CONTROL.sub(_escape, text), limit)


def for_markdown(text: object, *, limit: int = CELL_LIMIT) -> str:
    """`text` as inert markdown on one line (a table cell, a list item, a paragraph): it
    renders as the characters it holds (controls as escapes), cut to `limit` characters."""
    text = _cut(str(text), limit)
    lines = [_ANY_CONTROL.sub(_escape, line) for line in _NEWLINES.split(text)]
    return "<br>".join(_MARKDOWN.sub(
        lambda m: _MARKDOWN_ESCAPES.get(m.group(), "\\" + m.group()), line) for line in lines)
