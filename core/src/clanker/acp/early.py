"""``clanker coder``'s early start: the agent started, and sent ``initialize``,
before the CLI is loaded.

The first frame would otherwise wait for click, the CLI, asyncio, attrs and
the execution layer, several interpreter starts' worth of imports, while the
agent, which needs none of them, could already be starting. So
``clanker/__main__.py`` calls :func:`start` first: when the arguments are a
coder run that the CLI would start (nothing to show or list, no help, no
subcommand, a prompt or a terminal), an ``--agent-command`` is started here
with the standard library alone, the way the execution layer does
(:mod:`clanker.procstart`: the same environment, in a new session, under the
reaper), ``initialize`` written to it, and kept (:func:`hold`). A
``--harness`` needs the registry and the launch path for its server's argv
and environment, so ``__main__`` hands a function for it
(``Clanker.start_coder_early``, which calls :func:`hold`); it still runs
before click and asyncio are imported.

Then the CLI parses the same arguments as always, so every usage message
reads as it does without this. When the run reaches the agent's start,
:func:`take` hands the process over if it is that very command (argv, final
environment, directory and first line compared); anything else, and
:func:`discard` once the CLI returns, stops it (its input closed, SIGTERM to
its tree, SIGKILL after a grace), so it never outlives a run that did not use
it. (Should clanker itself be killed first, the reaper ends the agent's tree.)
A wrong guess here costs the head start, never a different agent.

A ``--harness`` whose server the last full run wrote a spawn plan for
(:mod:`clanker.acp.plan`: its argv, its environment's difference from the
host's, and keys that prove it current) is started from that plan, with the
standard library alone, like an ``--agent-command``; the library's start is the
fallback when there is none, or it no longer holds.

An agent with stored secrets is not started early: its environment is known
only once the credential store is read. (For an ``--agent-command`` the
index is looked for where ``clanker_paths`` puts it on Linux; where it is
elsewhere, :func:`take` finds the environment different and stops the agent
unused.)
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Final

from clanker.envvars import host_environ

if TYPE_CHECKING:
    import subprocess

__all__ = ["Started", "discard", "hold", "start", "take"]

# ``clanker coder``'s options that take a value, and its flags (see cli/coder.py).
_VALUED: Final = frozenset({"--harness", "--agent-command", "--approve", "--resume", "--show",
                            "--account", "--model", "--idle-timeout"})
_FLAGS: Final = frozenset({"--list", "--attention", "--no-attention", "--plain", "--json",
                           "-h", "--help"})
_SUBCOMMANDS: Final = frozenset({"clean", "secret"})
_NOT_STARTED: Final = frozenset({"--show", "--list", "-h", "--help"})
_STOP_WAIT: Final = 3.0  # the reaper's own grace and its margin (execution/process.py)


class Started:
    """An agent started early: its process and what it was started as."""

    def __init__(self, process: subprocess.Popen[bytes], report_read: int,
                 argv: tuple[str, ...], env: dict[str, str], cwd: str, line: bytes,
                 written_at: float | None) -> None:
        self.process = process
        self.report_read = report_read
        """The reaper's report pipe (``-1``: no reaper); its new owner closes it."""
        self.argv = argv
        self.env = env
        self.cwd = cwd
        self.line = line
        self.written_at = written_at


_held: list[Started] = []  # the one agent started early and not yet taken, if any
_exit_hooked: list[bool] = []


def start(args: Sequence[str], environ: Mapping[str, str] | None = None,
          harness: Callable[[str, str | None], bool] | None = None) -> bool:
    """Start the agent of ``clanker coder ARGS`` when the CLI would start it; return
    whether one was started. Never raises: the CLI reports what is wrong.

    An ``--agent-command`` is started here; a ``--harness ID`` (with ``--account``)
    by ``harness(ID, ACCOUNT)``, when given (it needs the registry and the launch
    path: see ``CoderService.start_early``), which calls :func:`hold`."""
    if _held:
        return False
    environ = os.environ if environ is None else environ
    chosen = _chosen(list(args))
    if chosen is None:
        return False
    option, value, account = chosen
    if option != "--agent-command" and harness is None:
        return False
    try:
        if option == "--agent-command":
            return _start_command(value, environ)
        assert harness is not None
        return _start_planned(value, account, environ) or harness(value, account)
    except Exception:  # whatever it is (a removed working directory, say), the CLI
        discard()      # meets it again and reports it
        return False


def _start_command(command: str, environ: Mapping[str, str]) -> bool:
    argv = _split(command)
    if argv is None or _has_secrets(argv[0], environ):
        return False
    cwd = os.getcwd()
    # As service.open builds it from the local environment's (credentials stripped).
    return hold(argv, {**host_environ(environ), "PWD": cwd}, cwd)


def _start_planned(harness: str, account: str | None, environ: Mapping[str, str]) -> bool:
    """Start ``harness``'s server from its spawn plan (:mod:`clanker.acp.plan`), when
    one is current and no secret is stored for it."""
    from clanker.acp import plan

    cwd = os.getcwd()
    found = plan.read(harness, account, cwd, environ)
    if found is None or _has_secrets(harness, environ):
        return False
    return hold(found.argv, found.env, cwd)


