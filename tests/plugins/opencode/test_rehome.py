"""OpenCode's rehome declaration: after the turn, its own move-session relocation, then
the ordinary ``--session`` resume (the recorded directory decides). The relocation is
run against the real opencode (1.18.33) offline: a session made through its server's
``POST /session`` (no model call) in a real repository is moved to a worktree of it
and read back, and a directory of another project is refused with nothing changed."""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import clanker_opencode
from clanker.checkouts.capability import (
    NO_RETRY,
    CheckoutRehomeCapability,
    RehomeStrategy,
    contention_retry_of,
    relocation_of,
)
from clanker.checkouts.rehome import rehome_request
from clanker.checkouts.relocation import RelocationRefused, relocate
from clanker.launch.planning import plan_launch
from clanker.launch.relayed import hot_replaced, movable
from clanker.launch.request import SessionTarget
from clanker.registry import Registry
from clanker_opencode.rehome import MOVE_SESSION, OpenCodeRehome
from tests.core.bridge.conftest import home  # noqa: F401  (the fixture)
from tests.core.bridge.test_launch import fake_bin  # noqa: F401  (the fixture)
from tests.plugins.codex.test_rehome import launched_capabilities

SESSION = "ses_dd477e2caffeRx4w8c0S7Feig0"
TARGET = "/srv/proj-worktrees/feature-x-0123456789ab"


def provider() -> Any:
    return Registry.from_plugins({"opencode": clanker_opencode.plugin},
                                 environ={}).get_provider("opencode")


def test_opencode_declares_an_after_turn_move_with_its_own_relocation() -> None:
    rehome = provider().checkout_rehome
    assert isinstance(rehome, CheckoutRehomeCapability)
    assert rehome.strategy is RehomeStrategy.AFTER_TURN
    assert contention_retry_of(rehome) is NO_RETRY
    assert not rehome.is_transient_contention("database is locked")


def test_a_resume_may_take_as_long_as_opencode_takes_to_draw() -> None:
    from clanker.checkouts.capability import first_output_within_of, observation_window_of

    assert first_output_within_of(OpenCodeRehome()) == 45.0
    # An unknown session prints its error and exits at once: the default window holds.
    assert observation_window_of(OpenCodeRehome()) is None

    class Wrong(OpenCodeRehome):
        first_output_within = 61

    with pytest.raises(ValueError, match="first_output_within"):
        first_output_within_of(Wrong())


def test_the_relocation_is_the_captured_move_session() -> None:
    request = relocation_of(OpenCodeRehome(), SESSION, TARGET)
    assert request is not None
    assert request.argv == ("opencode", "serve")
    assert (request.host_flag, request.port_flag) == ("--hostname", "--port")
    assert (request.password_variable, request.username) == ("OPENCODE_SERVER_PASSWORD",
                                                             "opencode")
    assert request.path == MOVE_SESSION == "/experimental/control-plane/move-session"
    # Never moveChanges: no file of the person's is touched.
    assert json.loads(request.body) == {"sessionID": SESSION,
                                        "destination": {"directory": TARGET}}
    assert request.success == frozenset({204})


def test_the_resume_after_the_relocation_is_the_ordinary_one() -> None:
    found = provider()
    request = rehome_request(found.checkout_rehome, SessionTarget(native_id=SESSION), TARGET,
                             ("--model", "loop/m1"))
    assert request.user_flags == ("--model", "loop/m1") and request.cwd == TARGET
    assert SESSION in plan_launch(found, request).argv


@pytest.mark.usefixtures("home", "fake_bin")
def test_opencode_is_granted_the_checkout_tools(tmp_path: Path) -> None:
    from clanker.bridge.isolated import CHECKOUT_NAMES

    assert movable(provider()) and not hot_replaced(provider())
    granted = launched_capabilities(OpenCodeRehome(), tmp_path)
    assert "clanker_context" in granted
    assert set(CHECKOUT_NAMES) <= set(granted)


# The real opencode, offline.

def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True, timeout=60)


