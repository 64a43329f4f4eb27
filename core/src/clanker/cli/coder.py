"""``clanker coder``: drive an ACP agent from this terminal: one turn of PROMPT,
or a conversation on a terminal without one.

A conversation on a terminal (without ``--plain`` or ``--json``) runs in the
full-screen interface (:mod:`clanker.acp.ui.screen`): finished blocks in the
terminal's scrollback, a live footer with the status line, the composer and
the approval pane. Everything else is line mode: the answer streams to
stdout, tool calls and approval decisions go to stderr one line each;
``--json`` prints every event as one JSON object per line instead. When the
interface cannot start, one notice goes to stderr and the conversation runs
in line mode, each question asked on stderr and answered with one line
(``y``, ``a``, ``n``). Without a person to ask, a permission the ladder asks
about is refused unless ``--approve KIND`` names its tool kind. The exit code
comes from the stop reason (``docs/exit-codes.md``).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Coroutine
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any, TypeVar

import click
from attrs import frozen

from clanker.cli.common import (
    CapabilityFailure,
    Failure,
    HarnessArgument,
    json_option,
    library,
    run_async,
)
from clanker.errors import EXIT_USAGE, HarnessCapabilityError

if TYPE_CHECKING:
    # Nothing the agent's spawn does not need is imported before it: the
    # registry (with every plugin) only when --harness names one, the interface
    # once the agent is starting (``tests/core/acp/test_cli.py`` pins the set).
    from clanker.acp.client import AcpClient, Ask, EventSink
    from clanker.acp.policy import Answer, Decision, PermissionRequest
    from clanker.acp.ui.screen import Screen
    from clanker.registry import HarnessProvider

__all__ = ["coder"]

T = TypeVar("T")

_STOP_EXIT = {"end_turn": 0, "cancelled": 130}
_STOPPED = 32  # refusal, max_tokens, max_turn_requests (CoderFailure.STOPPED)
_REFUSED = 36  # CoderFailure.REFUSED


class _LinePrinter:
    """Events as lines: answer text on stdout, everything else on stderr."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self._mid_line = False

    def __call__(self, event: dict[str, Any]) -> None:
        if self.as_json:
            sys.stdout.write(json.dumps(event, ensure_ascii=False) + "\n")
            sys.stdout.flush()
            return
        kind = event.get("event")
        if kind == "update" and event.get("kind") == "agent_message_chunk" and "text" in event:
            sys.stdout.write(str(event["text"]))
            sys.stdout.flush()
            self._mid_line = not str(event["text"]).endswith("\n")
            return
        line = self._line(event)
        if line is not None:
            self.end_line()
            click.echo(line, err=True)

    def end_line(self) -> None:
        if self._mid_line:
            sys.stdout.write("\n")
            sys.stdout.flush()
            self._mid_line = False

    @staticmethod
    def _line(event: dict[str, Any]) -> str | None:
        kind = event.get("event")
        if kind == "approval":
            return (f"[{event.get('verdict')}] {event.get('title') or 'tool call'} "
                    f"({event.get('kind') or 'no kind'}): {event.get('rule')}")
        if kind == "update" and event.get("unsupported"):
            return f"[unsupported update] {event.get('kind')}"
        if kind == "turn-failed":
            return None  # the failure itself is the error line
        if kind in ("notice", "history"):
            return str(event.get("text"))
        if kind in ("resumed", "cancel"):
            return f"[{kind}] {event.get('method', '')}".rstrip()
        return None


