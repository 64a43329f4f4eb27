"""``clanker status``, ``clanker watch`` and ``clanker attention explain``.

All three read the grid; none starts it. The attention shown is derived with
nothing marked seen: a completion reads ``done`` until new work starts. An
agent some of whose hook transactions failed closed (so some of its events
may be missing, and its state may lag) is flagged with how many. Agents
launched with the bridge (``clanker launch --bridge``) show which capabilities
they may ask for; ``watch --notify`` also shows what they send the person
(``clanker_notify``).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import click

from clanker.cli.common import (
    Failure,
    echo_json,
    echo_table,
    json_option,
    library,
    relative_time,
)
from clanker.cli.grid import GridFailure, grid_errors
from clanker.errors import EXIT_USAGE

if TYPE_CHECKING:
    from clanker.api import Clanker
    from clanker.grid.protocol import Notification, StreamEvent, TerminalEntry

__all__ = ["attention", "entry_record", "notification_record", "status", "watch"]

LABELS: Final = {
    "needs-input": "needs input",
    "working": "working",
    "failed": "failed",
    "done": "done",
    "idle": "idle",
    "unknown": "unknown",
    "unavailable": "attention unavailable",
}
_COLORS: Final = {"needs-input": "yellow", "done": "green", "failed": "red", "working": "cyan"}
NOTIFY_STATES: Final = frozenset({"needs-input", "done"})
_NOTIFIER_TIMEOUT: Final = 5.0


def _running(clanker: Clanker) -> bool:
    with grid_errors():
        return clanker.grid_status().running


def _require_grid() -> Clanker:
    clanker = library()
    if not _running(clanker):
        raise GridFailure("the grid is not running (start it with `clanker grid start`)")
    return clanker


def entry_record(entry: TerminalEntry) -> dict[str, Any]:
    """The JSON shape of one terminal (``status --json``, ``watch --json``)."""
    return {
        "terminal": entry.terminal,
        "harness": entry.harness,
        "workspace": entry.workspace,
        "cwd": entry.cwd,
        "location": entry.location,
        "launcher_pid": entry.launcher_pid,
        "registered_at": entry.registered_at.isoformat(),
        "attention": entry.attention,
        "since": entry.since.isoformat(),
        "revision": entry.revision.get("revision"),
        "snapshot": entry.revision.get("snapshot"),
        "failed_closed": entry.failed_closed,
        "unavailable": entry.unavailable,
        "bridge": list(entry.bridge),
        "account": entry.account,
        "tmux_pane": entry.tmux_pane,
        "pending_move": _pending_move_record(entry),
    }


def _pending_move_record(entry: TerminalEntry) -> dict[str, Any] | None:
    move = entry.pending_move
    if move is None:
        return None
    return {"state": move.state, "kind": move.kind, "branch": move.branch, "path": move.path,
            "target": move.target, "requested_at": move.requested_at.isoformat()}


def _pending_move_line(entry: TerminalEntry, now: datetime) -> str | None:
    """One line under the table for a terminal whose conversation is about to move."""
    move = entry.pending_move
    if move is None:
        return None
    when = ("once its turn ends" if move.state == "scheduled"
            else "now (the agent is being resumed there)")
    then = f" (branch {move.branch})" if move.kind == "create" else \
        f", then {_place(move.path)} is completed"
    return (f"~ {entry.terminal}: moves to {_place(move.target)}{then} {when}; "
            f"asked {relative_time(move.requested_at, now)}")


def notification_record(notification: Notification) -> dict[str, Any]:
    """The JSON shape of a message an agent sent (``watch --json --notify``)."""
    return {
        "terminal": notification.terminal,
        "harness": notification.harness,
        "location": notification.location,
        "message": notification.message,
        "at": notification.at.isoformat(),
    }


def _place(path: str) -> str:
    home = str(Path.home())
    if home != "/" and (path == home or path.startswith(home.rstrip("/") + "/")):
        return "~" + path[len(home):]
    return path


def _state(attention: str, *, color: bool = True) -> str:
    label = LABELS.get(attention, attention)
    if color and attention in _COLORS:
        return click.style(label, fg=_COLORS[attention], bold=attention == "needs-input")
    return label


def _failed_closed(count: int) -> str:
    return f"{count} hook transaction{'s' if count != 1 else ''} failed closed"


def _bridge(entry: TerminalEntry) -> str:
    count = len(entry.bridge)
    return f"{count} capabilit{'ies' if count != 1 else 'y'}" if count else "-"


def _table(entries: list[TerminalEntry], now: datetime) -> None:
    # Styled cells would throw the column widths off; the state column goes last but one.
    rows = [[e.terminal, e.harness, LABELS.get(e.attention, e.attention)
             + ("*" if e.failed_closed else ""),
             relative_time(e.since, now), _place(e.location)] for e in entries]
    headers = ["TERMINAL", "HARNESS", "STATE", "SINCE", "LOCATION"]
    if any(e.bridge for e in entries):  # only then: the table stays as it was without
        headers.insert(4, "BRIDGE")
        for row, entry in zip(rows, entries, strict=True):
            row.insert(4, _bridge(entry))
    if any(e.account for e in entries):  # only once an agent runs under a managed account
        headers.insert(2, "ACCOUNT")
        for row, entry in zip(rows, entries, strict=True):
            row.insert(2, entry.account or "default")
    echo_table(headers, rows)
    for e in entries:
        line = _pending_move_line(e, now)
        if line is not None:
            click.echo(line)
    for e in entries:
        if e.failed_closed:
            click.echo(f"* {e.terminal}: {_failed_closed(e.failed_closed)}; events may be "
                       f"missing (clanker attention explain {e.terminal})")


@click.command()
@click.option("--host", "host", metavar="NAME", default=None,
              help="Only the agents launched on the SSH host NAME (`launch --host`).")
@json_option
def status(host: str | None, as_json: bool) -> None:
    """List running agents: harness, location, attention state and since when.

    When no grid is running nothing is, and this says so (exit 0). With
    `--host NAME`, only the agents launched on that host (their locations are
    the host's directories); the grid runs on this machine either way.
    """
    clanker = library()
    running = _running(clanker)
    entries: list[TerminalEntry] = []
    if running or host is not None:
        # Only then: the hosts module brings the SSH transport (and asyncio) with it,
        # which a prompt's `clanker status` with no grid running never needs.
        from clanker.cli.hosts import host_errors

        with grid_errors(), host_errors():
            # Empty if it stopped in between; an unknown host name fails even then.
            entries = clanker.agents(host=host)
    if as_json:
        echo_json([entry_record(e) for e in entries])
        return
    if not running:
        click.echo("Nothing is running (the grid is not running).")
        return
    if not entries:
        click.echo("No agents are running." if host is None
                   else f"No agents launched on {host} are running.")
        return
    _table(entries, datetime.now(UTC))


# ------------------------------------------------------------------- watch


class Notifier:
    """Rings the terminal bell and shows a desktop notification, if one is available."""

    def __init__(self, *, bell_stream: Any) -> None:
        self._bell = bell_stream
        self._command = self._find()
        self._children: list[subprocess.Popen[bytes]] = []

    @staticmethod
    def _find() -> list[str] | None:
        import shutil  # `watch` only: `status` in a prompt need not load it (bz2, lzma)

        send = shutil.which("notify-send")
        if send:
            return [send, "--app-name=clanker", "clanker"]
        script = shutil.which("osascript")
        if script and sys.platform == "darwin":
            return [script, "-e", "on run argv", "-e",
                    'display notification (item 1 of argv) with title "clanker"',
                    "-e", "end run"]
        return None

    def notify(self, text: str) -> None:
        self._bell.write("\a")
        self._bell.flush()
        self._children = [c for c in self._children if c.poll() is None]
        if self._command is None or len(self._children) >= 4:
            return
        with contextlib.suppress(OSError):
            self._children.append(subprocess.Popen(
                [*self._command, text], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            ))

    def close(self) -> None:
        for child in self._children:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=_NOTIFIER_TIMEOUT)


def _headline(entry: TerminalEntry) -> str:
    what = "needs input" if entry.attention == "needs-input" else "is done"
    return f"{entry.harness} {what} in {_place(entry.location)}"


def _events(clanker: Clanker, *, notifications: bool = False) -> Iterator[StreamEvent]:
    from clanker.grid.errors import GridError

    with grid_errors():
        events = clanker.watch_agents(notifications=notifications)
    try:
        yield from events
    except GridError as exc:
        raise GridFailure(str(exc)) from exc
    finally:
        events.close()


def _said(notification: Notification) -> str:
    return f"{notification.harness} in {_place(notification.location)}: {notification.message}"


_SHOWN_NOTIFICATIONS: Final = 3


def _redraw(entries: dict[str, TerminalEntry], *, clear: bool,
            said: list[Notification] | None = None) -> None:
    now = datetime.now(UTC)
    if clear:
        click.echo("\x1b[H\x1b[2J", nl=False)
    live = sorted(entries.values(), key=lambda e: e.registered_at)
    stamp = now.astimezone().strftime("%H:%M:%S")
    click.echo(f"clanker watch  {stamp}  {len(live)} agent{'s' if len(live) != 1 else ''}"
               "  (Ctrl+C to quit)")
    if live:
        _table(live, now)
    for notification in said or ():
        click.echo(f"! {relative_time(notification.at, now)}  {_said(notification)}")
    if not clear:
        click.echo()


class _Watch:
    """What ``watch`` shows of each stream event."""

    def __init__(self, *, as_json: bool, notify: bool) -> None:
        self.as_json = as_json
        self.notifier = Notifier(bell_stream=sys.stderr if as_json else sys.stdout) \
            if notify else None
        self.entries: dict[str, TerminalEntry] = {}
        self.said: list[Notification] = []
        self.clear = not as_json and sys.stdout.isatty()
        self.synced = False

    def show(self, event: StreamEvent) -> None:
        from clanker.grid.protocol import StreamKind

        if event.kind is StreamKind.SYNCED:
            self.synced = True
            if not self.as_json:
                _redraw(self.entries, clear=self.clear)
        elif event.kind is StreamKind.NOTIFICATION and event.notification is not None:
            self._notification(event.notification)
        elif event.entry is not None:
            self._entry(event, event.entry)

    def _notification(self, note: Notification) -> None:
        if self.as_json:
            click.echo(json.dumps({"kind": "notification", **notification_record(note)},
                                  ensure_ascii=False))
        else:
            self.said = [*self.said, note][-_SHOWN_NOTIFICATIONS:]
            _redraw(self.entries, clear=self.clear, said=self.said)
        if self.notifier is not None:
            self.notifier.notify(_said(note))

    def _entry(self, event: StreamEvent, entry: TerminalEntry) -> None:
        from clanker.grid.protocol import StreamKind

        previous = self.entries.get(entry.terminal)
        tombstone = entry.revision.get("snapshot") is None
        if tombstone:
            self.entries.pop(entry.terminal, None)
        else:
            self.entries[entry.terminal] = entry
        if self.as_json:
            click.echo(json.dumps({"kind": event.kind.value, **entry_record(entry)},
                                  ensure_ascii=False))
        elif self.synced:
            _redraw(self.entries, clear=self.clear, said=self.said)
        if (
            self.notifier is not None
            and event.kind is StreamKind.REVISION
            and not tombstone
            and entry.attention in NOTIFY_STATES
            and (previous is None or previous.attention != entry.attention)
        ):
            self.notifier.notify(_headline(entry))

    def close(self) -> None:
        if self.notifier is not None:
            self.notifier.close()


@click.command()
@json_option
@click.option("--notify", is_flag=True,
              help="Ring the bell (and notify the desktop) on Needs Input and Done, and "
                   "show what agents send you (clanker_notify).")
def watch(as_json: bool, notify: bool) -> None:
    """Follow running agents live: the table is redrawn on every change.

    `--json` prints one JSON object per line (NDJSON) for every revision: the
    current one of each agent first (`"kind": "snapshot"`), then each change
    (`"kind": "revision"`; a retired agent has `"snapshot": null`). With
    `--notify`, a message an agent sends (`clanker_notify`) is shown too (a
    `"kind": "notification"` line under `--json`), with the bell.
    """
    clanker = _require_grid()
    view = _Watch(as_json=as_json, notify=notify)
    try:
        for event in _events(clanker, notifications=notify):
            view.show(event)
    except KeyboardInterrupt:
        raise click.exceptions.Exit(130) from None
    finally:
        view.close()
    raise GridFailure("the grid stopped")


# --------------------------------------------------------------- attention


@click.group()
def attention() -> None:
    """Look into what the attention broker knows about an agent."""


def _lookup(clanker: Clanker, terminal: str) -> Any:
    """Explain the live terminal with id ``terminal``, or the only one it is a prefix of."""
    matches = [e.terminal for e in clanker.agents() if e.terminal.startswith(terminal)]
    if terminal in matches:
        matches = [terminal]
    if len(matches) == 1:
        return clanker.explain_agent(matches[0])
    hint = "several agents match" if matches else "no running agent has that id"
    raise Failure(f"{hint}: {terminal!r} (see `clanker status`)", EXIT_USAGE)


def _describe(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, dict):
        return " ".join(f"{k}={_describe(v)}" for k, v in value.items()) or "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


@attention.command()
@click.argument("terminal")
@json_option
def explain(terminal: str, as_json: bool) -> None:
    """Say why TERMINAL is in its state (safe metadata only: no prompts, no payloads).

    TERMINAL is an id from `clanker status`, or a unique prefix of one.
    """
    clanker = _require_grid()
    with grid_errors():
        reply = _lookup(clanker, terminal)
    entry: TerminalEntry = reply.entry
    explanation: dict[str, Any] = reply.explanation
    if as_json:
        echo_json({**entry_record(entry), "explanation": explanation})
        return
    now = datetime.now(UTC)
    click.echo(f"{entry.terminal}  {entry.harness}  {_place(entry.location)}")
    click.echo(f"  state      {_state(entry.attention)} since {relative_time(entry.since, now)}")
    click.echo(f"  launched   {relative_time(entry.registered_at, now)} by pid "
               f"{entry.launcher_pid} in {_place(entry.cwd)}")
    if entry.unavailable:
        click.echo(f"  why        {entry.unavailable}")
    recent = explanation.get("recent")
    for key, value in explanation.items():
        if key in ("terminal", "recent"):
            continue
        click.echo(f"  {key:<15}{_describe(value)}")
    if isinstance(recent, list) and recent:
        click.echo("  recent decisions (oldest first):")
        for item in recent:
            if isinstance(item, dict):
                click.echo(f"    #{item.get('revision', '?')} {item.get('event', '?')} -> "
                           f"{item.get('decision', '?')}"
                           + (f" ({item['nativeEvent']})" if item.get("nativeEvent") else ""))

