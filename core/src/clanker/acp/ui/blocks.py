"""The full-screen interface's renderer: pure functions from session state to
``rich`` renderables (and to ANSI text, for the footer).

Nothing here reads the terminal, the clock or the agent: a block, the
workspace and a width go in, a renderable comes out, so every shape is tested
on fixtures. Every body is bounded and says when it was cut, with both
figures (shown and whole); the whole of it is always in the transcript.
"""

from __future__ import annotations

import difflib
import functools
import io
import os
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from attrs import frozen
from rich.console import Console, Group, RenderableType
from rich.markdown import Markdown
from rich.panel import Panel
from rich.rule import Rule
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from clanker.acp.state import Block, SessionState

__all__ = [
    "EXPANDED_LINES",
    "EXPANDED_MARKDOWN",
    "MAX_LINES",
    "MAX_MARKDOWN",
    "Status",
    "approval_pane",
    "block_renderable",
    "collapsed",
    "live_lines",
    "offer_pane",
    "split_diff",
    "status_line",
    "to_ansi",
    "tool_body",
]

MAX_LINES: Final = 200
"""Lines of a file read, a patch or a command's output shown in the scrollback."""
MAX_MARKDOWN: Final = 64 * 1024
"""Characters of an answer rendered as Markdown; the rest is cut, and said so."""
EXPANDED_LINES: Final = 10_000
"""Lines of a body shown when its block is expanded (Ctrl+O): bounded too."""
EXPANDED_MARKDOWN: Final = 1024 * 1024
"""Characters of an answer shown when it is expanded."""
_THOUGHT_LINE: Final = 120
PANE_LINES: Final = 30
"""Lines of a command or patch shown in the approval pane."""
_ANSI: Final = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-_]")
_PADDING: Final = re.compile(r" +((?:\x1b\[[0-9;]*m)*)$", re.MULTILINE)
_GLYPH: Final = {"read": "▸", "search": "⌕", "edit": "✎", "delete": "✗", "move": "⇄",
                 "execute": "$", "think": "…", "fetch": "⇣", "switch_mode": "⇆"}
_DONE: Final = {"completed": "done", "failed": "failed"}


def _size(count: int) -> str:
    if count < 1024:
        return f"{count} B"
    if count < 1024 * 1024:
        return f"{count / 1024:.1f} KiB"
    return f"{count / (1024 * 1024):.1f} MiB"


def relative(path: str, cwd: str) -> str:
    """``path`` relative to the workspace when it is inside it, else as given."""
    if not os.path.isabs(path):
        return path
    rel = os.path.relpath(path, cwd)
    return path if rel == ".." or rel.startswith(".." + os.sep) else rel


def _bounded_lines(text: str, limit: int) -> tuple[str, str | None]:
    """The first ``limit`` lines and, when cut, the marker saying how much was."""
    lines = text.splitlines()
    if len(lines) <= limit:
        return text.rstrip("\n"), None
    return "\n".join(lines[:limit]), f"… truncated: {limit} of {len(lines)} lines shown"


def _texts(content: object) -> list[str]:
    """The text parts of a tool call's ``content`` list."""
    found: list[str] = []
    for item in content if isinstance(content, list) else []:
        if not isinstance(item, dict):
            continue
        inner = item.get("content")
        if item.get("type") == "content" and isinstance(inner, dict) \
                and isinstance(inner.get("text"), str):
            found.append(inner["text"])
    return found


def _diffs(content: object) -> list[dict[str, Any]]:
    return [item for item in (content if isinstance(content, list) else [])
            if isinstance(item, dict) and item.get("type") == "diff"
            and isinstance(item.get("path"), str) and isinstance(item.get("newText"), str)]


def unified_diff(item: Mapping[str, Any], cwd: str) -> str:
    """A ``diff`` content item as a unified patch with three lines of context."""
    path = relative(str(item["path"]), cwd)
    old = item.get("oldText")
    old_lines = old.splitlines(keepends=True) if isinstance(old, str) else []
    new_lines = str(item["newText"]).splitlines(keepends=True)
    lines = difflib.unified_diff(old_lines, new_lines,
                                 "/dev/null" if old is None else f"a/{path}", f"b/{path}", n=3)
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def command(fields: Mapping[str, Any]) -> str | None:
    """The exact command a tool call runs, when its ``rawInput`` says."""
    raw = fields.get("rawInput")
    if not isinstance(raw, dict):
        return None
    value = raw.get("command") if "command" in raw else raw.get("cmd")
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        import shlex

        return shlex.join(value)
    return value if isinstance(value, str) else None


