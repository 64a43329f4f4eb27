"""Builders shared by the core tests: a configurable fake harness plugin, and
executable scripts on a private PATH for real-process tests."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import select
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path

import pytest

from clanker import hookimpl
from clanker.capabilities import Capability
from clanker.descriptor import HarnessDescriptor, OperationSupport, Support, Transport
from clanker.environment import HostFiles
from clanker.environment.files import FileSample
from clanker.environment.witness import Witness
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import CommandRequest, CommandResult
from clanker.ids import HarnessId
from clanker.launch.request import LaunchPlan, LaunchRequest
from clanker.models.capability import ModelsContext
from clanker.models.types import Model
from clanker.registry import Registry
from clanker.sessions.capability import SessionsContext
from clanker.sessions.filestore import scan_files
from clanker.sessions.types import HarnessSession, SessionScan, clean_text, parse_timestamp
from clanker.testing.doubles import prepend_to_path
from clanker.testing.doubles import write_script as write_script  # re-exported
from clanker.usage.capability import UsageContext
from clanker.usage.policy import RefreshPolicy
from clanker.usage.types import Measurement, MeasurementKind, Scope, UsageSnapshot


class FakeLaunch:
    """A launch capability for a fictional harness ``fake-agent``.

    argv: ``fake-agent [--model M] [resume ID | --fork ID] USER_FLAGS...``
    """

    def __init__(self, executable: str = "fake-agent") -> None:
        self.executable = executable

    def build(self, request: LaunchRequest) -> LaunchPlan:
        argv = [self.executable]
        if request.model:
            argv += ["--model", request.model]
        if request.session is not None:
            if request.operation.value == "resume":
                argv += ["resume", request.session.native_id]
            else:
                argv += ["--fork", request.session.native_id]
        argv += request.user_flags
        return LaunchPlan(argv=tuple(argv), env={"FAKE_AGENT_HOME": "/tmp/fake"})

    def validate_session_id(self, raw: str) -> str:
        if not raw.isalnum():
            raise ValueError("a fake session id is alphanumeric")
        return raw

    def version_request(self) -> CommandRequest:
        return CommandRequest(command=self.executable, args=("--version",))

    def parse_version(self, result: CommandResult) -> str:
        text = result.stdout.strip()
        if result.exit_code != 0 or not text.startswith("fake-agent "):
            raise HarnessCapabilityError(ErrorKind.PARSE_FAILURE, "version")
        version = text.removeprefix("fake-agent ").strip()
        if not version or "\n" in version:
            raise HarnessCapabilityError(ErrorKind.PARSE_FAILURE, "version")
        return version


class FakeModels:
    """Lists models by running ``fake-agent models``: one ``id<TAB>label`` per line."""

    cache_ttl = 3600.0
    fallback = (Model(id="fallback-1"),)

    def __init__(self, executable: str = "fake-agent") -> None:
        self.executable = executable

    async def discover(self, context: ModelsContext) -> tuple[Model, ...]:
        result = await context.executor.run(
            CommandRequest(command=self.executable, args=("models",))
        )
        result.require_success()
        models = []
        for line in result.stdout.splitlines():
            model_id, sep, label = line.partition("\t")
            if not sep or not model_id.strip() or "\0" in line:
                raise HarnessCapabilityError(ErrorKind.PARSE_FAILURE, "models")
            models.append(Model(id=model_id, label=label or None))
        return tuple(models)


GRID_TOKEN = "ab" * 32
"""The credential the plugins' ``grid`` fixture takes (tests/plugins/conftest.py); a
hook sends it as ``CLANKER_ATTENTION_TOKEN``."""

LOCAL_NATIVE = OperationSupport(Support.NATIVE, {Transport.LOCAL})


def make_plugin(
    harness: str = "fake-agent",
    *,
    capabilities: tuple[Capability, ...] = (Capability.LAUNCH, Capability.MODELS),
    executable: str = "fake-agent",
    fork: OperationSupport | None = LOCAL_NATIVE,
    implementations: Mapping[str, object] | None = None,
) -> object:
    """Return a plugin object implementing ``capabilities`` (launch and models at most),
    and each hook named in ``implementations`` (``{"accounts": provider}`` adds
    ``clanker_accounts``) returning the object given."""

    class Plugin:
        @hookimpl
        def clanker_descriptor(self) -> HarnessDescriptor:
            return HarnessDescriptor(
                id=HarnessId(harness),
                display_name="Fake Agent",
                executable=executable,
                resume=OperationSupport(Support.NATIVE)
                if Capability.LAUNCH in capabilities else None,
                fork=fork if Capability.LAUNCH in capabilities else None,
                install_hint="pip install fake-agent",
            )

    if Capability.LAUNCH in capabilities:
        Plugin.clanker_launch = hookimpl(lambda self: FakeLaunch(executable))  # type: ignore[attr-defined]
    if Capability.MODELS in capabilities:
        Plugin.clanker_models = hookimpl(lambda self: FakeModels(executable))  # type: ignore[attr-defined]
    for name, implementation in (implementations or {}).items():
        setattr(Plugin, f"clanker_{name}", hookimpl(_returning(implementation)))
    return Plugin()


def _returning(implementation: object) -> Callable[[object], object]:
    return lambda self: implementation


def fake_agent_registry(**implementations: object) -> Registry:
    """The registry of one plugin, ``fake-agent`` (:func:`make_plugin`, with these
    ``implementations``), loaded without a problem."""
    registry = Registry.from_plugins(
        {"fake-agent": make_plugin(implementations=implementations)}, environ={})
    assert not registry.problems, registry.problems
    return registry


def install_double(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str,
                   source: str) -> Path:
    """Put ``name``, a Python script of ``source``, in ``tmp_path/bin`` first on ``PATH``:
    its path."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    path = write_script(bin_dir, name, source)
    prepend_to_path(monkeypatch, bin_dir)
    return path


