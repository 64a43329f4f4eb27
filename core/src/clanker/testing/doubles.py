"""Test doubles for the execution seams.

They replay output a test scripts, typically output captured from the real CLI
(see ``tests/fixtures``). They stand in for a harness *process*, never for the
provider code under test.
"""

from __future__ import annotations

import asyncio
import os
import stat
import sys
import textwrap
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar, cast

import pytest

from clanker.attachment import AttachmentContext
from clanker.descriptor import Transport
from clanker.environment.local import LocalFiles, host_environ
from clanker.errors import HarnessCapabilityError
from clanker.execution import (
    CommandExecutor,
    CommandRequest,
    CommandResult,
    LocalTransport,
    SessionExecutor,
    SessionExit,
)
from clanker.execution.session import DisposedOnExit
from clanker.usage.capability import UsageCapability, UsageContext, UsageSnapshot

__all__ = [
    "EnvironmentDouble",
    "FailingExecutor",
    "ScriptedExecutor",
    "ScriptedSession",
    "ScriptedSessionExecutor",
    "attachment_context",
    "home_attachment_context",
    "prepend_to_path",
    "probe_usage",
    "run_locally",
    "script_double",
    "write_script",
]

_T = TypeVar("_T")


class ScriptedExecutor:
    """A one-shot executor answering each request through ``respond``."""

    def __init__(self, respond: Callable[[CommandRequest], CommandResult]) -> None:
        self.respond = respond
        self.requests: list[CommandRequest] = []

    @classmethod
    def returning(cls, stdout: str, stderr: str = "", exit_code: int = 0) -> ScriptedExecutor:
        return cls(lambda _: CommandResult(stdout, stderr, exit_code))

    async def run(self, request: CommandRequest) -> CommandResult:
        self.requests.append(request)
        return self.respond(request)


class ScriptedSession(DisposedOnExit):
    """A stdio session whose stdout is a fixed list of lines.

    With ``reply`` given, each written line may produce more stdout lines
    (a request/response protocol); otherwise all lines are available at once.
    """

    def __init__(
        self,
        lines: Iterable[str] = (),
        *,
        reply: Callable[[str], Sequence[str]] | None = None,
        exit_code: int = 0,
        stderr: str = "",
    ) -> None:
        self._lines = list(lines)
        self._reply = reply
        self._exit = SessionExit(stderr, exit_code)
        self.written: list[str] = []
        self.input_closed = False
        self.disposed = False

    async def write_line(self, line: str) -> None:
        self.written.append(line)
        if self._reply is not None:
            self._lines.extend(self._reply(line))

    async def read_line(self) -> str | None:
        return self._lines.pop(0) if self._lines else None

    async def close_input(self) -> None:
        self.input_closed = True

    async def wait(self) -> SessionExit:
        return self._exit

    async def dispose(self) -> None:
        self.disposed = True


class ScriptedSessionExecutor:
    """A session executor that opens the sessions a factory makes."""

    def __init__(self, factory: Callable[[CommandRequest], ScriptedSession]) -> None:
        self.factory = factory
        self.requests: list[CommandRequest] = []
        self.sessions: list[ScriptedSession] = []

    async def open(self, request: CommandRequest) -> ScriptedSession:
        self.requests.append(request)
        session = self.factory(request)
        self.sessions.append(session)
        return session


class FailingExecutor:
    """Both execution forms, failing with ``error`` (a missing binary, a timeout...)."""

    def __init__(self, error: HarnessCapabilityError) -> None:
        self.error = error

    async def run(self, request: CommandRequest) -> CommandResult:
        raise self.error

    async def open(self, request: CommandRequest) -> ScriptedSession:
        raise self.error


def write_script(directory: Path, name: str, body: str) -> Path:
    """Write an executable Python script ``name`` into ``directory``: a harness double
    for real-process tests. ``body`` is dedented; the script runs on this interpreter."""
    path = directory / name
    path.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body))
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def script_double(directory: Path, command: str, script: str,
                  **settings: str) -> tuple[LocalTransport, Path]:
    """Install ``script`` as ``command`` in ``directory/bin`` and return a transport whose
    ``PATH`` finds it first, with the log file the script is told to write.

    The script reads its settings from the environment: ``FAKE_<COMMAND>_LOG`` (the
    log, made empty here) and ``FAKE_<COMMAND>_<KEY>`` for each keyword given.
    """
    bin_dir = directory / "bin"
    bin_dir.mkdir(exist_ok=True)
    write_script(bin_dir, command, script)
    log = directory / f"{command}.log"
    log.write_text("")
    prefix = f"FAKE_{command.upper()}_"
    env = dict(os.environ)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env[prefix + "LOG"] = str(log)
    env.update({prefix + key.upper(): value for key, value in settings.items()})
    return LocalTransport(env), log