class _TtyQuestions:
    """Asks the person on the terminal, one question at a time: the request on
    stderr, the answer one line from stdin, read through the event loop (no
    thread: a question the client answers first, by a cancel or a session
    approval, is simply dropped)."""

    def __init__(self, cwd: str) -> None:
        import asyncio

        self._cwd = cwd
        self._one = asyncio.Lock()

    async def __call__(self, request: PermissionRequest, decision: Decision) -> Answer:
        from clanker.acp.policy import Answer

        async with self._one:
            where = ", ".join(os.path.relpath(p, self._cwd) if os.path.isabs(p) else p
                              for p in request.paths)
            click.echo(f"approve {request.tool_kind or 'a tool call without a kind'}: "
                       f"{request.title or '(no title)'}" + (f" ({where})" if where else ""),
                       err=True)
            if decision.warning:
                click.echo(f"  warning: {decision.warning}", err=True)
            choices = "[y] approve once"
            if decision.session_choice:
                choices += f"   [a] approve {request.tool_kind} for this session"
            click.echo(f"  {choices}   [n] refuse", err=True)
            answer = (await _read_line() or "").strip().lower()
        if answer == "y":
            return Answer.ONCE
        if answer == "a" and decision.session_choice:
            return Answer.SESSION
        return Answer.REJECT


async def _read_line() -> str | None:
    """One line from stdin through the loop (a terminal in canonical mode hands
    over whole lines); ``None`` at EOF (Ctrl+D on an empty line)."""
    import asyncio

    loop = asyncio.get_running_loop()
    fd = sys.stdin.fileno()
    done: asyncio.Future[str | None] = loop.create_future()
    buffer = bytearray()

    def readable() -> None:
        chunk = os.read(fd, 1024)
        buffer.extend(chunk)
        if done.done():
            return
        if b"\n" in buffer:
            done.set_result(buffer.split(b"\n", 1)[0].decode("utf-8", errors="replace"))
        elif not chunk:
            done.set_result(buffer.decode("utf-8", errors="replace") if buffer else None)

    loop.add_reader(fd, readable)
    try:
        return await done
    finally:
        loop.remove_reader(fd)


def _show(session_id: str, as_json: bool) -> None:
    from clanker.acp.errors import CoderError
    from clanker.acp.render import render_state, replay

    try:
        records = library().coder_transcript(session_id)
    except CoderError as exc:
        raise Failure(exc.message, exc.exit_code, kind=exc.failure.value) from None
    if as_json:
        for record in records:
            click.echo(json.dumps(record, ensure_ascii=False))
    else:
        click.echo(render_state(replay(records)))


def _exit_code(stop: str, refusals: int) -> int:
    code = _STOP_EXIT.get(stop, _STOPPED)
    return _REFUSED if code == 0 and refusals else code


@frozen
class _Restart:
    """The person chose to start the agent again and continue ``session``."""

    session: str


async def _offer(question: str) -> bool:
    """Ask a yes/no question on the terminal; only ``y`` says yes (EOF says no)."""
    click.echo(f"{question} [y/N] ", err=True, nl=False)
    return (await _read_line() or "").strip().lower() == "y"


async def _conversation(client: AcpClient, printer: _LinePrinter,
                        idle_timeout: float | None) -> int | _Restart:
    """Turns typed at ``you>`` until Ctrl+D (exit 0); Ctrl+C interrupts a running
    turn (``session/cancel``) and, at the prompt, ends the run (exit 130).

    A turn whose agent died offers a restart that continues the session (declined:
    that turn's code); a usage limit, or a sign-in the agent asks for, offers to
    send the same prompt again. Neither happens unless the person answers ``y``."""
    import asyncio
    import signal

    from clanker.acp.errors import CoderError, CoderFailure

    loop = asyncio.get_running_loop()
    again: str | None = None
    while True:
        if again is None:
            click.echo("you> ", err=True, nl=False)
            line = await _read_line()
            if line is None:
                click.echo("", err=True)
                return 0
            if not line.strip():
                continue
        else:
            line, again = again, None
        loop.add_signal_handler(signal.SIGINT, lambda: loop.create_task(client.cancel()))
        try:
            stop = await client.prompt(line, idle_timeout=idle_timeout)
        except CoderError as exc:
            printer.end_line()
            click.echo(f"clanker: {exc.message}", err=True)
            if exc.failure in (CoderFailure.USAGE_LIMIT, CoderFailure.UNAUTHENTICATED):
                if await _offer("send the same prompt again?"):
                    again = line
                continue
            if client.agent_exited:
                if client.session_id and await _offer(
                        f"start the agent again and continue session {client.session_id}?"):
                    return _Restart(client.session_id)
                return exc.exit_code
            continue
        finally:
            loop.remove_signal_handler(signal.SIGINT)
        printer.end_line()
        click.echo(f"[{stop}] session {client.session_id}", err=True)


