"""The deck's panels as plain data: a title, lines or choices, and a filter.

Kept apart from prompt_toolkit so what a panel shows is tested without a
terminal; :mod:`clanker.deck.app` draws the current one over the rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Final

from attrs import evolve, frozen

if TYPE_CHECKING:
    from clanker.usage.service import UsageEntry

__all__ = ["HELP", "Choice", "Picker", "usage_lines"]

HELP: Final = (
    "enter   jump to the agent's tmux pane (and mark it seen)",
    "s       mark the selected agent seen (a seen completion no longer reads done)",
    "n       launch a new agent in tmux: harness, model, optional new worktree",
    "r       resume a past conversation of this workspace in tmux (type to filter)",
    "u       usage: remaining quota of each harness and when it resets",
    "x       stop the selected agent (asks first)",
    "up/down select   ?  this help   esc  close a panel   q  quit (stops nothing)",
)

_BAR: Final = 20


@frozen
class Choice:
    """One line of a picker and what choosing it means."""

    label: str
    value: str


@frozen
class Picker:
    """A filterable list: typing narrows ``choices`` to those containing the filter."""

    title: str
    choices: tuple[Choice, ...]
    filter: str = ""
    selected: int = 0

    @property
    def shown(self) -> tuple[Choice, ...]:
        needle = self.filter.casefold()
        return tuple(c for c in self.choices if needle in c.label.casefold())

    def typed(self, text: str) -> Picker:
        return evolve(self, filter=self.filter + text, selected=0)

    def erased(self) -> Picker:
        return evolve(self, filter=self.filter[:-1], selected=0)

    def moved(self, step: int) -> Picker:
        count = len(self.shown)
        return evolve(self, selected=(self.selected + step) % count if count else 0)

    @property
    def chosen(self) -> Choice | None:
        shown = self.shown
        return shown[self.selected] if shown else None

    def lines(self, height: int) -> list[str]:
        shown = self.shown
        head = [self.title, f"filter: {self.filter}" if self.filter else "(type to filter)"]
        room = max(1, height - len(head))
        first = max(0, self.selected - room + 1)
        return head + [("> " if first + i == self.selected else "  ") + c.label
                       for i, c in enumerate(shown[first:first + room])] \
            + ([] if shown else ["  (nothing matches)"])


def _meter(percent: float | None) -> str:
    if percent is None:
        return "[" + "?" * _BAR + "]"
    filled = round(_BAR * min(max(percent, 0.0), 100.0) / 100.0)
    return "[" + "#" * filled + "-" * (_BAR - filled) + f"] {percent:3.0f}% left"


def usage_lines(entries: Sequence[UsageEntry], now: datetime) -> list[str]:
    """The usage panel: a meter of remaining quota per measurement, with its reset."""
    from clanker.usage.text import reset_text

    lines = ["usage (esc to close)"]
    for entry in entries:
        who = entry.harness + (f" ({entry.account})" if entry.account else "")
        if entry.snapshot is None:
            reason = entry.failure.message if entry.failure is not None else entry.status.value
            lines.append(f"{who}: {reason}")
            continue
        lines.append(who)
        for measurement in entry.snapshot.measurements:
            reset = reset_text(measurement.resets_at, now)
            reset = f"  {reset}" if reset else ""
            lines.append(f"  {measurement.label[:24]:<24} "
                         f"{_meter(measurement.remaining_percent)}{reset}")
    if not entries:
        lines.append("no harness reports usage")
    return lines
