"""A small, safe Markdown renderer for memory summaries (Summarizer lessons and AccelOpt's imported ones).

It covers what lessons use: code fences (as code blocks), `inline code`, **bold**, *emphasis*, "- " and "1. "
lists, headings, paragraphs. Everything is HTML-escaped first, so a summary can never inject markup; anything
else stays as plain text. No dependency: the pages need this much, not a full CommonMark parser.
"""

from __future__ import annotations

import html
import re

_INLINE = (
    (re.compile(r"`([^`\n]+)`"), r"<code>\1</code>"),
    (re.compile(r"\*\*([^*\n]+)\*\*"), r"<strong>\1</strong>"),
    (re.compile(r"(?<![*\w])\*([^*\n]+)\*(?![*\w])"), r"<em>\1</em>"),
)
_LIST_ITEM = re.compile(r"^\s*(?:[-*]|\d+[.)])\s+(.*)$")
_HEADING = re.compile(r"^(#{1,6})\s+(.*)$")


def _inline(text: str) -> str:
    for pattern, replacement in _INLINE:
        text = pattern.sub(replacement, text)
    return text


def render_markdown(source: str) -> str:
    """HTML for a summary: escaped, then the Markdown subset above."""
    out: list[str] = []
    paragraph: list[str] = []
    items: list[str] = []
    ordered = False

    def flush() -> None:
        nonlocal items
        if paragraph:
            out.append("<p>" + "<br>".join(_inline(line) for line in paragraph) + "</p>")
            paragraph.clear()
        if items:
            tag = "ol" if ordered else "ul"
            out.append(f"<{tag}>" + "".join(f"<li>{_inline(item)}</li>" for item in items) + f"</{tag}>")
            items = []

    lines = html.escape(source.replace("\r\n", "\n")).split("\n")
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.strip().startswith("```"):
            flush()
            language = line.strip()[3:].strip()
            code: list[str] = []
            index += 1
            while index < len(lines) and not lines[index].strip().startswith("```"):
                code.append(lines[index])
                index += 1
            attribute = f' class="language-{language}"' if re.fullmatch(r"[\w+-]+", language) else ""
            out.append(f"<pre><code{attribute}>" + "\n".join(code) + "</code></pre>")
        elif not line.strip():
            flush()
        elif heading := _HEADING.match(line):
            flush()
            level = min(len(heading.group(1)) + 2, 6)  # inside a page section: h3 and below
            out.append(f"<h{level}>{_inline(heading.group(2))}</h{level}>")
        elif item := _LIST_ITEM.match(line):
            if paragraph:
                flush()
            ordered = line.strip()[0].isdigit()
            items.append(item.group(1))
        else:
            if items:
                flush()
            paragraph.append(line)
        index += 1
    flush()
    return "".join(out)