def hold(argv: Sequence[str], env: Mapping[str, str], cwd: str) -> bool:
    """Start ``argv`` in ``cwd`` with ``env`` (before the child's own additions) the
    way the execution layer does, write ``initialize`` to it and keep it for
    :func:`take`; return whether it was started (not when one is held already,
    nor when its executable is not found or cannot start: the caller's own start
    reports that). It is stopped at exit unless taken."""
    if _held:
        return False
    from clanker.acp.wire import encode, initialize_request
    from clanker.procstart import child_env, find_executable, write_first
    from clanker.procstart import start as start_process

    final = child_env(env, {}, cwd)
    executable = find_executable(argv[0], final)
    if executable is None:
        return False
    try:
        process, report_read = start_process([executable, *argv[1:]], final, cwd,
                                             stdin_pipe=True)
    except OSError:
        return False
    line = encode(initialize_request()) + b"\n"
    _held.append(Started(process, report_read, tuple(argv), final, cwd, line,
                         write_first(process, line)))
    if not _exit_hooked:
        import atexit

        atexit.register(discard)  # a library caller that never opens it leaks nothing
        _exit_hooked.append(True)
    return True


def take(argv: Sequence[str], env: Mapping[str, str], cwd: str,
         line: bytes | None) -> Started | None:
    """The agent started early, when it is ``argv`` in ``cwd`` with ``env`` (before
    the child's own additions) and ``line`` was written to it; once only. A
    different one is stopped, and ``None`` returned: the caller starts its own."""
    if not _held:
        return None
    started = _held.pop()
    from clanker.procstart import child_env

    if (started.written_at is not None and tuple(argv) == started.argv and cwd == started.cwd
            and line == started.line and child_env(env, {}, cwd) == started.env):
        return started
    _stop(started)
    return None


def discard() -> None:
    """Stop the agent started early unless it was taken (idempotent)."""
    while _held:
        _stop(_held.pop())


def _stop(started: Started) -> None:
    import signal
    import subprocess

    process = started.process
    if started.report_read >= 0:
        os.close(started.report_read)
    for pipe in (process.stdin, process.stdout, process.stderr):
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()
    if process.poll() is not None:
        return
    for signum in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signum)  # its own session: the reaper passes it on
        try:
            process.wait(timeout=_STOP_WAIT)
            return
        except subprocess.TimeoutExpired:
            continue
    process.wait()


def _chosen(args: list[str]) -> tuple[str, str, str | None] | None:
    """The agent (``--agent-command`` or ``--harness``, its value) and ``--account``
    when ``args`` are a run the CLI would start it for; else ``None``."""
    parsed = _parse(args) if not args or args[0] not in _SUBCOMMANDS else None
    if parsed is None:
        return None
    seen, positional = parsed
    if seen.keys() & _NOT_STARTED or any(len(values) > 1 for name, values in seen.items()
                                         if name != "--approve"):
        return None
    agents = [name for name in ("--agent-command", "--harness") if name in seen]
    if len(agents) != 1:
        return None
    if len(positional) > 1 or (positional and not positional[0].strip()):
        return None
    if not positional and ("--json" in seen
                           or not (sys.stdin.isatty() and sys.stdout.isatty())):
        return None  # without a prompt: a conversation, which needs a terminal
    accounts = seen.get("--account")
    return agents[0], seen[agents[0]][0], accounts[0] if accounts else None


def _parse(args: list[str]) -> tuple[dict[str, list[str]], list[str]] | None:
    """``args`` as click parses ``clanker coder``'s options: each option's values and
    the positional arguments; ``None`` for what the CLI would refuse (or this does
    not know)."""
    seen: dict[str, list[str]] = {}
    positional: list[str] = []
    index = 0
    while index < len(args):
        arg = args[index]
        index += 1
        if arg == "--":
            positional.extend(args[index:])
            break
        if not arg.startswith("-") or arg == "-":
            positional.append(arg)
            continue
        name, equals, value = arg.partition("=")
        if name in _VALUED:
            if not equals:
                if index >= len(args):
                    return None
                value = args[index]
                index += 1
            seen.setdefault(name, []).append(value)
        elif name in _FLAGS and not equals:
            seen.setdefault(name, []).append("")
        else:
            return None
    return seen, positional


def _split(command: str) -> tuple[str, ...] | None:
    """``parse_agent_command``'s rules (service.py, capability.py), or ``None``."""
    import shlex

    try:
        argv = tuple(shlex.split(command))
    except ValueError:
        return None
    if not argv or not all(arg and "\0" not in arg for arg in argv):
        return None
    if "/" in argv[0] or argv[0].startswith("-"):
        return None
    return argv


def _has_secrets(agent: str, environ: Mapping[str, str]) -> bool:
    """Whether the secrets index (where ``clanker_paths`` puts it on Linux) names a
    secret of ``agent`` that this run's environment does not already set."""
    home = environ.get("CLANKER_HOME")
    if home:
        state = os.path.join(os.path.abspath(os.path.expanduser(home)), "state")
    else:
        base = environ.get("XDG_STATE_HOME", "").strip() or os.path.expanduser("~/.local/state")
        state = os.path.join(base, "clanker")
    try:
        with open(os.path.join(state, "coder-secrets.json"), "rb") as index:
            raw = index.read(1024 * 1024 + 1)
    except FileNotFoundError:
        return False
    except OSError:
        return True  # unreadable: the CLI decides, with the store's word
    import json

    try:
        data = json.loads(raw)
    except ValueError:
        return True
    names = data.get(agent) if isinstance(data, dict) else None
    if names is None:
        return not isinstance(data, dict)
    return not isinstance(names, list) or any(name not in environ for name in names)