def _output(fields: Mapping[str, Any]) -> str | None:
    texts = _texts(fields.get("content"))
    if texts:
        return "\n".join(texts)
    raw = fields.get("rawOutput")
    if isinstance(raw, str):
        return raw
    if isinstance(raw, dict):
        for key in ("output", "stdout", "content", "text", "error"):
            if isinstance(raw.get(key), str):
                return str(raw[key])
        parts = [p["text"] for p in raw.get("content") or [] if isinstance(p, dict)
                 and p.get("type") == "text" and isinstance(p.get("text"), str)]
        if parts:
            return "\n".join(parts)
    return None


def _paths(fields: Mapping[str, Any], cwd: str) -> list[str]:
    return [relative(str(loc["path"]), cwd) for loc in fields.get("locations") or []
            if isinstance(loc, dict) and isinstance(loc.get("path"), str)]


def tool_header(fields: Mapping[str, Any], cwd: str) -> Text:
    """``▸ title  path  status``: the one line every tool call has."""
    kind = fields.get("kind")
    kind = kind if isinstance(kind, str) else None
    title = command(fields) or str(fields.get("title") or fields.get("toolCallId") or "tool call")
    header = Text()
    header.append(f"{_GLYPH.get(kind or '', '•')} ", style="bold cyan")
    header.append(title, style="bold")
    header.append(f"  [{kind or 'no kind'}]", style="dim")
    paths = [p for p in _paths(fields, cwd) if p not in title]
    if paths:
        header.append("  " + ", ".join(paths[:3]) + (" …" if len(paths) > 3 else ""),
                      style="cyan")
    status = fields.get("status")
    if isinstance(status, str):
        header.append(f"  {_DONE.get(status, status)}",
                      style="red" if status == "failed" else "green" if status == "completed"
                      else "yellow")
    return header


def _lexer(path: str) -> str:
    """The highlighting for ``path``, from its extension (or its name: ``Makefile``)."""
    name = os.path.basename(path)
    suffix = os.path.splitext(name)[1]
    return _lexer_named("file" + suffix if suffix else name)


@functools.lru_cache(maxsize=256)
def _lexer_named(name: str) -> str:
    # pygments walks every lexer it has for a name: once per extension, not per block.
    from pygments.lexers import find_lexer_class_for_filename  # type: ignore[import-untyped]

    found = find_lexer_class_for_filename(name)
    return found.aliases[0] if found is not None and found.aliases else "text"


def _marker(text: str) -> Text:
    return Text(text, style="dim italic")


def split_diff(item: Mapping[str, Any], cwd: str, limit: int = MAX_LINES) -> RenderableType:
    """A ``diff`` content item side by side: the old lines on the left, the new on
    the right, each numbered, three lines of context around each change; at most
    ``limit`` rows, and a line saying how many there were when cut."""
    path = relative(str(item["path"]), cwd)
    old = item.get("oldText")
    old_lines = old.splitlines() if isinstance(old, str) else []
    new_lines = str(item["newText"]).splitlines()
    table = Table(box=None, expand=True, pad_edge=False, show_edge=False, padding=(0, 1))
    table.add_column(style="dim", justify="right", no_wrap=True)
    table.add_column("/dev/null" if old is None else f"a/{path}", ratio=1, overflow="fold")
    table.add_column(style="dim", justify="right", no_wrap=True)
    table.add_column(f"b/{path}", ratio=1, overflow="fold")
    rows: list[tuple[str, Text, str, Text]] = []
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    for number, group in enumerate(matcher.get_grouped_opcodes(3)):
        if number:
            rows.append(("", Text("⋯", style="dim"), "", Text("⋯", style="dim")))
        for tag, i1, i2, j1, j2 in group:
            left, right = range(i1, i2), range(j1, j2)
            for row in range(max(len(left), len(right))):
                i = left[row] if row < len(left) else None
                j = right[row] if row < len(right) else None
                style = "" if tag == "equal" else None
                rows.append((
                    "" if i is None else str(i + 1),
                    Text("" if i is None else old_lines[i],
                         style=style if style is not None else "red"),
                    "" if j is None else str(j + 1),
                    Text("" if j is None else new_lines[j],
                         style=style if style is not None else "green")))
    for row_cells in rows[:limit]:
        table.add_row(*row_cells)
    if len(rows) <= limit:
        return table
    return Group(table, _marker(f"… truncated: {limit} of {len(rows)} rows shown"))


