"""The launch attachment against a real grid daemon and the real hook bridge."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from clanker.attention.capability import AttachmentContext, AttachmentPlan, Declined
from clanker.environment.local import LocalFiles
from clanker.grid.client import GridClient
from clanker.grid.daemon import grid_location
from clanker.launch.attachments import LaunchState, prepare_attachments
from clanker.launch.attention import HOOK_SCRIPT, LAUNCHER_FILE, AttentionAttachment
from clanker.paths import clanker_paths
from clanker.testing.doubles import run_locally

# A stand-in provider interpreter: {"start"|"stop": turn} for one session.
INTERPRETER = """
def interpret(payload, state):
    if not isinstance(payload, dict):
        return [], state
    event = {"start": "turn_started", "stop": "turn_completed"}.get(payload.get("do"))
    if event is None:
        return [], state
    envelope = {"event": event, "scope": "root", "sessionId": "s-1",
                "turnId": payload.get("turn"), "nativeEvent": payload["do"]}
    return [envelope], {"turns": state.get("turns", 0) + 1}
"""


class FakeCapability:
    """An attention capability whose ``prepare`` records what it was handed."""

    resume_preserves_session_id = True

    def __init__(self, interpreter: Path | None, answer: str = "plan") -> None:
        self.interpreter = interpreter
        self.answer = answer
        self.contexts: list[AttachmentContext] = []

    def prepare(self, context: AttachmentContext) -> AttachmentPlan | Declined:
        self.contexts.append(context)
        if self.answer == "conflict":
            return Declined(reason="--own-settings owns the hooks; launch without it")
        if self.answer == "raise":
            raise OSError("the provider could not write its files")
        return AttachmentPlan(argv=(*context.argv, "--hooked"), env={"PROVIDER_VAR": "1"})


@pytest.fixture
def interpreter(tmp_path: Path) -> Path:
    path = tmp_path / "interpreter.py"
    path.write_text(INTERPRETER)
    return path


def _client() -> GridClient:
    return GridClient(grid_location(clanker_paths()).socket)


def _terminals() -> list[str]:
    return [entry.terminal for entry in _client().list_terminals()]


def _base(tmp_path: Path) -> LaunchState:
    return LaunchState(argv=("harness", "--flag"), env={"PATH": os.environ["PATH"]})


def _run_hook(
    env: dict[str, str], payload: dict[str, Any], command: list[str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command or [env["CLANKER_ATTENTION_COMMAND"]], input=json.dumps(payload),
                          env=env, capture_output=True, text=True, timeout=30, check=False)


def _attach(capability: FakeCapability, directory: Path, **options: Any) -> AttentionAttachment:
    return AttentionAttachment("zed", capability, cwd=str(directory), files=LocalFiles(),
                               run=run_locally, **options)


def test_attaches_registers_and_releases(tmp_path: Path, interpreter: Path) -> None:
    capability = FakeCapability(interpreter)
    step = _attach(capability, tmp_path, user_flags=("--flag",))
    attachments = prepare_attachments(_base(tmp_path), [step])

    state = attachments.state
    assert state.argv == ("harness", "--flag", "--hooked")
    env = dict(state.env)
    assert env["PROVIDER_VAR"] == "1"
    assert len(env["CLANKER_ATTENTION_TOKEN"]) == 64
    assert env["CLANKER_ATTENTION_INTERPRETER"] == str(interpreter)
    (context,) = capability.contexts
    assert context.user_flags == ("--flag",)
    assert context.env["CLANKER_ATTENTION_TERMINAL"] == env["CLANKER_ATTENTION_TERMINAL"]
    private = context.private_dir
    assert stat.S_IMODE(private.stat().st_mode) == 0o700
    assert stat.S_IMODE(Path(env["CLANKER_ATTENTION_STATE"]).stat().st_mode) == 0o700
    assert os.access(env["CLANKER_ATTENTION_COMMAND"], os.X_OK)
    assert env["CLANKER_ATTENTION_TERMINAL"] in _terminals()

    attachments.dispose()
    attachments.dispose()  # idempotent
    assert env["CLANKER_ATTENTION_TERMINAL"] not in _terminals()
    assert not private.exists()


def test_the_hook_command_reaches_the_broker(tmp_path: Path, interpreter: Path) -> None:
    step = _attach(FakeCapability(interpreter), tmp_path)
    attachments = prepare_attachments(_base(tmp_path), [step])
    env = {**os.environ, **attachments.state.env}
    terminal = env["CLANKER_ATTENTION_TERMINAL"]
    try:
        assert _run_hook(env, {"do": "start", "turn": "t1"}).returncode == 0
        (entry,) = [e for e in _client().list_terminals() if e.terminal == terminal]
        assert entry.attention == "working"
        assert _run_hook(env, {"do": "stop", "turn": "t1"}).returncode == 0
        (entry,) = [e for e in _client().list_terminals() if e.terminal == terminal]
        assert entry.attention == "done"
        # The bridge kept the interpreter's state in the launch's private directory.
        saved = json.loads((Path(env["CLANKER_ATTENTION_STATE"]) / "state.json").read_text())
        assert saved == {"turns": 2}
    finally:
        attachments.dispose()
    # A retired terminal's credential is revoked: a bridge that kept it delivers nothing.
    state = tmp_path / "kept-state"
    state.mkdir(mode=0o700)
    env["CLANKER_ATTENTION_STATE"] = str(state)
    bridge = [sys.executable, "-I", "-S", str(HOOK_SCRIPT)]
    assert _run_hook(env, {"do": "start", "turn": "t2"}, bridge).returncode == 0
    assert terminal not in _terminals()
    assert (state / "poison").exists()  # the refused delivery failed the transaction


def test_a_configuration_conflict_leaves_an_ordinary_launch_listed_without_attention(
    tmp_path: Path, interpreter: Path
) -> None:
    capability = FakeCapability(interpreter, answer="conflict")
    step = _attach(capability, tmp_path)
    attachments = prepare_attachments(_base(tmp_path), [step])
    # The harness runs as it would without clanker: no argv, no credential added.
    assert attachments.state == _base(tmp_path)
    assert attachments.failed_optional == ()
    assert attachments.notices == ("attention: --own-settings owns the hooks; launch without it",)
    [entry] = _client().list_terminals()
    assert entry.attention == "unavailable"
    assert entry.unavailable == "--own-settings owns the hooks; launch without it"
    attachments.dispose()
    assert _terminals() == []
    assert not capability.contexts[0].private_dir.exists()


def test_a_failing_provider_is_an_optional_failure_that_releases_everything(
    tmp_path: Path, interpreter: Path
) -> None:
    capability = FakeCapability(interpreter, answer="raise")
    reports: list[tuple[str, str]] = []
    step = _attach(capability, tmp_path)
    attachments = prepare_attachments(
        _base(tmp_path), [step], report=lambda name, phase: reports.append((name, phase)))
    assert reports == [("attention", "prepare")]
    assert attachments.state == _base(tmp_path)
    assert _terminals() == []
    assert not capability.contexts[0].private_dir.exists()


@pytest.mark.parametrize("preserves", [True, False])
def test_a_trusted_resume_id_binds_only_where_resume_keeps_it(
    tmp_path: Path, interpreter: Path, preserves: bool
) -> None:
    capability = FakeCapability(interpreter)
    capability.resume_preserves_session_id = preserves
    step = _attach(capability, tmp_path,
                               trusted_root_session_id="s-trusted")
    attachments = prepare_attachments(_base(tmp_path), [step])
    try:
        (entry,) = _client().list_terminals()
        snapshot = entry.revision["snapshot"]
        bound = json.dumps(snapshot)
        assert ("s-trusted" in bound) is preserves
    finally:
        attachments.dispose()


def test_a_grid_that_cannot_run_is_an_optional_failure(
    tmp_path: Path, interpreter: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A socket path longer than a Unix socket can have: the grid cannot start.
    monkeypatch.setenv("CLANKER_HOME", str(tmp_path / ("x" * 120)))
    capability = FakeCapability(interpreter)
    reports: list[tuple[str, str]] = []
    attachments = prepare_attachments(
        _base(tmp_path), [_attach(capability, tmp_path)],
        report=lambda name, phase: reports.append((name, phase)))
    assert reports == [("attention", "prepare")]
    assert attachments.state == _base(tmp_path)
    assert capability.contexts == []


class InvalidPlan(FakeCapability):
    """A provider whose plan the launch refuses (an empty argv)."""

    def prepare(self, context: AttachmentContext) -> AttachmentPlan | None:
        self.contexts.append(context)
        return AttachmentPlan(argv=())


def test_a_plan_the_launch_refuses_releases_everything(tmp_path: Path, interpreter: Path) -> None:
    capability = InvalidPlan(interpreter)
    reports: list[tuple[str, str]] = []
    attachments = prepare_attachments(
        _base(tmp_path), [_attach(capability, tmp_path)],
        report=lambda name, phase: reports.append((name, phase)))
    assert reports == [("attention", "prepare")]
    assert attachments.state == _base(tmp_path)
    assert _terminals() == []
    assert not capability.contexts[0].private_dir.exists()


def test_launch_directories_of_dead_launchers_are_swept(tmp_path: Path, interpreter: Path) -> None:
    launches = clanker_paths().runtime / "launches"
    launches.mkdir(parents=True, mode=0o700)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    orphan, mine, unknown = launches / "zed-orphan", launches / "zed-live", launches / "zed-new"
    for directory, pid in ((orphan, dead.stdout.strip()), (mine, str(os.getpid())),
                           (unknown, None)):
        directory.mkdir()
        if pid is not None:
            (directory / LAUNCHER_FILE).write_text(pid)
    step = _attach(FakeCapability(interpreter), tmp_path)
    attachments = prepare_attachments(_base(tmp_path), [step])
    try:
        assert not orphan.exists()
        assert mine.exists() and unknown.exists()  # alive, or not ours to judge
    finally:
        attachments.dispose()


def test_a_launch_directory_that_is_not_private_is_refused(
    tmp_path: Path, interpreter: Path
) -> None:
    launches = clanker_paths().runtime / "launches"
    launches.mkdir(parents=True)
    launches.chmod(0o777)
    capability = FakeCapability(interpreter)
    reports: list[tuple[str, str]] = []
    step = _attach(capability, tmp_path)
    prepare_attachments(_base(tmp_path), [step],
                        report=lambda name, phase: reports.append((name, phase)))
    assert reports == [("attention", "prepare")]
    assert capability.contexts == [] and list(launches.iterdir()) == []
