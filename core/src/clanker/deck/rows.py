"""The deck's picture, as a pure function of what the grid says and what was seen.

:func:`build_rows` orders agents by how much they need the person: needs input,
then working, then failed, then a completion not yet seen, then the rest; within
a state, the longest in it first. :func:`render` lays the rows out for a
terminal size, or says the terminal is too small. Nothing here reads a clock,
a file or the grid: the deck and its tests hand everything in.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Final

from attrs import frozen

from clanker.api import Clanker

if TYPE_CHECKING:
    from clanker.grid.protocol import TerminalEntry

__all__ = ["MIN_COLUMNS", "MIN_LINES", "Row", "Screen", "build_rows", "duration", "render"]

MIN_COLUMNS: Final = 60
MIN_LINES: Final = 8
HEADER_LINES: Final = 2  # the counts line and the column headings
FOOTER_LINES: Final = 1
_MEMO: Final = 8192

_RANK: Final = {"needs-input": 0, "working": 1, "failed": 2, "done": 3, "idle": 4}
_LABELS: Final = {"needs-input": "NEEDS INPUT", "working": "working", "failed": "failed",
                  "done": "done", "idle": "idle", "unknown": "unknown",
                  "unavailable": "no attention"}


@frozen
class Row:
    """One agent as the deck shows it."""

    terminal: str
    attention: str
    """Derived with the deck's seen watermark: ``done`` only while unseen."""
    harness: str
    account: str
    workspace: str
    checkout: str
    location: str
    since: datetime
    revision: int
    tmux_pane: str | None

    @property
    def rank(self) -> int:
        return _RANK.get(self.attention, len(_RANK))


def build_rows(entries: Iterable[TerminalEntry], seen: Mapping[str, int], *,
               checkouts: Mapping[str, str] | None = None,
               memo: dict[tuple[str, int, int], str] | None = None) -> list[Row]:
    """One row per agent, in attention order (see the module).

    ``memo`` keeps derived attention by (terminal, revision, watermark) between
    calls: a revision never changes, and re-deriving every row on every event
    is most of the deck's work with many agents (``benchmarks/deck.py``)."""
    rows = []
    cache = {} if memo is None else memo
    if len(cache) > _MEMO:
        cache.clear()
    for entry in entries:
        revision = entry.revision.get("revision")
        key = (entry.terminal, revision if isinstance(revision, int) else 0,
               seen.get(entry.terminal, 0))
        attention = cache.get(key)
        if attention is None:
            attention = cache[key] = Clanker.attention_seen(entry, key[2])
        rows.append(Row(
            terminal=entry.terminal, attention=attention, harness=entry.harness,
            account=entry.account or "default",
            workspace=os.path.basename((entry.workspace or entry.cwd).rstrip("/")) or "/",
            checkout=(checkouts or {}).get(entry.location, "-"),
            location=entry.location, since=entry.since,
            revision=revision if isinstance(revision, int) else 0,
            tmux_pane=entry.tmux_pane))
    return sorted(rows, key=lambda r: (r.rank, r.since, r.terminal))


def duration(since: datetime, now: datetime) -> str:
    """How long, compactly: ``12s``, ``5m``, ``3h``, ``4d`` (never negative)."""
    seconds = max(0, int((now - since).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


@frozen
class Screen:
    """What to draw: ``lines`` (each at most the width), and which line is the
    selected row (``None``: no rows, or the message replaces them)."""

    lines: tuple[str, ...]
    selected_line: int | None
    rows: tuple[Row, ...]


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[:max(0, width - 1)] + "…"


_COLUMNS: Final = (("STATE", 12), ("HARNESS", 9), ("ACCOUNT", 9), ("WORKSPACE", 14),
                   ("CHECKOUT", 14), ("FOR", 5))


def _line(cells: Iterable[str], location: str, width: int) -> str:
    parts = [_fit(cell, size).ljust(size) for cell, (_, size) in zip(cells, _COLUMNS,
                                                                      strict=True)]
    head = " ".join(parts) + " "
    return _fit(head + location, width)


def render(rows: Iterable[Row], now: datetime, size: tuple[int, int], *,
           selected: int = 0, status: str = "") -> Screen:
    """Lay ``rows`` out for a terminal of ``size`` (columns, lines).

    The first line counts agents needing input and unseen completions, the last
    is ``status`` (or the key help). Rows past the height scroll so that the
    selected one stays visible.
    """
    columns, height = size
    shown = tuple(rows)
    if columns < MIN_COLUMNS or height < MIN_LINES:
        message = (f"terminal too small: the deck needs {MIN_COLUMNS}x{MIN_LINES}, "
                   f"this one is {columns}x{height}")
        return Screen(lines=(_fit(message, max(columns, 1)),), selected_line=None, rows=shown)
    needs = sum(r.attention == "needs-input" for r in shown)
    done = sum(r.attention == "done" for r in shown)
    header = (f"clanker deck  {len(shown)} agent{'s' if len(shown) != 1 else ''}  "
              f"needs input: {needs}  done: {done}")
    lines = [_fit(header, columns),
             _line((name for name, _ in _COLUMNS), "LOCATION", columns)]
    room = height - HEADER_LINES - FOOTER_LINES
    selected = min(max(selected, 0), len(shown) - 1) if shown else 0
    first = max(0, selected - room + 1)
    for row in shown[first:first + room]:
        lines.append(_line((_LABELS.get(row.attention, row.attention), row.harness,
                            row.account, row.workspace, row.checkout,
                            duration(row.since, now)), _home(row.location), columns))
    if not shown:
        lines.append("no agents are running (n: launch one)")
    lines += [""] * (height - FOOTER_LINES - len(lines))
    lines.append(_fit(status or "enter jump  n new  r resume  u usage  x stop  ? help  q quit",
                      columns))
    return Screen(lines=tuple(lines),
                  selected_line=HEADER_LINES + selected - first if shown else None, rows=shown)


def _home(path: str) -> str:
    home = os.path.expanduser("~")
    if home not in ("", "/") and (path == home or path.startswith(home.rstrip("/") + "/")):
        return "~" + path[len(home):]
    return path