def _diff_blocks(fields: Mapping[str, Any], cwd: str, *, split: bool,
                 limit: int) -> list[RenderableType]:
    """Each edit of a tool call as a unified diff (``split``: side by side), at most
    ``limit`` lines each, and said so when cut."""
    blocks: list[RenderableType] = []
    for item in _diffs(fields.get("content")):
        if split:
            blocks.append(split_diff(item, cwd, limit))
            continue
        patch, cut = _bounded_lines(unified_diff(item, cwd), limit)
        blocks.append(Syntax(patch, "diff", theme="ansi_dark", word_wrap=True))
        if cut:
            blocks.append(_marker(cut))
    return blocks


def tool_body(fields: Mapping[str, Any], cwd: str, *, split: bool = False,
              limit: int = MAX_LINES) -> list[RenderableType]:
    """What a tool call shows under its header: a file read with its syntax, an
    edit as a unified diff (``split``: side by side), a command's output plain
    (ANSI stripped); each at most ``limit`` lines, and said so when cut."""
    kind = fields.get("kind")
    body = _diff_blocks(fields, cwd, split=split, limit=limit)
    output = _output(fields)
    if output is None or not output.strip():
        return body
    if kind == "read":
        paths = [loc["path"] for loc in fields.get("locations") or []
                 if isinstance(loc, dict) and isinstance(loc.get("path"), str)]
        shown, cut = _bounded_lines(output, limit)
        lexer = _lexer(paths[0]) if paths else "text"
        body.append(Syntax(shown, lexer, theme="ansi_dark", line_numbers=True, word_wrap=True))
    else:
        shown, cut = _bounded_lines(_ANSI.sub("", output), limit)
        body.append(Text(shown, style="dim" if kind != "execute" else ""))
    if cut:
        body.append(_marker(cut))
    return body


def _line_count(text: str) -> int:
    return len(text.splitlines())  # as the cut counts them (:func:`_bounded_lines`)


def collapsed(block: Block, cwd: str) -> bool:
    """Whether ``block`` goes into the scrollback cut: a body over
    :data:`MAX_LINES` lines, an answer over :data:`MAX_MARKDOWN`, a thought
    longer than its first line (Ctrl+O shows such a block whole)."""
    if block.kind == "agent":
        return block.size > MAX_MARKDOWN
    if block.kind == "user":
        return _line_count(block.text) > MAX_LINES
    if block.kind == "thought":
        whole = block.text.strip()
        first = whole.splitlines()[:1]
        return len(whole) > len(first[0][:_THOUGHT_LINE] if first else "")
    if block.kind != "tool":
        return False
    fields = block.fields
    if any(_line_count(unified_diff(item, cwd)) > MAX_LINES
           for item in _diffs(fields.get("content"))):
        return True
    output = _output(fields)
    return output is not None and _line_count(output) > MAX_LINES


def _message(block: Block, limit: int = MAX_MARKDOWN) -> RenderableType:
    size = block.size
    text = block.text if size <= limit else block.text[:limit]
    parts: list[RenderableType] = [Markdown(text)]
    if size > limit:
        parts.append(_marker(f"… truncated: {_size(limit)} of {_size(size)} shown "
                             "(the whole answer is in the transcript: clanker coder --show)"))
    return Group(*parts)


def _plan(fields: Mapping[str, Any]) -> RenderableType:
    marks = {"completed": "✓", "in_progress": "▶", "pending": "○"}
    text = Text("plan\n", style="bold")
    entries = [e for e in fields.get("entries") or [] if isinstance(e, dict)]
    for entry in entries[:MAX_LINES]:
        status = str(entry.get("status", ""))
        text.append(f"  {marks.get(status, '·')} {entry.get('content', '')}\n",
                    style="dim" if status == "completed" else "")
    if len(entries) > MAX_LINES:
        text.append(f"… truncated: {MAX_LINES} of {len(entries)} entries shown\n",
                    style="dim italic")
    text.rstrip()
    return text