def install_fake_agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str) -> Path:
    """Put ``fake-agent``, a Python script of ``source``, first on ``PATH``: its path."""
    return install_double(tmp_path, monkeypatch, "fake-agent", source)


def git(cwd: Path | str, *args: str) -> str:
    """Run real git in ``cwd``: its output, stripped; a failure raises."""
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True, timeout=60).stdout.strip()


def committed_repository(repo: Path) -> Path:
    """A new git repository at ``repo`` on branch ``main`` with one commit of a README
    (the identity given on the command line, so no configuration is needed)."""
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "README").write_text("hello\n")
    git(repo, "add", "README")
    git(repo, "-c", "user.name=Fake Person", "-c", "user.email=fake@example.invalid",
        "commit", "-q", "-m", "first")
    return repo


def path_with(directory: Path) -> dict[str, str]:
    """An environment whose PATH finds ``directory`` first."""
    env = dict(os.environ)
    env["PATH"] = f"{directory}{os.pathsep}{env.get('PATH', '')}"
    return env


# -- a fake file-backed sessions provider ------------------------------------------------


class FakeSessions:
    """Sessions of ``fake-agent``: ``$FAKE_AGENT_HOME/sessions/<project>/<id>.jsonl``.

    Line 1 is ``{"type":"session","id","cwd","timestamp"}``; later lines are
    ``{"type":"message","role","text","timestamp"}``. ``parsed`` counts parses,
    ``walks`` the scans the memo did not answer.
    """

    def __init__(self, *, resumes_elsewhere: bool = False) -> None:
        self.resumes_without_original_directory = resumes_elsewhere
        self.parsed = 0
        self.walks = 0

    def store_roots(self, environ: Mapping[str, str], files: HostFiles) -> tuple[Path, ...]:
        return (Path(environ["FAKE_AGENT_HOME"]) / "sessions",)

    async def discover(self, context: SessionsContext) -> SessionScan:
        root = Path(context.environ["FAKE_AGENT_HOME"]) / "sessions"
        wanted = context.native_id

        def scan(witness: Witness) -> SessionScan:
            self.walks += 1
            candidates, cut = context.files.walk(
                root, depth=1, witness=witness,
                accept_file=lambda name: name.endswith(".jsonl")
                and (wanted is None or name == f"{wanted}.jsonl"),
            )
            return scan_files(context, candidates, self.summarize, cut=cut, witness=witness)

        return context.remember(root, scan)

    def summarize(self, sample: FileSample) -> HarnessSession | None:
        self.parsed += 1
        objects = list(sample.head_objects())
        if not objects or objects[0].get("type") != "session":
            return None
        header = objects[0]
        native_id, cwd = header.get("id"), header.get("cwd")
        created = parse_timestamp(header.get("timestamp"))
        if not isinstance(native_id, str) or not isinstance(cwd, str) or created is None:
            return None
        last = next((parse_timestamp(o.get("timestamp")) for o in sample.tail_objects()), None)
        first_user = next(
            (o.get("text") for o in objects[1:] if o.get("role") == "user"), None
        )
        return HarnessSession(
            harness=HarnessId("fake-agent"), native_id=native_id, cwd=cwd,
            created_at=created, updated_at=last or created, title=clean_text(first_user),
        )