class _Router:
    """The event sink and ``ask`` handed to the client before it is known where they
    go (the screen starts once the session is open): events wait until then.

    ``on_start`` is called when the agent has been started and sent its first
    frame (the full-screen interface is loaded then, while the agent starts)."""

    def __init__(self, on_start: Callable[[], object] | None = None) -> None:
        self._sink: EventSink | None = None
        self._ask: Ask | None = None
        self._waiting: list[dict[str, Any]] = []
        self._on_start = on_start

    def use(self, sink: EventSink, ask: Ask | None) -> None:
        self._sink, self._ask = sink, ask
        waiting, self._waiting = self._waiting, []
        for event in waiting:
            sink(event)

    def __call__(self, event: dict[str, Any]) -> None:
        if event.get("event") == "agent-started" and self._on_start is not None:
            self._on_start()
        if self._sink is None:
            self._waiting.append(event)
        else:
            self._sink(event)

    async def ask(self, request: PermissionRequest, decision: Decision) -> Answer:
        from clanker.acp.policy import Answer

        if self._ask is None:
            return Answer.REJECT
        return await self._ask(request, decision)


class _Preload:
    """The interface's modules, imported in a thread from when the agent has been
    sent its first frame (rich and prompt_toolkit never delay the agent's start)."""

    def __init__(self) -> None:
        self._future: Any = None

    def start(self) -> None:
        if self._future is None:
            import asyncio
            import importlib

            self._future = asyncio.get_running_loop().run_in_executor(
                None, importlib.import_module, "clanker.acp.ui.screen")

    async def module(self) -> Any:
        self.start()
        return await self._future


async def _open_screen(agent: str, preload: _Preload) -> Screen | None:
    """The full-screen interface, or ``None`` after one notice on stderr when it
    cannot start here (the conversation then runs in line mode)."""
    try:
        module = await preload.module()
        screen: Screen = module.Screen(cwd=os.getcwd(), agent=agent)
    except Exception as exc:  # any reason at all: the agent is not the interface's to stop
        reason = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        click.echo(f"clanker: the full-screen interface cannot start ({reason}); "
                   "continuing in line mode", err=True)
        return None
    return screen


def _agent_name(client: AcpClient, fallback: str) -> str:
    info = client.agent.get("agentInfo")
    name = info.get("title") or info.get("name") if isinstance(info, dict) else None
    return str(name) if isinstance(name, str) and name else fallback


async def _turn(harness: HarnessProvider | None, agent_command: tuple[str, ...] | None,
                prompt: str | None, approve: tuple[str, ...], resume: str | None,
                account: str | None, idle_timeout: float | None, attention: bool,
                printer: _LinePrinter, interactive: bool, model: str | None,
                full_screen: bool = False) -> int:
    import asyncio
    import signal

    # SIGTERM ends the run as Ctrl+C does: the agent is stopped (SIGTERM, then
    # SIGKILL) on the way out, and the exit status is 130.
    task = asyncio.current_task()
    assert task is not None
    terminated: list[bool] = []

    def on_term() -> None:
        terminated.append(True)
        task.cancel()

    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, on_term)
    clanker = library()
    preload = _Preload()
    router = _Router(preload.start if full_screen else None)
    questions = _TtyQuestions(os.getcwd()) if interactive else None
    if not full_screen:
        router.use(printer, questions)
    screen: Screen | None = None
    fallback = str(harness.id) if harness is not None else os.path.basename(
        (agent_command or ("agent",))[0])
    try:
        async with AsyncExitStack() as stack:
            while True:
                async with clanker.coder(harness, agent_command=agent_command, cwd=os.getcwd(),
                                         approve=approve, on_event=router, resume=resume,
                                         account=account, attention=attention,
                                         interactive=interactive,
                                         ask=router.ask if interactive else None) as client:
                    if model is not None:
                        try:
                            await client.choose("model", model)
                        except ValueError as exc:
                            raise Failure(f"--model: {exc}", EXIT_USAGE) from None
                    if prompt is None:
                        if full_screen and screen is None:
                            screen = await _started(stack, _agent_name(client, fallback),
                                                    on_term, preload)
                            full_screen = screen is not None
                            router.use(*((screen.on_event, screen.ask) if screen is not None
                                         else (printer, questions)))
                        ended = (await screen.converse(client, idle_timeout)
                                 if screen is not None
                                 else await _conversation(client, printer, idle_timeout))
                        if not isinstance(ended, int):
                            resume = ended.session  # a new agent process, the same session
                            continue
                        return ended
                    stop = await client.prompt(prompt, idle_timeout=idle_timeout)
                    printer.end_line()
                    if not printer.as_json and client.session_id:
                        click.echo(f"[{stop}] session {client.session_id}", err=True)
                    return _exit_code(stop, client.refusals)
    except asyncio.CancelledError:
        if terminated:
            return _STOP_EXIT["cancelled"]
        raise
    finally:
        loop.remove_signal_handler(signal.SIGTERM)