def _user(block: Block, limit: int = MAX_LINES) -> RenderableType:
    text, cut = _bounded_lines(block.text, limit)
    you = Text("you  ", style="bold green")
    you.append(text)
    return Group(Rule(style="dim"), you, *([_marker(cut)] if cut else []))


def _thought(block: Block, expanded: bool = False) -> RenderableType:
    """Dim and collapsed to its first line (nothing the person needs lives only there);
    expanded, the whole of it (bounded)."""
    if expanded:
        shown, cut = _bounded_lines(block.text.strip(), EXPANDED_LINES)
        return Group(Text(f"(thinking) {shown}", style="dim italic"),
                     *([_marker(cut)] if cut else []))
    first = block.text.strip().splitlines()[:1]
    line = first[0][:_THOUGHT_LINE] if first else ""
    return Text(f"(thinking) {line}" + (" …" if block.size > len(line) else ""),
                style="dim italic")


_TEXT_BLOCKS: Final[dict[str, Callable[[Block, bool], RenderableType]]] = {
    "agent": lambda block, expanded: _message(
        block, EXPANDED_MARKDOWN if expanded else MAX_MARKDOWN),
    "user": lambda block, expanded: _user(block, EXPANDED_LINES if expanded else MAX_LINES),
    "thought": _thought,
}


def block_renderable(block: Block, cwd: str, *, split: bool = False,
                     expanded: bool = False) -> RenderableType:
    """One finished block as it goes into the scrollback (``split``: edits side by
    side), or, ``expanded``, as Ctrl+O shows it: whole, up to the larger bounds
    (:data:`EXPANDED_LINES`, :data:`EXPANDED_MARKDOWN`)."""
    if block.kind in _TEXT_BLOCKS:
        return _TEXT_BLOCKS[block.kind](block, expanded)
    if block.kind == "tool":
        return Group(tool_header(block.fields, cwd),
                     *tool_body(block.fields, cwd, split=split,
                                limit=EXPANDED_LINES if expanded else MAX_LINES))
    if block.kind == "plan":
        return _plan(block.fields)
    if block.kind == "approval":
        return approval_line(block.fields)
    if block.kind == "note":
        return Text(str(block.fields.get("text", "")), style="dim")
    return Text(f"unsupported update: {block.text}", style="yellow")


def approval_line(fields: Mapping[str, Any]) -> Text:
    """An approval decision, as disclosed in the scrollback."""
    verdict = str(fields.get("verdict"))
    mark = {"allow": ("✓ allowed", "green"), "reject": ("✗ refused", "red"),
            "cancelled": ("✗ cancelled", "red")}.get(verdict, (verdict, "yellow"))
    text = Text(mark[0], style=mark[1])
    title = fields.get("title")
    if title:
        text.append(f" {title}")
    kind = fields.get("kind")
    text.append(f" [{kind or 'no kind'}]", style="dim")
    text.append(f"  {fields.get('rule')}", style="dim")
    return text


@frozen(kw_only=True)
class Status:
    """What the status line shows beside the session's own state."""

    agent: str
    repository: str | None = None
    branch: str | None = None
    working: bool = False
    note: str | None = None


def _current(state: SessionState, category: str) -> str | None:
    for option in state.config_options:
        if isinstance(option, dict) and (option.get("category") == category
                                         or option.get("id") == category):
            value = option.get("currentValue")
            return str(value) if value is not None else None
    return None


def _usage(usage: Mapping[str, Any]) -> str | None:
    used, size = usage.get("used"), usage.get("size")
    if not isinstance(used, int | float):
        return None
    shown = f"{used:,} tokens" if not isinstance(size, int | float) or not size \
        else f"{used:,}/{size:,} tokens"
    cost = usage.get("cost")
    if isinstance(cost, dict) and isinstance(cost.get("amount"), int | float):
        shown += f" · {cost['amount']:.2f} {cost.get('currency') or ''}".rstrip()
    return shown


