"""Reading model replies. Every function returns a value or raises `UnusableReply` naming what was
wrong; callers turn that into a recorded, counted unusable reply, never a crash."""

from __future__ import annotations

import ast
import json
import re

from engine.agents.base import MemoryDraft


def kernel_function(tree: ast.Module) -> ast.FunctionDef | None:
    """A kernel module's entry point: the top-level function decorated with `...jit`, else the last one."""
    functions = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    for fn in functions:
        for deco in fn.decorator_list:
            target = deco.func if isinstance(deco, ast.Call) else deco
            name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
            if name == "jit":
                return fn
    return functions[-1] if functions else None


def kernel_function_name(source: str) -> str:
    try:
        fn = kernel_function(ast.parse(source))
    except SyntaxError:
        return ""
    return fn.name if fn else ""


class UnusableReply(ValueError):
    """The reply cannot be used; the message says why (shown in the run's audit trail)."""


# A fence opens with ``` or ~~~ (optionally tagged) at the start of a line and closes with the same run.
_FENCE = re.compile(r"^(?P<fence>`{3,}|~{3,})[ \t]*(?P<tag>[\w+.-]*)[^\n]*\n(?P<body>.*?)^(?P=fence)[ \t]*$",
                    re.DOTALL | re.MULTILINE)
_PYTHON_TAGS = {"python", "py", "python3", ""}


def strip_reasoning(text: str) -> str:
    """Drop <think>…</think> blocks that some reasoning models put in the content."""
    text = re.sub(r"<think>.*?</think>", "", text, flags=re.DOTALL)
    # An unclosed <think> means the reply was cut off inside the reasoning: nothing after it is an answer.
    return text.split("<think>", 1)[0]


def extract_kernel(reply: str, function_name: str = "") -> str:
    """The last fenced Python block of `reply` that parses (and defines `function_name`, if given)."""
    text = strip_reasoning(reply or "")
    if not text.strip():
        raise UnusableReply("the reply is empty")
    blocks = [m.group("body") for m in _FENCE.finditer(text) if m.group("tag").lower() in _PYTHON_TAGS]
    if not blocks:
        if re.search(r"^(`{3,}|~{3,})", text, re.MULTILINE):
            raise UnusableReply("the reply has a code fence that is never closed (truncated reply?)")
        raise UnusableReply("the reply has no fenced Python code block")
    problems = []
    for body in reversed(blocks):
        try:
            tree = ast.parse(body)
        except SyntaxError as exc:
            problems.append(f"line {exc.lineno}: {exc.msg}")
            continue
        if function_name and not any(
            isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == function_name
            for node in tree.body
        ):
            problems.append(f"no top-level function {function_name!r}")
            continue
        return body.rstrip() + "\n"
    raise UnusableReply(f"no usable Python block among {len(blocks)}: " + "; ".join(problems))


_NUMBERED = re.compile(r"^\s{0,3}(?:\*\*)?(?:plan\s*)?(\d{1,2})[.):\]]\*{0,2}\s+(.*)$", re.IGNORECASE)
_HEADING = re.compile(r"^\s{0,3}#{1,4}\s*(?:plan\s*)?(\d{1,2})\b[.):]?\s*(.*)$", re.IGNORECASE)


def parse_plans(reply: str, limit: int) -> list[str]:
    """Plans from a JSON list (of strings or of objects with a plan-like field), a fenced JSON block,
    or a numbered list ("1. …", "1) …", "Plan 1: …", "### Plan 1"). Continuation lines stay with their plan."""
    text = strip_reasoning(reply or "").strip()
    if not text:
        raise UnusableReply("the reply is empty")
    plans = _plans_from_json(text)
    if plans is None:
        plans = _plans_from_numbered_list(text)
    plans = [p.strip() for p in plans if p and p.strip()]
    if not plans:
        raise UnusableReply("the reply has neither a JSON list of plans nor a numbered list")
    return plans[:limit]


def _plans_from_json(text: str) -> list[str] | None:
    candidates = [m.group("body") for m in _FENCE.finditer(text) if m.group("tag").lower() in {"json", ""}]
    start, end = text.find("["), text.rfind("]")
    if start != -1 and end > start:
        candidates.append(text[start : end + 1])
    start, end = text.find("{"), text.rfind("}")
    if start != -1 and end > start:
        candidates.append(text[start : end + 1])
    for candidate in candidates:
        try:
            data = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(data, dict):
            data = next((v for k, v in data.items() if k.lower() in {"plans", "plan", "items"}), None)
            if isinstance(data, str):
                data = [data]
        if isinstance(data, list):
            plans = [_plan_text(item) for item in data]
            if any(plans):
                return [p for p in plans if p]
    return None


def _plan_text(item: object) -> str:
    if isinstance(item, str):
        return item
    if isinstance(item, dict):
        title = next((str(v) for k, v in item.items() if k.lower() in {"title", "name"}), "")
        body = next((str(v) for k, v in item.items()
                     if k.lower() in {"plan", "description", "details", "summary", "steps", "text"}), "")
        return f"{title}: {body}" if title and body else (title or body)
    return ""


def _plans_from_numbered_list(text: str) -> list[str]:
    plans: list[list[str]] = []
    expected = 1
    for line in text.splitlines():
        match = _NUMBERED.match(line) or _HEADING.match(line)
        if match and int(match.group(1)) == expected:
            plans.append([match.group(2).strip()])
            expected += 1
        elif plans and line.strip():
            plans[-1].append(line.strip())
    return ["\n".join(p).strip() for p in plans]


def parse_summary(reply: str) -> MemoryDraft:
    """A memory entry: a bold or heading title line, then the description."""
    text = strip_reasoning(reply or "").strip()
    if not text:
        raise UnusableReply("the reply is empty")
    if "no optimization found" in text.lower()[:200]:
        raise UnusableReply("the summarizer found no transferable optimization")
    lines = [line for line in text.splitlines()]
    title = ""
    rest_start = 0
    for index, line in enumerate(lines):
        stripped = line.strip()
        if not stripped:
            continue
        bold = re.match(r"^(?:title:\s*)?\*\*(.+?)\*\*\s*$", stripped, re.IGNORECASE)
        heading = re.match(r"^#{1,4}\s+(.+)$", stripped)
        labelled = re.match(r"^title:\s*(.+)$", stripped, re.IGNORECASE)
        match = bold or heading or labelled
        title = (match.group(1) if match else stripped).strip().strip("*").strip()
        rest_start = index + 1
        break
    summary = "\n".join(lines[rest_start:]).strip()
    summary = re.sub(r"^summary:\s*", "", summary, flags=re.IGNORECASE)
    if not title:
        raise UnusableReply("the reply has no title line")
    if len(summary) < 20:
        raise UnusableReply(f"the description after the title is too short ({len(summary)} characters)")
    return MemoryDraft(title=title[:200], summary=summary)
