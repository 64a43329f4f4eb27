"""The full-screen interface: the terminal's own scrollback for the transcript,
a live prompt_toolkit footer below it.

Finished blocks (an answer once the next block starts or the turn ends, a
tool call once it completed or failed) are rendered with ``rich``
(:mod:`clanker.acp.ui.blocks`) and printed above the footer, so they stay in
the terminal's native scrollback. The footer is what is still live: the
blocks not finished yet (a few lines), the status line, and either the
composer or a pane (an approval, or a yes/no offer) in its place.

Keys: Enter submits (during a turn the prompt is queued, and sent when the
turn ends); Alt+Enter (or Shift+Enter where the terminal reports it) and
Ctrl+J insert a newline; Esc arms the interrupt and a second Esc within five
seconds sends ``session/cancel`` (any other key disarms it); Ctrl+C
interrupts a running turn, else ends the run (exit 130); an interrupt drops
the queued prompts; Ctrl+D on an empty composer ends it (exit 0); Ctrl+O
expands the last block that went into the scrollback cut (in the footer,
PageUp / PageDown scroll it) and collapses it again; Ctrl+R shows diffs side
by side or unified; ``y`` / ``a`` / ``n`` in the approval pane.

The client knows nothing of this module: it reaches the screen only through
the event sink and the ``ask`` callable it was given.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from attrs import frozen
from prompt_toolkit.application import Application, run_in_terminal
from prompt_toolkit.buffer import Buffer
from prompt_toolkit.filters import Condition
from prompt_toolkit.formatted_text import ANSI, FormattedText
from prompt_toolkit.input import Input
from prompt_toolkit.input.ansi_escape_sequences import ANSI_SEQUENCES
from prompt_toolkit.key_binding import KeyBindings, KeyPress, KeyPressEvent
from prompt_toolkit.keys import Keys
from prompt_toolkit.layout import ConditionalContainer, HSplit, Layout, Window
from prompt_toolkit.layout.controls import BufferControl, FormattedTextControl
from prompt_toolkit.layout.dimension import Dimension
from prompt_toolkit.output import Output
from rich.console import RenderableType
from rich.text import Text

from clanker.acp.errors import CoderFailure
from clanker.acp.policy import Answer
from clanker.acp.state import Block, SessionState
from clanker.acp.ui import blocks

if TYPE_CHECKING:
    from clanker.acp.client import AcpClient
    from clanker.acp.policy import Decision, PermissionRequest

__all__ = ["ESCAPE_WINDOW", "Restart", "Screen", "ScreenUnavailable", "git_place"]

ESCAPE_WINDOW: Final = 5.0
"""Seconds within which a second Esc interrupts the turn."""
QUEUE_MAX: Final = 20
"""Prompts that can wait for the running turn to end."""
_FINISHED_TOOL: Final = frozenset({"completed", "failed"})
_QUEUE_SHOWN: Final = 3

# Shift+Enter as terminals that report it send it (the kitty/CSI-u form and
# xterm's modifyOtherKeys form): read as Alt+Enter, a newline.
for _sequence in ("\x1b[13;2u", "\x1b[27;2;13~"):
    ANSI_SEQUENCES.setdefault(_sequence, (Keys.Escape, Keys.ControlM))


_AGAIN: Final = {
    CoderFailure.USAGE_LIMIT: "send the same prompt again?",
    CoderFailure.UNAUTHENTICATED: "sign in (in another terminal), then: send the same prompt "
                                  "again?",
}
"""The failures after which the same prompt may be sent again, and the offer."""


class ScreenUnavailable(Exception):
    """The interface cannot start here (the caller falls back to line mode)."""


@frozen
class Restart:
    """The person chose to start the agent again and continue ``session``."""

    session: str


def git_place(cwd: str) -> tuple[str | None, str | None]:
    """The repository's name and the branch checked out at ``cwd``, read from
    ``.git`` (no process started); ``None`` for what cannot be read."""
    here = Path(cwd).resolve()
    for directory in (here, *here.parents):
        dot_git = directory / ".git"
        try:
            if dot_git.is_file():  # a worktree: "gitdir: <path>"
                pointer = dot_git.read_text(errors="replace")[:4096].strip()
                if not pointer.startswith("gitdir:"):
                    return directory.name, None
                git_dir = (directory / pointer[len("gitdir:"):].strip()).resolve()
                common = git_dir.parent.parent if git_dir.parent.name == "worktrees" else None
                name = common.parent.name if common is not None else directory.name
            elif dot_git.is_dir():
                git_dir, name = dot_git, directory.name
            else:
                continue
            head = (git_dir / "HEAD").read_text(errors="replace")[:4096].strip()
        except OSError:
            return directory.name, None
        if head.startswith("ref: refs/heads/"):
            return name, head[len("ref: refs/heads/"):]
        return name, f"detached {head[:8]}" if head else None
    return None, None


@frozen
class _Pane:
    """What replaces the composer: an approval or a yes/no offer (rendered again
    when the diff view changes)."""

    render: Callable[[], RenderableType]
    answers: frozenset[str]
    future: asyncio.Future[str]


class _Viewer:
    """A block expanded in the footer (Ctrl+O): its lines, from ``offset``."""

    def __init__(self, block: Block) -> None:
        self.block = block
        self.offset = 0
        self.lines: list[str] = []
        self.rendered_as: tuple[int, bool] | None = None


class Screen:
    """One terminal's interface for a coder run (it outlives agent restarts)."""

    def __init__(self, *, cwd: str, agent: str, input: Input | None = None,
                 output: Output | None = None, write: Callable[[str], None] | None = None,
                 color: bool = True, clock: Callable[[], float] = time.monotonic) -> None:
        if input is None and output is None and os.environ.get("TERM") == "dumb":
            raise ScreenUnavailable("TERM is dumb: no cursor control")
        self.cwd = cwd
        self.agent = agent
        self.repository, self.branch = git_place(cwd)
        self.state = SessionState()
        self.working = False
        self.note: str | None = None
        self._color = color
        self._clock = clock
        self._client: AcpClient | None = None
        self._open: list[str] = []
        self._shown: set[str] = set()
        self._current: str | None = None
        self._own: dict[str, Block] = {}
        self._notes = 0
        self._pending_events: list[dict[str, Any]] = []
        self._pane: _Pane | None = None
        self._one_pane = asyncio.Lock()
        self._submitted: asyncio.Future[str | None] | None = None
        self.prompts: list[str] = []
        """Prompts waiting for a turn: typed during one, or before the session was ready."""
        self.split_diffs = False
        """Whether edits are shown side by side (Ctrl+R) rather than as unified patches."""
        self.viewer: _Viewer | None = None
        self._last_cut: Block | None = None
        """The last block printed cut (as shown: redacted): what Ctrl+O expands."""
        self._ended: asyncio.Future[int] | None = None
        self._armed_at: float | None = None
        self._running_turn: asyncio.Task[str] | None = None
        self.composer = Buffer(multiline=True)
        self._write_raw = write
        self._queued: list[str] = []
        self.app: Application[None] = self._application(input, output)
        # Every key the terminal sends passes here first: any key but Esc disarms
        # the interrupt (the bindings alone cannot tell: Alt+Enter is Esc, Enter).
        processor = self.app.key_processor
        feed = processor.feed_multiple

        def seen(presses: list[KeyPress], first: bool = False) -> None:
            if any(p.key not in (Keys.Escape, Keys.CPRResponse) for p in presses):
                self._armed_at = None
            feed(presses, first)

        processor.feed_multiple = seen  # type: ignore[method-assign,assignment]

    # -- layout ----------------------------------------------------------

    def _application(self, input: Input | None, output: Output | None) -> Application[None]:
        pane_shown = Condition(lambda: self._pane is not None)
        viewing = Condition(lambda: self.viewer is not None)
        composer = Window(BufferControl(self.composer), height=Dimension(min=1, max=10),
                          wrap_lines=True, dont_extend_height=True,
                          get_line_prefix=lambda line, wrap: "> " if line == 0 and not wrap
                          else "  ")
        self._pane_window = Window(FormattedTextControl(self._pane_text, focusable=True),
                                   wrap_lines=False, dont_extend_height=True)
        layout = HSplit([
            ConditionalContainer(Window(FormattedTextControl(self._viewer_text),
                                        wrap_lines=False, dont_extend_height=True),
                                 filter=viewing),
            ConditionalContainer(Window(FormattedTextControl(self._live_text),
                                        wrap_lines=False, dont_extend_height=True),
                                 filter=Condition(lambda: bool(self._open))),
            ConditionalContainer(Window(FormattedTextControl(self._queue_text),
                                        wrap_lines=False, dont_extend_height=True),
                                 filter=Condition(lambda: bool(self.prompts))),
            Window(FormattedTextControl(self._status_text), height=1, style="reverse"),
            ConditionalContainer(composer, filter=~pane_shown),
            ConditionalContainer(self._pane_window, filter=pane_shown),
            Window(FormattedTextControl(self._hint_text), height=1, style="fg:ansibrightblack"),
        ])
        return Application(layout=Layout(layout, focused_element=composer),
                           key_bindings=self._bindings(pane_shown, viewing), full_screen=False,
                           input=input, output=output, erase_when_done=True,
                           min_redraw_interval=0.05, mouse_support=False)

    def _width(self) -> int:
        return max(self.app.output.get_size().columns, 20)

    def _live_text(self) -> ANSI:
        found = [b for b in (self._block(k) for k in self._open) if b is not None]
        pending = [self._view(b) if b.kind == "tool" else b for b in found]
        redact = self._client.redact if self._client is not None else None
        lines = blocks.live_lines(pending, self.cwd, width=self._width(),
                                  redact=redact if redact else blocks.unchanged)
        if not lines:
            return ANSI("")
        text = Text("\n").join(lines)
        return ANSI(blocks.to_ansi(text, self._width(), color=self._color).rstrip("\n"))

    def _status_text(self) -> FormattedText:
        line = blocks.status_line(self.state, blocks.Status(
            agent=self.agent, repository=self.repository, branch=self.branch,
            working=self.working, note=self.note))
        return FormattedText([("", " " + line[: self._width() - 2])])

    def _pane_text(self) -> ANSI:
        if self._pane is None:
            return ANSI("")
        return ANSI(blocks.to_ansi(self._pane.render(), self._width(),
                                   color=self._color).rstrip("\n"))

    def _viewer_height(self) -> int:
        return max(self.app.output.get_size().rows - 8, 3)

    def _viewer_lines(self, viewer: _Viewer) -> list[str]:
        width = self._width()
        if viewer.rendered_as != (width, self.split_diffs):
            shown = blocks.block_renderable(viewer.block, self.cwd, split=self.split_diffs,
                                            expanded=True)
            viewer.lines = blocks.to_ansi(shown, width, color=self._color).rstrip(
                "\n").split("\n")
            viewer.rendered_as = (width, self.split_diffs)
        return viewer.lines

    def _viewer_text(self) -> ANSI:
        viewer = self.viewer
        if viewer is None:
            return ANSI("")
        lines = self._viewer_lines(viewer)
        height = self._viewer_height()
        viewer.offset = max(0, min(viewer.offset, len(lines) - height))
        last = min(viewer.offset + height, len(lines))
        head = (f"\x1b[1m▾ expanded\x1b[0m \x1b[2mlines {viewer.offset + 1}-{last} of "
                f"{len(lines)} · PgUp/PgDn scroll · Ctrl+O collapses\x1b[0m")
        return ANSI("\n".join([head, *lines[viewer.offset:last]]))

    def _queue_text(self) -> FormattedText:
        rows = []
        for text in self.prompts[:_QUEUE_SHOWN]:
            first = text.strip().splitlines()[0] if text.strip() else ""
            more = " …" if len(first) > 60 or "\n" in text.strip() else ""
            rows.append(("fg:ansibrightblack", f" queued: {first[:60]}{more}\n"))
        if len(self.prompts) > _QUEUE_SHOWN:
            rows.append(("fg:ansibrightblack",
                         f" and {len(self.prompts) - _QUEUE_SHOWN} more queued\n"))
        return FormattedText(rows)

    def _hint_text(self) -> FormattedText:
        if self.armed:
            return FormattedText([("bold", " Esc again to interrupt")])
        if self._pane is not None:
            return FormattedText([("", " " + " · ".join(
                f"{key}" for key in sorted(self._pane.answers)) + " to answer")])
        if self.working:
            dropped = " (and drops the queue)" if self.prompts else ""
            return FormattedText([("", " Enter queues · Esc Esc or Ctrl+C interrupts the "
                                       f"turn{dropped}")])
        return FormattedText([("", " Enter sends · Alt+Enter newline · Ctrl+O expand · "
                                   "Ctrl+R diffs · Ctrl+D exits")])

    # -- keys ------------------------------------------------------------

    @property
    def armed(self) -> bool:
        """Whether one Esc was pressed, less than five seconds ago, and nothing since."""
        return self._armed_at is not None and self._clock() - self._armed_at < ESCAPE_WINDOW

    def _bindings(self, pane_shown: Condition, viewing: Condition) -> KeyBindings:
        keys = KeyBindings()
        composing = ~pane_shown

        @keys.add("enter", filter=composing)
        def _submit(event: KeyPressEvent) -> None:
            text = self.composer.text
            if not text.strip():
                return
            if self._submitted is not None and not self._submitted.done():
                self.note = None
                self.composer.reset()
                self._submitted.set_result(text)
                return
            # During a turn, or before the session is ready: sent when the turn ends.
            if len(self.prompts) >= QUEUE_MAX:
                self.note = f"{QUEUE_MAX} prompts are queued already"
                return
            self.note = None
            self.composer.reset()
            self.prompts.append(text)

        @keys.add("c-o", filter=composing)  # a pane is what needs looking at then
        def _expand(event: KeyPressEvent) -> None:
            if self.viewer is not None:
                self.viewer = None
            elif self._last_cut is not None:
                self.viewer = _Viewer(self._last_cut)
            else:
                self.note = "nothing was cut: nothing to expand"

        @keys.add("c-r")
        def _diff_view(event: KeyPressEvent) -> None:
            self.split_diffs = not self.split_diffs
            self.note = "diffs side by side" if self.split_diffs else "diffs unified"

        @keys.add("pageup", filter=viewing)
        def _page_up(event: KeyPressEvent) -> None:
            if self.viewer is not None:
                self.viewer.offset = max(0, self.viewer.offset - self._viewer_height())

        @keys.add("pagedown", filter=viewing)
        def _page_down(event: KeyPressEvent) -> None:
            if self.viewer is not None:
                height = self._viewer_height()
                end = max(0, len(self._viewer_lines(self.viewer)) - height)
                self.viewer.offset = min(self.viewer.offset + height, end)

        @keys.add("escape", "enter", filter=composing)
        @keys.add("c-j", filter=composing)
        def _newline(event: KeyPressEvent) -> None:
            self.composer.insert_text("\n")

        @keys.add("escape")
        def _escape(event: KeyPressEvent) -> None:
            if self.armed:
                self._armed_at = None
                self.interrupt()
                return
            self._armed_at = self._clock()

        @keys.add("c-c")
        def _control_c(event: KeyPressEvent) -> None:
            if self.working:
                self.interrupt()
            else:
                self._end(130)

        @keys.add("c-d")
        def _control_d(event: KeyPressEvent) -> None:
            if self._pane is None and not self.composer.text and not self.working:
                self._end(0)

        for key in ("y", "a", "n", "enter"):
            self._answer_key(keys, key, pane_shown)
        return keys

    def _answer_key(self, keys: KeyBindings, key: str, pane_shown: Condition) -> None:
        @keys.add(key, filter=pane_shown)
        def _answer(event: KeyPressEvent) -> None:
            pane = self._pane
            if pane is not None and key in pane.answers and not pane.future.done():
                pane.future.set_result(key)

    def interrupt(self) -> None:
        """Send ``session/cancel`` when a turn is running (its pending approvals are
        answered ``cancelled`` by the client); the queued prompts are dropped."""
        if self.working and self._client is not None:
            dropped = len(self.prompts)
            self.prompts.clear()
            self.note = "interrupting" + (f"; {dropped} queued dropped" if dropped else "")
            asyncio.get_running_loop().create_task(self._client.cancel())
            self.app.invalidate()

    def _end(self, code: int) -> None:
        if self._ended is not None and not self._ended.done():
            self._ended.set_result(code)

    # -- the scrollback --------------------------------------------------

    def _block(self, key: str) -> Block | None:
        return self._own.get(key) or self.state.blocks.get(key)

    def _view(self, block: Block) -> Block:
        """``block`` as it may be shown: every value clanker injected into the agent
        replaced (the state holds what the agent sent)."""
        redact = self._client.redact if self._client is not None else None
        if not redact:
            return block
        fields = redact.value(block.fields)
        assert isinstance(fields, dict)
        shown = Block(block.key, block.kind, fields=fields)
        shown.text = redact(block.text)
        return shown

    def _write(self, text: str) -> None:
        if self._write_raw is not None:
            self._write_raw(text)
        else:
            self.app.output.write_raw(text)  # the terminal is in cooked mode here
            self.app.output.flush()

    def print(self, renderable: RenderableType) -> None:
        """Put ``renderable`` into the scrollback, above the footer."""
        text = blocks.to_ansi(renderable, self._width(), color=self._color)
        if not (self.app.is_running and self._write_raw is None):
            self._write(text)
            return
        # Blocks finished together go up together: the footer is erased and drawn
        # again once for them, not once each.
        self._queued.append(text)
        if len(self._queued) == 1:
            run_in_terminal(self._drain)

    def _drain(self) -> None:
        queued, self._queued = self._queued, []
        self._write("".join(queued))

    def _finished(self, block: Block, final: bool) -> bool:
        if final or block.kind in ("unsupported", "approval", "note"):
            return True
        if block.kind == "tool":
            return block.fields.get("status") in _FINISHED_TOOL
        if block.kind == "plan":
            return False
        return block.key != self._current

    def _flush(self, *, final: bool = False) -> None:
        while self._open:
            block = self._block(self._open[0])
            if block is None:
                self._open.pop(0)
                continue
            if not self._finished(block, final):
                return
            self._open.pop(0)
            self._shown.add(block.key)
            view = self._view(block)
            self.print(blocks.block_renderable(view, self.cwd, split=self.split_diffs))
            if blocks.collapsed(view, self.cwd):
                self._last_cut = view

    def _note(self, kind: str, fields: dict[str, Any]) -> None:
        self._notes += 1
        key = f"screen-{kind}:{self._notes}"
        self._own[key] = Block(key, kind, fields=fields)
        self._open.append(key)

    def on_event(self, event: dict[str, Any]) -> None:
        """The client's event sink."""
        if self._client is None:
            self._pending_events.append(event)
            return
        kind = event.get("event")
        if kind == "update":
            key = event.get("block")
            if isinstance(key, str) and key not in self._shown:
                if key not in self._open:
                    self._open.append(key)
                self._current = key
        elif kind == "approval" and "verdict" in event:
            self._note("approval", event)
        elif kind in ("notice", "history"):
            self._flush(final=True)
            self.print(Text(str(event.get("text")), style="dim"))
        elif kind == "resumed":
            self._note("note", {"text": f"resumed with {event.get('method')}"})
        elif kind == "cancel":
            self._note("note", {"text": "interrupted (session/cancel sent)"})
        elif kind == "turn-started":
            self.working = True
        elif kind in ("turn-ended", "turn-failed"):
            self.working = False
            self._flush(final=True)
        self._flush()
        self.app.invalidate()

    def attach(self, client: AcpClient) -> None:
        """Show ``client``'s session (a new agent process after a restart)."""
        self._client = client
        self.state = client.state
        self._current = None
        # A new agent process is a new state: its keys start again (run:1...).
        self._shown = set()
        self._open = list(self.state.blocks)
        pending, self._pending_events = self._pending_events, []
        for event in pending:
            self.on_event(event)
        self._flush(final=True)

    # -- questions -------------------------------------------------------

    async def _show_pane(self, render: Callable[[], RenderableType], answers: set[str]) -> str:
        async with self._one_pane:
            future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
            self._pane = _Pane(render, frozenset(answers), future)
            self.viewer = None  # the question gets the room
            with contextlib.suppress(ValueError):
                self.app.layout.focus(self._pane_window)
            self.app.invalidate()
            try:
                return await future
            finally:
                self._pane = None
                with contextlib.suppress(ValueError):
                    self.app.layout.focus_last()
                self.app.invalidate()

    async def ask(self, request: PermissionRequest, decision: Decision) -> Answer:
        """The client's ``ask``: the approval pane in place of the composer."""
        fields = dict(request.tool_call)
        known = self.state.blocks.get(f"tool:{fields.get('toolCallId')}")
        if known is not None:  # what the agent said of the call before asking
            fields = {**self._view(known).fields,
                      **{k: v for k, v in fields.items() if v is not None}}
        fields.setdefault("kind", request.tool_kind)
        fields.setdefault("title", request.title)
        def pane() -> RenderableType:
            return blocks.approval_pane(fields, cwd=self.cwd, warning=decision.warning,
                                        session_choice=decision.session_choice,
                                        split=self.split_diffs)

        answers = {"y", "n"} | ({"a"} if decision.session_choice else set())
        chosen = await self._show_pane(pane, answers)
        return {"y": Answer.ONCE, "a": Answer.SESSION}.get(chosen, Answer.REJECT)

    async def offer(self, question: str) -> bool:
        """A yes/no question in place of the composer; only ``y`` says yes."""
        return await self._show_pane(lambda: blocks.offer_pane(question),
                                     {"y", "n", "enter"}) == "y"

    # -- the conversation ------------------------------------------------

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Screen]:
        """Run the footer for the block; it is erased when the block ends."""
        loop = asyncio.get_running_loop()
        self._ended = loop.create_future()
        app = loop.create_task(self.app.run_async(handle_sigint=False))
        try:
            # Until the footer is drawn: a block printed before that would not erase it.
            while self.app.renderer.last_rendered_screen is None and not app.done():
                await asyncio.sleep(0.01)
            if app.done():
                app.result()  # its failure, raised here
            yield self
        finally:
            if self.app.is_running:
                self.app.exit()
            await asyncio.gather(app, return_exceptions=True)
            if self._queued:  # printed as the footer went: nothing is lost
                self._drain()

    async def _next(self) -> str | int:
        """The next prompt submitted, or the exit code when the run is ended."""
        assert self._ended is not None
        if self.prompts:
            return self.prompts.pop(0)
        submitted: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        self._submitted = submitted
        self.app.invalidate()
        waited: set[asyncio.Future[Any]] = {submitted, self._ended}
        try:
            await asyncio.wait(waited, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not self._submitted.done():
                self._submitted.cancel()
        if self._ended.done():
            return self._ended.result()
        text = self._submitted.result()
        assert text is not None
        return text

    async def converse(self, client: AcpClient, idle_timeout: float | None) -> int | Restart:
        """Turns until Ctrl+D (0) or Ctrl+C at rest (130); a dead agent offers a
        restart that continues the session, a usage limit or a sign-in the agent
        asks for to send the prompt again; nothing happens unless the person
        answers ``y``."""
        from clanker.acp.errors import CoderError

        self.attach(client)
        again: str | None = None
        while True:
            if again is None:
                got = await self._next()
                if isinstance(got, int):
                    return got
                line = got
            else:
                line, again = again, None
            you = Block("screen-you", "user")
            you.text = line
            self.print(blocks.block_renderable(you, self.cwd))
            if blocks.collapsed(you, self.cwd):
                self._last_cut = you
            try:
                stop = await client.prompt(line, idle_timeout=idle_timeout)
            except CoderError as exc:
                self.working = False
                self._flush(final=True)
                self.print(Text(f"clanker: {exc.message}", style="red"))
                if exc.failure in _AGAIN:
                    if await self.offer(_AGAIN[exc.failure]):
                        again = line
                    continue
                if client.agent_exited:
                    if client.session_id and await self.offer(
                            f"start the agent again and continue session {client.session_id}?"):
                        self._client = None
                        return Restart(client.session_id)
                    return exc.exit_code
                continue
            finally:
                self.note = None
            self.print(Text(f"[{stop}] session {client.session_id}", style="dim"))