def write_fake_session(
    home: Path, native_id: str, cwd: str, when: datetime, *, messages: int = 1,
    project: str = "p",
) -> Path:
    path = home / "sessions" / project / f"{native_id}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [{"type": "session", "id": native_id, "cwd": cwd, "timestamp": when.isoformat()}]
    lines += [
        {"type": "message", "role": "user", "text": f"task {native_id} #{i}",
         "timestamp": when.isoformat()}
        for i in range(messages)
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def make_sessions_plugin(sessions: FakeSessions, harness: str = "fake-agent") -> object:
    """The fake plugin with launch, models and the given sessions capability."""
    plugin = make_plugin(
        harness, capabilities=(Capability.LAUNCH, Capability.MODELS),
    )
    type(plugin).clanker_sessions = hookimpl(lambda self: sessions)  # type: ignore[attr-defined]
    return plugin


# -- a fake commit capability -------------------------------------------------------------


class FakeCommit:
    """``fake-agent write-commit [--model M]``, prompt on stdin, answers one JSON line
    ``{"status": "completed", "message": ...}`` (a test double's protocol)."""

    def build_invocation(self, model: str | None, prompt: str) -> CommandRequest:
        args = ("write-commit", *(("--model", model) if model else ()))
        return CommandRequest(command="fake-agent", args=args, stdin=prompt.encode(),
                              timeout=90, inference=True)

    def parse_output(self, result: CommandResult) -> str:
        if result.exit_code != 0:
            raise HarnessCapabilityError(ErrorKind.COMMAND_FAILED, f"exit {result.exit_code}")
        try:
            answer = json.loads(result.stdout)
        except ValueError:
            raise HarnessCapabilityError(ErrorKind.PARSE_FAILURE, "not JSON") from None
        if not isinstance(answer, dict) or answer.get("status") != "completed":
            raise HarnessCapabilityError(ErrorKind.PARSE_FAILURE, "incomplete")
        message = answer.get("message")
        if not isinstance(message, str):
            raise HarnessCapabilityError(ErrorKind.PARSE_FAILURE, "no message")
        return message


def make_commit_plugin() -> object:
    plugin = make_plugin(
        capabilities=(Capability.LAUNCH, Capability.MODELS),
    )
    type(plugin).clanker_commit = hookimpl(lambda self: FakeCommit())  # type: ignore[attr-defined]
    return plugin


# -- a fake usage capability ------------------------------------------------------------


class FakeUsage:
    """A probe whose outcomes a test scripts: a snapshot, or an error to raise."""

    def __init__(self, policy: RefreshPolicy | None = None) -> None:
        self.policy = policy or RefreshPolicy()
        self.outcomes: list[UsageSnapshot | HarnessCapabilityError] = []
        self.calls = 0
        self.delay = 0.0

    async def probe(self, context: UsageContext) -> UsageSnapshot:
        import asyncio

        self.calls += 1
        if self.delay:
            await asyncio.sleep(self.delay)
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, HarnessCapabilityError):
            raise outcome
        return outcome


def percent_snapshot(used: float, when: datetime, label: str = "Fake · 5 hour") -> UsageSnapshot:
    return UsageSnapshot(observed_at=when, measurements=(Measurement(
        kind=MeasurementKind.RATE_LIMIT, unit="percent", label=label,
        scope=Scope(provider_id="fake-provider"), used=used, remaining=100 - used, limit=100,
    ),))