@pytest.fixture
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A throwaway home for opencode (its store, config and cache), git's identity."""
    user = tmp_path / "home"
    for name, sub in (("HOME", ""), ("XDG_CONFIG_HOME", ".config"),
                      ("XDG_DATA_HOME", ".local/share"), ("XDG_STATE_HOME", ".local/state"),
                      ("XDG_CACHE_HOME", ".cache")):
        (user / sub).mkdir(parents=True, exist_ok=True)
        monkeypatch.setenv(name, str(user / sub))
    for name in [k for k in os.environ if k.startswith("OPENCODE_")]:
        monkeypatch.delenv(name)
    for name, value in (("GIT_CONFIG_NOSYSTEM", "1"), ("GIT_CONFIG_GLOBAL", str(user / ".gc")),
                        ("GIT_AUTHOR_NAME", "Test"), ("GIT_AUTHOR_EMAIL", "t@example.invalid"),
                        ("GIT_COMMITTER_NAME", "Test"),
                        ("GIT_COMMITTER_EMAIL", "t@example.invalid"),
                        ("OPENCODE_DISABLE_AUTOUPDATE", "1"),
                        ("OPENCODE_DISABLE_MODELS_FETCH", "1")):
        monkeypatch.setenv(name, value)
    return user


@contextlib.contextmanager
def _opencode_server(cwd: Path) -> Iterator[Any]:
    """The test's own ``opencode serve``, to make and read sessions as a client would."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    password = secrets.token_urlsafe(24)
    auth = "Basic " + base64.b64encode(f"opencode:{password}".encode()).decode()
    process = subprocess.Popen(
        ["opencode", "serve", "--hostname", "127.0.0.1", "--port", str(port)], cwd=cwd,
        env={**os.environ, "OPENCODE_SERVER_PASSWORD": password},
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True)

    def ask(method: str, path: str, body: object = None) -> tuple[int, Any]:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        try:
            connection.request(method, path, json.dumps(body) if body is not None else None,
                               {"Authorization": auth, "Content-Type": "application/json"})
            answer = connection.getresponse()
            data = answer.read()
            return answer.status, json.loads(data) if data else None
        finally:
            connection.close()

    try:
        deadline = time.monotonic() + 90
        while True:
            assert process.poll() is None, "opencode serve exited"
            try:
                if ask("GET", "/session")[0] == 200:
                    break
            except OSError:
                assert time.monotonic() < deadline, "opencode serve never answered"
                time.sleep(0.2)
        yield ask
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)


@pytest.mark.real_cli
@pytest.mark.skipif(shutil.which("opencode") is None, reason="opencode is not installed")
def test_real_opencode_moves_the_session_to_a_worktree_and_refuses_another_project(
        sandbox: Path, tmp_path: Path) -> None:
    repo = tmp_path / "mes dépôts" / "proj"
    repo.mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    (repo / "README").write_text("hello\n")
    _git(repo, "add", "README")
    _git(repo, "commit", "-q", "-m", "first")
    worktree = tmp_path / "mes dépôts" / "proj-worktrees" / "feature-x-0123456789ab"
    _git(repo, "worktree", "add", "-q", "-b", "feature/x", str(worktree))
    other = tmp_path / "other"
    other.mkdir()
    _git(other, "init", "-q", "-b", "main")
    (other / "f").write_text("x\n")
    _git(other, "add", "f")
    _git(other, "commit", "-q", "-m", "other")

    with _opencode_server(repo) as ask:
        status, made = ask("POST", "/session", {"title": "probe"})
        assert status == 200 and made["directory"] == str(repo)
    session = made["id"]
    rehome = OpenCodeRehome()

    moved = relocation_of(rehome, session, str(worktree))
    assert moved is not None
    relocate(moved, cwd=str(repo), ready_timeout=90)
    with _opencode_server(repo) as ask:
        status, found = ask("GET", f"/session/{session}")
    assert status == 200 and found["directory"] == str(worktree)

    refused = relocation_of(rehome, session, str(other))
    assert refused is not None
    with pytest.raises(RelocationRefused) as why:
        relocate(refused, cwd=str(worktree), ready_timeout=90)
    assert why.value.status == 400
    assert why.value.message == "Destination directory belongs to another project"
    with _opencode_server(repo) as ask:
        status, found = ask("GET", f"/session/{session}")
    assert status == 200 and found["directory"] == str(worktree)  # nothing changed
