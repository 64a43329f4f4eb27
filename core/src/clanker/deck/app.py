"""The deck as a full-screen prompt_toolkit application.

It draws :func:`clanker.deck.rows.render` of the :class:`~clanker.deck.feed.Feed`
on every accepted change, and turns keys into library calls. It owns nothing
the grid does not have except the seen watermark (:class:`~clanker.deck.seen.SeenMarks`);
quitting stops nothing. Launches from the deck always go to tmux (the deck
holds this terminal).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from prompt_toolkit.application import Application, run_in_terminal
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.layout import Layout, Window
from prompt_toolkit.layout.controls import FormattedTextControl

from clanker._logging import get_logger
from clanker.deck.feed import Feed
from clanker.deck.panels import HELP, Choice, Picker, usage_lines
from clanker.deck.rows import Row, build_rows, render
from clanker.deck.seen import SeenMarks

if TYPE_CHECKING:
    from prompt_toolkit.input import Input
    from prompt_toolkit.output import Output

    from clanker.api import Clanker
    from clanker.launch.request import LaunchRequest
    from clanker.launch.service import LaunchOptions
    from clanker.registry import HarnessProvider
    from clanker.tmux.control import Tmux

    _Plan = tuple[HarnessProvider | str, LaunchRequest, LaunchOptions | None]

__all__ = ["Deck"]

_log = get_logger(__name__)

_NOTIFY = frozenset({"needs-input", "done"})
# How often the deck looks (one stat) for marks another deck made while no
# revision arrived to redraw it.
_SEEN_POLL = 1.0
# How old a location's branch may be before a redraw looks it up again: a
# `git worktree list` per location now and then, not per revision.
_CHECKOUT_AGE = timedelta(seconds=10)


def _attach(command: list[str]) -> None:
    subprocess.run(command, check=False)


class Deck:
    """One deck over ``clanker``'s grid.

    ``notify(text)`` hears of each agent that starts needing input or finishes
    while the deck is open (the CLI rings the bell and shows a desktop
    notification); ``attach(argv)`` runs tmux's attach in this terminal when the
    deck runs outside tmux.
    """

    def __init__(
        self, clanker: Clanker, *, seen: SeenMarks, tmux: Tmux, workspace: str,
        notify: Callable[[str], None] | None = None,
        attach: Callable[[list[str]], None] = _attach,
        input: Input | None = None, output: Output | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.clanker = clanker
        self.seen = seen
        self.tmux = tmux
        self.workspace = workspace
        self._notify = notify
        self._attach = attach
        self._clock = clock
        self.selected: str | None = None
        self.status = ""
        self.panel: list[str] | None = None
        self.picker: Picker | None = None
        self._on_pick: Callable[[Choice], None] | None = None
        self._confirm: Callable[[], None] | None = None
        self._shown: dict[str, str] = {}
        self._checkouts: dict[str, str] = {}
        self._checked: dict[str, datetime] = {}
        self._looking: set[str] = set()
        self.rows: list[Row] = []
        self._memo: dict[tuple[str, int, int], str] = {}
        self.revisions_drawn = 0
        self.feed = Feed(clanker, self._changed)
        self.app: Application[None] = Application(
            layout=Layout(Window(FormattedTextControl(self._fragments), wrap_lines=False)),
            key_bindings=self._keys(), full_screen=True, input=input, output=output)

    # ---------------------------------------------------------------- running

    async def run(self) -> None:
        """Draw until the person quits; the feed follows the grid meanwhile."""
        loop = asyncio.get_running_loop()
        previous = loop.get_exception_handler()
        # prompt_toolkit's own handler prints over the screen and waits for Enter in a
        # fresh prompt on sys.stdout; when that stream is gone the wait itself fails
        # and the handler calls itself without end. A failure shows on the status line.
        loop.set_exception_handler(self._failed)
        try:
            # Started once the application runs: a change it reports earlier would be lost.
            await self.app.run_async(pre_run=self._begin, set_exception_handler=False)
        finally:
            loop.set_exception_handler(previous)
            self.feed.close()

    def _failed(self, loop: asyncio.AbstractEventLoop, context: dict[str, object]) -> None:
        error = context.get("exception")
        if isinstance(error, BaseException):
            what = f"{type(error).__name__}: {error}"
        else:
            what, error = str(context.get("message", "unknown failure")), None
        _log.error("deck: %s", what, exc_info=error)
        self.status = "internal error: " + what.partition("\n")[0]
        self.app.invalidate()

    def _begin(self) -> None:
        self.feed.start()
        self.app.create_background_task(self._follow_seen())

    async def _follow_seen(self) -> None:
        """Redraw when another deck's marks change what this one shows."""
        while True:
            await asyncio.sleep(_SEEN_POLL)
            if self.seen.refresh():
                self._refresh()

    def _changed(self, kind: str) -> None:
        loop = self.app.loop
        if loop is not None and self.app.is_running:
            loop.call_soon_threadsafe(self._refresh, kind)

    def _refresh(self, kind: str = "") -> None:
        self.seen.refresh()  # one stat: another deck's marks count in this picture too
        self.rows = build_rows(self.feed.entries(), self.seen.marks, checkouts=self._checkouts,
                               memo=self._memo)
        self._announce(kind)
        if self.selected not in {r.terminal for r in self.rows}:
            self.selected = self.rows[0].terminal if self.rows else None
        self.revisions_drawn += 1
        self._look_up_checkouts()
        self.app.invalidate()

    def _announce(self, kind: str) -> None:
        if not kind:  # a redraw of the deck's own (seen marks, checkouts): the grid's
            return    # change it may already show is announced on its own redraw
        now = {r.terminal: r.attention for r in self.rows}
        if kind == "revision" and self._notify is not None:
            for row in self.rows:
                if row.attention in _NOTIFY and self._shown.get(row.terminal) != row.attention:
                    what = "needs input" if row.attention == "needs-input" else "is done"
                    self._notify(f"{row.harness} {what} in {row.location}")
        self._shown = now

    def _look_up_checkouts(self) -> None:
        """Which branch each location is on (the library's worktree listing): looked
        up when the location first shows and again once that answer is older than
        ``_CHECKOUT_AGE``, so a branch switched since shows on a later redraw."""
        now = self._clock()
        for location in {r.location for r in self.rows} - self._looking:
            checked = self._checked.get(location)
            if checked is not None and now - checked < _CHECKOUT_AGE:
                continue
            self._checkouts.setdefault(location, "-")
            self._checked[location] = now
            self._looking.add(location)
            self.app.create_background_task(self._checkout(location))

    async def _checkout(self, location: str) -> None:
        try:
            name = await self._branch(location)
        finally:
            self._looking.discard(location)
        if self._checkouts.get(location) != name:
            self._checkouts[location] = name
            self._refresh()

    async def _branch(self, location: str) -> str:
        try:
            listing = await self.clanker.worktrees(location, inspect=False)
        except Exception:  # not a repository, or git failed: no checkout to show
            return "-"
        inside = [w for w in listing.worktrees
                  if (location + os.sep).startswith(w.path.rstrip(os.sep) + os.sep)]
        if not inside:
            return "-"
        home = max(inside, key=lambda w: len(w.path))
        name = home.branch or (home.head or "")[:12] or "-"
        return name if home.main else f"{name} (worktree)"

    # ---------------------------------------------------------------- drawing

    def _size(self) -> tuple[int, int]:
        size = self.app.output.get_size()
        return size.columns, size.rows

    def screen_lines(self) -> list[str]:
        """What the deck shows now (the tests read it)."""
        columns, height = self._size()
        if self.picker is not None:
            return self.picker.lines(height - 1)
        if self.panel is not None:
            return self.panel[:height]
        selected = next((i for i, r in enumerate(self.rows) if r.terminal == self.selected), 0)
        status = self.status or ("" if self.feed.problem is None else self.feed.problem)
        return list(render(self.rows, self._clock(), (columns, height), selected=selected,
                           status=status).lines)

    def _fragments(self) -> StyleAndTextTuples:
        columns, height = self._size()
        lines = self.screen_lines()
        selected = None
        if self.picker is None and self.panel is None and self.rows:
            index = next((i for i, r in enumerate(self.rows) if r.terminal == self.selected), 0)
            selected = render(self.rows, self._clock(), (columns, height),
                              selected=index).selected_line
        fragments: StyleAndTextTuples = []
        for number, line in enumerate(lines):
            style = "reverse" if number == selected else ("bold" if number == 0 else "")
            fragments.append((style, line + "\n"))
        return fragments

    # ------------------------------------------------------------------ keys

    def _row(self) -> Row | None:
        return next((r for r in self.rows if r.terminal == self.selected), None)

    def _move(self, step: int) -> None:
        if not self.rows:
            return
        index = next((i for i, r in enumerate(self.rows) if r.terminal == self.selected), 0)
        self.selected = self.rows[(index + step) % len(self.rows)].terminal

    def _keys(self) -> KeyBindings:
        keys = KeyBindings()

        @keys.add("c-c")
        def _interrupt(event: KeyPressEvent) -> None:
            event.app.exit()

        @keys.add("q")
        def _quit(event: KeyPressEvent) -> None:
            if self.picker is not None:
                self.picker = self.picker.typed("q")  # a filter may hold a q
            elif self.panel is None:
                event.app.exit()
            else:
                self._close()

        @keys.add("escape", eager=True)
        def _escape(event: KeyPressEvent) -> None:
            self._close()

        @keys.add("up")
        def _up(event: KeyPressEvent) -> None:
            if self.picker is not None:
                self.picker = self.picker.moved(-1)
            else:
                self._move(-1)

        @keys.add("down")
        def _down(event: KeyPressEvent) -> None:
            if self.picker is not None:
                self.picker = self.picker.moved(1)
            else:
                self._move(1)

        @keys.add("enter")
        def _enter(event: KeyPressEvent) -> None:
            if self.picker is not None:
                self._pick()
            elif self.panel is None:
                event.app.create_background_task(self.jump())

        @keys.add("backspace")
        def _erase(event: KeyPressEvent) -> None:
            if self.picker is not None:
                self.picker = self.picker.erased()

        @keys.add("<any>")
        def _typed(event: KeyPressEvent) -> None:
            text = event.data
            if self.picker is not None:
                if text.isprintable():
                    self.picker = self.picker.typed(text)
                return
            if self._confirm is not None:
                confirm, self._confirm, self.panel = self._confirm, None, None
                if text == "y":
                    confirm()
                return
            if self.panel is not None:
                return
            action = {"?": self._help, "u": self._usage, "x": self._ask_stop, "s": self.mark_seen,
                      "n": self._new, "r": self._resume}.get(text)
            if action is not None:
                action()

        return keys

    def _close(self) -> None:
        self.picker = self._on_pick = self._confirm = self.panel = None

    def _pick(self) -> None:
        picker, then = self.picker, self._on_pick
        self.picker = self._on_pick = None
        if picker is not None and then is not None and picker.chosen is not None:
            then(picker.chosen)

    def _open(self, title: str, choices: list[Choice], then: Callable[[Choice], None]) -> None:
        self.picker, self._on_pick = Picker(title=title, choices=tuple(choices)), then

    # --------------------------------------------------------------- actions

    def mark_seen(self) -> None:
        row = self._row()
        if row is not None and self.seen.mark(row.terminal, row.revision,
                                              live=[r.terminal for r in self.rows]):
            self._refresh()

    async def jump(self) -> None:
        """Bring the selected agent's tmux pane forward (and mark it seen)."""
        row = self._row()
        if row is None:
            return
        why = self.tmux.unavailable()
        if why is not None:
            self.status = f"jump is disabled: {why}"
            return
        if row.tmux_pane is None:
            self.status = "this agent does not run in tmux (launch it with --tmux to jump)"
            return
        from clanker.tmux.control import TmuxError

        try:
            attach = await asyncio.to_thread(self.tmux.jump, row.tmux_pane)
        except TmuxError as exc:
            self.status = exc.message
            self.app.invalidate()
            return
        self.mark_seen()
        if attach is not None:
            await run_in_terminal(lambda: self._attach(attach))

    def _help(self) -> None:
        self.panel = ["clanker deck keys (esc to close)", "", *HELP]

    def _usage(self) -> None:
        self.panel = ["usage: asking each harness..."]

        async def read() -> None:
            entries = await self.clanker.usage()
            if self.panel is not None:
                self.panel = usage_lines(entries, self._clock())
                self.app.invalidate()

        self.app.create_background_task(read())

    def _ask_stop(self) -> None:
        row = self._row()
        if row is None:
            return
        self.panel = [f"stop {row.harness} in {row.location}? (y: stop, any other key: keep)"]

        def stop() -> None:
            stopped = self.clanker.stop_agent(row.terminal)
            self.status = f"asked {row.harness} to stop" if stopped else "it had already ended"

        self._confirm = stop

    def _tmux_launch(self) -> str | None:
        why = self.tmux.unavailable()
        return None if why is None else f"launching from the deck needs tmux ({why})"

    def _new(self) -> None:
        if (why := self._tmux_launch()) is not None:
            self.status = why
            return
        harnesses = [Choice(p.id, p.id) for p in self.clanker.harnesses() if p.launch is not None]
        self._open("launch which harness?", harnesses, self._pick_model)

    def _pick_model(self, harness: Choice) -> None:
        async def list_models() -> None:
            choices = [Choice("(the harness's default model)", "")]
            try:
                catalog = await self.clanker.models(harness.value)
                choices += [Choice(m.id + (f"  {m.label}" if m.label else ""), m.id)
                            for m in catalog.models]
            except Exception as exc:  # no models capability: the default model only
                self.status = getattr(exc, "message", str(exc))
            self._open(f"{harness.value}: which model?", choices,
                       lambda model: self._pick_worktree(harness.value, model.value or None))
            self.app.invalidate()

        self.app.create_background_task(list_models())

    def _pick_worktree(self, harness: str, model: str | None) -> None:
        stamp = self._clock().strftime("%Y%m%d-%H%M%S")
        choices = [Choice(f"here ({self.workspace})", ""),
                   Choice(f"a new worktree on branch {harness}-{stamp}", f"{harness}-{stamp}")]
        self._open("where?", choices, lambda where: self._start(harness, model, where.value))

    def _in_tmux(self, plan: Callable[[], Awaitable[_Plan]]) -> None:
        """Launch what ``plan()`` answers (harness, request, options) in a new tmux
        window, saying on the status line how it went."""
        from clanker.tmux.handoff import TmuxTerminal

        async def start() -> None:
            try:
                harness, request, options = await plan()
                window = await asyncio.to_thread(
                    self.clanker.launch, harness, request, options,
                    terminal=TmuxTerminal(socket_name=self.tmux.socket_name))
                self.status = f"started in tmux (pane {window.pane})"
            except Exception as exc:  # shown on the status line; the deck goes on
                self.status = f"could not launch: {getattr(exc, 'message', None) or exc}"
            self.app.invalidate()

        self.app.create_background_task(start())

    def _start(self, harness: str, model: str | None, branch: str) -> None:
        from clanker.launch.request import LaunchRequest

        async def plan() -> _Plan:
            cwd = self.workspace
            if branch:
                cwd = (await self.clanker.create_worktree(self.workspace, branch)).path
            return harness, LaunchRequest(model=model, cwd=cwd), None

        self._in_tmux(plan)

    def _resume(self) -> None:
        if (why := self._tmux_launch()) is not None:
            self.status = why
            return

        async def list_sessions() -> None:
            listing = await self.clanker.sessions(workspace=self.workspace)
            choices = [Choice(f"{s.key}  {s.title or ''}"[:200], s.key) for s in listing.sessions]
            self._open("resume which conversation?", choices, self._start_resume)
            self.app.invalidate()

        self.app.create_background_task(list_sessions())

    def _start_resume(self, session: Choice) -> None:
        async def plan() -> _Plan:
            provider, request, options, _ = await self.clanker.resumption(
                session.value, workspace=self.workspace)
            return provider, request, options

        self._in_tmux(plan)