def make_usage_plugin(usage: FakeUsage, harness: str = "fake-agent") -> object:
    plugin = make_plugin(
        harness, capabilities=(Capability.LAUNCH, Capability.MODELS),
    )
    type(plugin).clanker_usage = hookimpl(lambda self: usage)  # type: ignore[attr-defined]
    return plugin


# The body of a hooked-harness double (see write_hooked_double); LOCATOR defines
# hook_commands(argv) -> {event name: shell command}, the harness's own wiring.
_HOOKED_DOUBLE = """
import json, os, subprocess, sys

LOCATOR

commands = hook_commands(sys.argv[1:])
payloads = json.loads(open(os.environ["HOOKED_DOUBLE_PAYLOADS"]).read())
terminal = os.environ.get("CLANKER_ATTENTION_TERMINAL")
observed = []
for payload in payloads:
    command = commands.get(payload["hook_event_name"])
    stdout = None
    if command is not None:
        fired = subprocess.run(["/bin/sh", "-c", command], input=json.dumps(payload).encode(),
                               capture_output=True, timeout=30)
        stdout = fired.stdout.decode()
    status = subprocess.run([sys.executable, "-m", "clanker.cli", "status", "--json"],
                            capture_output=True, text=True, timeout=60, check=True)
    rows = [row for row in json.loads(status.stdout) if row["terminal"] == terminal]
    observed.append({"event": payload["hook_event_name"], "hooked": command is not None,
                     "stdout": stdout, "attention": rows[0]["attention"] if rows else None,
                     "location": rows[0]["location"] if rows else None})
with open(os.environ["HOOKED_DOUBLE_RECORD"], "w") as f:
    json.dump({"argv": sys.argv[1:], "terminal": terminal, "observed": observed}, f)
"""


def write_hooked_double(directory: Path, name: str, locator: str) -> Path:
    """A harness double that fires its hooks the way the harness does, for end-to-end
    attention tests.

    ``locator`` is Python source defining ``hook_commands(argv)``: how the real
    harness finds its hook commands in its argv (Codex: ``-c hooks.<Event>=``
    TOML; Claude Code: the ``--settings`` file). The double then feeds each
    payload of the JSON list in ``$HOOKED_DOUBLE_PAYLOADS`` (captured from the
    real CLI) on stdin to the command registered for its ``hook_event_name``,
    run through ``/bin/sh -c`` as both harnesses do, and after each one records
    what ``clanker status --json`` says of its own terminal into
    ``$HOOKED_DOUBLE_RECORD``.
    """
    return write_script(directory, name, _HOOKED_DOUBLE.replace("LOCATOR", locator))