async def _started(stack: AsyncExitStack, agent: str, on_signal: Callable[[], None],
                   preload: _Preload) -> Screen | None:
    """Open the screen and run its footer until ``stack`` closes; in raw mode
    Ctrl+C is a key, so a SIGINT from elsewhere ends the run as SIGTERM does."""
    import asyncio
    import signal

    screen = await _open_screen(agent, preload)
    if screen is None:
        return None
    try:
        await stack.enter_async_context(screen.running())
    except Exception as exc:
        click.echo(f"clanker: the full-screen interface cannot start ({exc}); "
                   "continuing in line mode", err=True)
        return None
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGINT, on_signal)
    stack.callback(loop.remove_signal_handler, signal.SIGINT)
    return screen


class _CoderCommand(click.Command):
    """``clanker coder [PROMPT]``, with subcommands (``clean``, ``secret``) named by
    the first argument. A prompt that is one of their names goes after ``--``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        from clanker.cli.coder_tools import clean, secret

        self.subcommands: dict[str, click.Command] = {"clean": clean, "secret": secret}

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] in self.subcommands:
            ctx.meta["clanker.coder.subcommand"] = (args[0], args[1:])
            return []
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        chosen = ctx.meta.pop("clanker.coder.subcommand", None)
        if chosen is None:
            return super().invoke(ctx)
        name, rest = chosen
        command = self.subcommands[name]
        # parented above this command: its usage reads ``clanker coder clean``
        with command.make_context(f"{ctx.info_name} {name}", rest, parent=ctx.parent) as sub:
            return command.invoke(sub)

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, command.get_short_help_str())
                                for name, command in self.subcommands.items()])
        super().format_epilog(ctx, formatter)


@click.command(cls=_CoderCommand, context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("prompt", required=False)  # none, on a terminal: a conversation
@click.option("--harness", "harness", type=HarnessArgument(),
              help="The harness whose ACP server to drive.")
@click.option("--agent-command", metavar='"CMD ARGS"',
              help="Any other ACP agent: its command line (the executable on PATH).")
@click.option("--approve", "approve", multiple=True, metavar="KIND",
              help="Approve this tool kind without asking (repeatable): read, edit, "
                   "delete, move, search, execute, think, fetch, switch_mode, other.")
@click.option("--resume", metavar="ID", help="Continue this session (never a new one).")
@click.option("--show", metavar="ID", help="Print a past session's transcript and exit.")
@click.option("--list", "list_sessions", is_flag=True,
              help="List the agent's sessions for this directory (where it offers session/list).")
@click.option("--account", metavar="NAME", help="The managed account to run under.")
@click.option("--model", metavar="MODEL",
              help="Choose the agent's model (one of the values its session offers).")
@click.option("--idle-timeout", type=click.FloatRange(min=1), default=600.0, show_default=True,
              help="Cancel the turn when the agent sends nothing for this many seconds.")
@click.option("--attention/--no-attention", default=True, show_default=True,
              help="List the session in `clanker status` (it starts the grid if needed).")
@click.option("--plain", is_flag=True,
              help="Line mode, and never ask: refuse what the ladder would ask about "
                   "(unless --approve).")
@json_option
def coder(prompt: str | None, harness: HarnessProvider | None, agent_command: str | None,
          approve: tuple[str, ...], resume: str | None, show: str | None, list_sessions: bool,
          account: str | None, model: str | None, idle_timeout: float, attention: bool,
          plain: bool, as_json: bool) -> None:
    """Drive an ACP agent with clanker's approval ladder: one turn of PROMPT, or
    (on a terminal, without PROMPT) a conversation in the full-screen interface
    until Ctrl+D."""
    if show is not None:
        _show(show, as_json)
        return
    if (harness is None) == (agent_command is None):
        raise Failure("choose the agent: --harness ID or --agent-command \"CMD ARGS\"",
                      EXIT_USAGE)
    if list_sessions:
        _print_sessions(_agent(harness, agent_command, account, None), as_json)
        return
    # A person can answer only on a terminal, and not when a program reads the output.
    terminal = sys.stdin.isatty() and sys.stdout.isatty()
    interactive = not (plain or as_json) and terminal
    if prompt is not None and not prompt.strip():
        raise Failure("the PROMPT is empty", EXIT_USAGE)
    if prompt is None and not (interactive or (plain and terminal and not as_json)):
        raise Failure("give the PROMPT to run (without one, clanker coder needs a terminal)",
                      EXIT_USAGE)
    from clanker.acp.policy import TOOL_KINDS

    unknown = sorted(set(approve) - TOOL_KINDS)
    if unknown:
        raise Failure(f"--approve: unknown tool kind {unknown[0]!r} "
                      f"(known: {', '.join(sorted(TOOL_KINDS))})", EXIT_USAGE)
    printer = _LinePrinter(as_json)
    code = _agent(harness, agent_command, account,
                  lambda argv: _turn(harness, argv, prompt, approve, resume, account,
                                     idle_timeout, attention, printer, interactive, model,
                                     full_screen=interactive and prompt is None),
                  printer)
    raise click.exceptions.Exit(code)


def _agent(harness: HarnessProvider | None, agent_command: str | None, account: str | None,
           work: Callable[[tuple[str, ...] | None], Coroutine[Any, Any, T]] | None,
           printer: _LinePrinter | None = None) -> Any:
    """Run ``work`` (``None``: the session listing) against the agent chosen; turn
    every failure into the CLI's one error line and exit code."""
    from clanker.acp.errors import CoderError
    from clanker.acp.service import parse_agent_command

    argv = None
    if agent_command is not None:
        try:
            argv = parse_agent_command(agent_command)
        except ValueError as exc:
            raise Failure(f"--agent-command: {exc}", EXIT_USAGE) from None
    coroutine = (library().coder_sessions(harness, agent_command=argv, cwd=os.getcwd(),
                                          account=account)
                 if work is None else work(argv))
    try:
        return run_async(coroutine)
    except HarnessCapabilityError as exc:
        raise CapabilityFailure(exc) from exc
    except CoderError as exc:
        raise Failure(exc.message, exc.exit_code, kind=exc.failure.value) from None
    except Exception as exc:
        # The configuration is parsed once the agent runs: an error from it can only
        # come once its module is loaded, and the agent need not wait for that.
        config = sys.modules.get("clanker.config")
        if config is not None and isinstance(exc, config.ConfigError):
            raise Failure(str(exc), EXIT_USAGE) from None
        raise
    finally:
        if printer is not None:
            printer.end_line()


def _print_sessions(sessions: list[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps({"sessions": sessions}, ensure_ascii=False, indent=2))
        return
    for session in sessions:
        click.echo(f"{session.get('sessionId', '?')}  {session.get('updatedAt') or ''}  "
                   f"{session.get('title') or ''}".rstrip())