def status_line(state: SessionState, status: Status) -> str:
    """``agent · model · mode · repository · branch · tokens``: the one chrome row."""
    parts = [status.agent]
    model = _current(state, "model")
    mode = state.mode or _current(state, "mode")
    if model:
        parts.append(f"model {model}")
    if mode:
        parts.append(f"mode {mode}")
    if status.repository:
        parts.append(status.repository + (f" ({status.branch})" if status.branch else ""))
    usage = _usage(state.usage)
    if usage:
        parts.append(usage)
    parts.append("working" if status.working else "ready")
    if status.note:
        parts.append(status.note)
    return " · ".join(parts)


def approval_pane(fields: Mapping[str, Any], *, cwd: str, warning: str | None,
                  session_choice: bool, split: bool = False) -> RenderableType:
    """The decision pane: the tool, its kind, the exact command or patch, the
    paths relative to the workspace, and the keys. No justification written by
    the model: the argument for an action is the action."""
    kind = fields.get("kind")
    kind = kind if isinstance(kind, str) else None
    lines: list[RenderableType] = [Text(str(fields.get("title") or "(no title)"), style="bold")]
    paths = _paths(fields, cwd)
    for item in _diffs(fields.get("content")):
        paths.append(relative(str(item["path"]), cwd))
    if paths:
        lines.append(Text(", ".join(dict.fromkeys(paths)), style="cyan"))
    exact = command(fields)
    if exact is not None:
        shown, cut = _bounded_lines(exact, PANE_LINES)
        lines.append(Syntax(shown, "bash", theme="ansi_dark", word_wrap=True))
        if cut:
            lines.append(_marker(cut))
    lines += _diff_blocks(fields, cwd, split=split, limit=PANE_LINES)
    if warning:
        lines.append(Text(f"warning: {warning}", style="bold yellow"))
    keys = Text("[y] approve once", style="bold")
    if session_choice:
        keys.append(f"   [a] approve {kind} this session", style="bold")
    keys.append("   [n] refuse", style="bold")
    lines.append(keys)
    return Panel(Group(*lines), title=f"approve {kind or 'a tool call without a kind'}",
                 title_align="left", border_style="yellow")


def offer_pane(question: str) -> RenderableType:
    """A yes/no question (restart the agent, send a prompt again)."""
    return Panel(Group(Text(question), Text("[y] yes   [n] no", style="bold")),
                 border_style="yellow")


def unchanged(text: str) -> str:
    """No redaction (there is no secret to hide)."""
    return text


def live_lines(blocks: Iterable[Block], cwd: str, *, tail: int = 6, width: int = 80,
               redact: Callable[[str], str] = unchanged) -> list[Text]:
    """The blocks not yet in the scrollback, as a few lines for the footer: a
    header per tool call, the last lines of the answer being written (redacted
    with a margin before they are cut, so no secret shows in part)."""
    lines: list[Text] = []
    for block in blocks:
        if block.kind == "tool":
            lines.append(tool_header(block.fields, cwd))
        elif block.kind in ("agent", "thought", "user"):
            text = redact(block.tail(tail * max(width, 20) + 1024))[-tail * max(width, 20):]
            rows = text.splitlines()[-tail:] if text else []
            style = "dim italic" if block.kind == "thought" else ""
            lines.extend(Text(row[:max(width, 20)], style=style) for row in rows)
        elif block.kind == "plan":
            entries = [e for e in block.fields.get("entries") or [] if isinstance(e, dict)]
            done = sum(1 for e in entries if e.get("status") == "completed")
            lines.append(Text(f"plan: {done}/{len(entries)} done", style="dim"))
    return lines[-(tail + 6):]


def to_ansi(renderable: RenderableType, width: int, *, color: bool = True) -> str:
    """``renderable`` as terminal text ``width`` columns wide (no colour: plain)."""
    buffer = io.StringIO()
    console = Console(file=buffer, width=max(width, 20), force_terminal=color,
                      color_system="256" if color else None, no_color=not color,
                      highlight=False, soft_wrap=False, legacy_windows=False)
    console.print(renderable)
    # rich pads every line to the width: trailing blanks would rewrap when the
    # terminal is narrowed later, so they go (the styles' resets stay).
    return _PADDING.sub(r"\1", buffer.getvalue())