def launch_hooked(
    tmp_path: Path,
    harness: str,
    locator: str,
    payloads: list[object],
    *flags: str,
    env: Mapping[str, str] | None = None,
) -> tuple[dict[str, object], list[dict[str, object]]]:
    """Run ``clanker launch HARNESS FLAGS...`` (a real process) over a hooked double
    (:func:`write_hooked_double`) that fires ``payloads``; return the double's record
    and what ``clanker status --json`` says once the launch has exited."""
    import subprocess
    import sys

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    write_hooked_double(bin_dir, harness, locator)
    project = tmp_path / "project"
    project.mkdir()
    (tmp_path / "payloads.json").write_text(json.dumps(payloads))
    record = tmp_path / "record.json"
    environment = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "HOOKED_DOUBLE_PAYLOADS": str(tmp_path / "payloads.json"),
        "HOOKED_DOUBLE_RECORD": str(record),
        **(env or {}),
    }
    cli = [sys.executable, "-m", "clanker.cli"]
    result = subprocess.run([*cli, "launch", harness, *flags], cwd=project, env=environment,
                            capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    after = subprocess.run([*cli, "status", "--json"], env=environment, capture_output=True,
                           text=True, timeout=60, check=True)
    return json.loads(record.read_text()), json.loads(after.stdout)


# -- a grid killed outright ----------------------------------------------------------------


def kill_grid(socket: Path | str) -> None:
    """SIGKILL the grid daemon answering on ``socket`` (nothing of it runs its shutdown)
    and wait, bounded, until the kernel has released its lock: the next launch starts
    a new one."""
    import signal
    import threading

    from clanker.grid.client import GridClient
    from clanker.grid.daemon import _lock_held, grid_location

    os.kill(GridClient(socket).hello().pid, signal.SIGKILL)
    lock = grid_location().lock
    for _ in range(1200):
        if not _lock_held(lock):
            return
        threading.Event().wait(0.05)
    raise AssertionError("the killed grid still holds its lock")


# -- what Codex's captured attention payloads mean --------------------------------------

# (event, attention) after each hook of tests/fixtures/codex/attention/live-app-server.json,
# wherever a launch delivers them (this machine's hook bridge, or a host's terminal).
CODEX_LIVE_APP_SERVER_ATTENTION = [
    ("SessionStart", "idle"),
    ("UserPromptSubmit", "working"),
    ("PreToolUse", "working"),
    ("PreToolUse", "working"),
    ("PermissionRequest", "needs-input"),
    ("PermissionRequest", "needs-input"),
    # The accepted call finished; its declined twin never will: the wait holds.
    ("PostToolUse", "needs-input"),
    ("PreToolUse", "needs-input"),
    ("PostToolUse", "needs-input"),
    ("Stop", "done"),
    ("UserPromptSubmit", "working"),
    ("PreToolUse", "working"),
    ("Interrupt", "idle"),
    ("SessionEnd", "unknown"),
]


# -- the CLI on a terminal of its own, reading a given OpenSSH configuration --------------

# The CLI, its library reading the test sshd's OpenSSH configuration (ssh -F) the
# way a person's ~/.ssh/config is read (ssh takes that from the password database).
_CLI_WITH_SSH_CONFIG = """
import sys
from clanker.api import Clanker
import clanker.cli.common, clanker.cli.launch
from clanker.cli import cli
config = sys.argv[1]
clanker.cli.common.library = clanker.cli.launch.library = (
    lambda: Clanker(ssh_config_file=config))
sys.argv = ["clanker", *sys.argv[2:]]
cli()
"""


def run_on_terminal(argv: list[str], env: Mapping[str, str],
                    on_output: Callable[[bytes], bytes]) -> int:
    """Run ``argv`` with a pseudo-terminal of its own as its stdio and return its exit
    status. Each chunk it writes goes to ``on_output``, whose answer is typed back. A
    terminal silent for 60 s is killed; so is the child's process group when
    ``on_output`` raises (an assertion in a step, say), or pytest would wait on it."""
    leader, follower = pty.openpty()
    child = subprocess.Popen(argv, stdin=follower, stdout=follower, stderr=follower,
                             env=dict(env), close_fds=True, start_new_session=True)
    os.close(follower)
    try:
        while True:
            ready, _, _ = select.select([leader], [], [], 60)
            if not ready:
                child.kill()
                break
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # EIO: every end of the terminal is closed
                break
            if not chunk:
                break
            answer = on_output(chunk)
            if answer:
                os.write(leader, answer)
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        child.wait(timeout=60)
        raise
    finally:
        os.close(leader)
    return child.wait(timeout=60)


def cli_on_terminal(config: Path, args: list[str],
                    on_fired: Callable[[str], None] | None = None,
                    env: Mapping[str, str] | None = None) -> tuple[int, str]:
    """Run ``clanker ARGS`` with a pseudo-terminal as its stdio and ``config`` as its
    OpenSSH configuration; return its exit status and everything it showed (carriage
    returns dropped). With ``on_fired``, each line ``fired <label>`` a double prints is
    answered by calling ``on_fired(label)`` and then typing a newline. ``env`` defaults
    to this process's with ``TERM=xterm``; a terminal silent for 60 s is killed."""
    out = bytearray()
    handled = 0

    def answer(chunk: bytes) -> bytes:
        nonlocal handled
        out.extend(chunk)
        if on_fired is None:
            return b""
        lines = out.decode("utf-8", "replace").replace("\r", "").split("\n")
        fired = [line[len("fired "):] for line in lines[:-1] if line.startswith("fired ")]
        for label in fired[handled:]:
            on_fired(label)
        typed = b"\n" * (len(fired) - handled)
        handled = len(fired)
        return typed

    status = run_on_terminal(
        [sys.executable, "-c", _CLI_WITH_SSH_CONFIG, str(config), *args],
        {**os.environ, "TERM": "xterm"} if env is None else env, answer)
    return status, out.decode("utf-8", "replace").replace("\r", "")