def prepend_to_path(monkeypatch: pytest.MonkeyPatch, directory: Path) -> None:
    """Make ``directory`` the first place ``PATH`` is searched, for this test."""
    monkeypatch.setenv("PATH", f"{directory}{os.pathsep}{os.environ.get('PATH', '')}")


class EnvironmentDouble:
    """An :class:`~clanker.environment.Environment` for tests: the executors a
    test hands it (scripted doubles speaking a captured protocol, or a real
    :class:`~clanker.execution.LocalTransport`), this machine's files, and the
    environment variables given (``HOME`` filled in as on the host).

    It stands for this machine (``name`` is ``local``, so caches land where a
    local run's do). Binary lookup searches the given ``PATH``; an interactive
    run is refused, since a test never owns a terminal.
    """

    name = "local"
    transport = Transport.LOCAL

    def __init__(
        self,
        *,
        executor: CommandExecutor,
        session_executor: SessionExecutor | None = None,
        environ: dict[str, str] | None = None,
    ) -> None:
        self.executor = executor
        self.session_executor = session_executor
        self.files = LocalFiles()
        self.environ = host_environ(environ or {})

    async def locate(self, commands: Iterable[str]) -> dict[str, str | None]:
        return {c: self.files.which(c, self.environ.get("PATH", "")) for c in commands}

    async def gather(self, work: Callable[[], Awaitable[_T]], *, rounds: int | None = None,
                     complete: bool = False) -> _T:
        return await work()  # this machine's files are read as they are asked for

    def cache_dir(self, root: Path) -> Path:
        return root

    def canonical_path(self, path: str) -> str:
        return self.files.realpath(path)

    def run_interactive(self, argv: tuple[str, ...], env: object, cwd: str) -> int:
        raise AssertionError("a test environment has no terminal to run a harness in")


def probe_usage(
    usage: UsageCapability, executor: object, session_executor: object = None
) -> UsageSnapshot:
    """Run ``usage.probe`` once over the given doubles (a :class:`ScriptedExecutor`, a
    :class:`ScriptedSessionExecutor`, a real transport...) and this machine's files."""
    context = UsageContext(files=LocalFiles(), environ={},
                           executor=cast(CommandExecutor, executor),
                           session_executor=cast(SessionExecutor | None, session_executor))
    return asyncio.run(usage.probe(context))


def run_locally(request: CommandRequest) -> CommandResult:
    """Run one bounded command on this machine, blocking (what a local launch hands
    an attachment as :attr:`~clanker.launch.capability.AttachmentContext.run`)."""
    return asyncio.run(LocalTransport().run(request))


def attachment_context(
    *,
    argv: Sequence[str],
    env: Mapping[str, str],
    cwd: str,
    private_dir: Path,
    user_flags: Sequence[str] = (),
) -> AttachmentContext:
    """The :class:`~clanker.launch.capability.AttachmentContext` a local launch
    builds: this machine's files and commands."""
    return AttachmentContext(argv=tuple(argv), env=env, cwd=cwd, private_dir=private_dir,
                             user_flags=tuple(user_flags), files=LocalFiles(), run=run_locally)


def home_attachment_context(root: Path, argv: Sequence[str],
                            env: Mapping[str, str] | None = None) -> AttachmentContext:
    """:func:`attachment_context` for a launch in ``root/home/project`` with ``root/home``
    as ``HOME`` (beside ``env``) and ``root/private`` (mode 0700) as its private directory."""
    home = root / "home"
    (home / "project").mkdir(parents=True, exist_ok=True)
    private = root / "private"
    private.mkdir(mode=0o700, exist_ok=True)
    return attachment_context(argv=argv, env={"HOME": str(home), **(env or {})},
                              cwd=str(home / "project"), private_dir=private)
