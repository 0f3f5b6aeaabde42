"""Template filters for the benchmark pages: Python source with line numbers and highlighting, numbers.

The highlighter is the standard library's tokenizer, so uploaded code is shown without a client-side
library or a CDN; a source that does not tokenize (the syntax error a user came to see) is still shown,
highlighted up to the point where tokenizing stopped.
"""

from __future__ import annotations

import io
import keyword
import tokenize
from collections import defaultdict

from django import template
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

register = template.Library()

_BUILTIN_NAMES = frozenset({"range", "len", "print", "int", "float", "tuple", "list", "dict", "True", "False", "None"})


def _token_class(token: tokenize.TokenInfo, previous: tokenize.TokenInfo | None) -> str | None:
    if token.type == tokenize.COMMENT:
        return "comment"
    if token.type == tokenize.STRING or token.type in _FSTRING_TYPES:
        return "string"
    if token.type == tokenize.NUMBER:
        return "number"
    if token.type == tokenize.NAME:
        if previous is not None and previous.type == tokenize.OP and previous.string == "@":
            return "decorator"
        if previous is not None and previous.type == tokenize.NAME and previous.string in ("def", "class"):
            return "definition"
        if keyword.iskeyword(token.string):
            return "keyword"
        if token.string in _BUILTIN_NAMES:
            return "builtin"
    if token.type == tokenize.OP and token.string == "@":
        return "decorator"
    return None


# Python 3.12 splits f-strings into several token types; 3.11 has one STRING token.
_FSTRING_TYPES = {getattr(tokenize, name) for name in ("FSTRING_START", "FSTRING_MIDDLE", "FSTRING_END") if hasattr(tokenize, name)}


def highlight_python(source: str) -> list[SafeString]:
    """One HTML string per source line, tokens wrapped in `<span class="tok-KIND">`."""
    text = source.replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    spans: dict[int, list[tuple[int, int, str]]] = defaultdict(list)
    previous = None
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            kind = _token_class(token, previous)
            if token.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.COMMENT):
                previous = token
            if kind is None:
                continue
            (start_row, start_col), (end_row, end_col) = token.start, token.end
            for row in range(start_row, end_row + 1):
                if row > len(lines):
                    break
                begin = start_col if row == start_row else 0
                end = end_col if row == end_row else len(lines[row - 1])
                spans[row].append((begin, end, kind))
    except (tokenize.TokenError, SyntaxError):
        pass  # keep what was highlighted before the error; the rest is shown plain
    rendered = []
    for number, line in enumerate(lines, start=1):
        parts, position = [], 0
        for begin, end, kind in sorted(spans.get(number, [])):
            if begin < position:
                continue
            parts.append(escape(line[position:begin]))
            parts.append(f'<span class="tok-{kind}">{escape(line[begin:end])}</span>')
            position = end
        parts.append(escape(line[position:]))
        rendered.append(mark_safe("".join(parts)))
    if len(rendered) > 1 and lines[-1] == "":
        rendered.pop()  # the file's final newline is not a line of its own
    return rendered


@register.filter
def python_lines(source: str) -> list[tuple[int, SafeString]]:
    """`{% for number, html in kernel.source|python_lines %}`"""
    return list(enumerate(highlight_python(source or ""), start=1))


@register.filter
def percent(value: float | None, digits: int = 1) -> str:
    if value is None:
        return "—"
    return f"{value * 100:.{digits}f}%"


@register.filter
def milliseconds(value: float | None) -> str:
    """Latencies span microseconds (mini shapes) to seconds (full shapes): keep 3 significant digits."""
    if value is None:
        return "—"
    if value >= 100:
        return f"{value:,.0f} ms"
    return f"{value:.3g} ms"


@register.filter
def big_number(value: int | float | None) -> str:
    """1.23e9-style counts as 1.23 G."""
    if value is None:
        return "—"
    number = float(value)
    for threshold, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(number) >= threshold:
            return f"{number / threshold:.3g} {suffix}"
    return f"{number:.3g}"
