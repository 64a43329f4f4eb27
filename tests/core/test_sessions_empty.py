"""``clanker sessions`` when nothing could be in it: the answer without a scan is the scan's.

Each example lays out the installed plugins' stores (each root absent, an empty
directory, or a directory with something in it) and OpenCode's executable
(absent, a file that cannot run, a script that fails) and each store variable
(unset, absent, present, relative), then runs the real CLI
twice: as it is, and with every answer without an event loop refused, so the
service scans with its loop. The
two outputs, JSON and text, stdout and stderr, must be the same bytes, and the
no-scan answer must be given exactly when every chosen store is empty and no
chosen provider's listing command is installed.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from hypothesis import event, given, settings
from hypothesis import strategies as st

from clanker.api import Clanker
from clanker.cli import cli

_ROOT_STATES = ("absent", "empty", "subdirectory", "file")
_VARIABLES = ("CODEX_HOME", "CLAUDE_CONFIG_DIR", "PI_CODING_AGENT_DIR", "XDG_DATA_HOME",
              "HERMES_HOME")


def _invoke(argv: list[str]) -> Result:
    return CliRunner().invoke(cli, argv, catch_exceptions=False)


def _lay_out(base: Path, data: st.DataObject, monkeypatch: pytest.MonkeyPatch
             ) -> tuple[bool, list[str]]:
    """Set this example's environment and stores; whether every store is empty, and
    the executables on PATH."""
    home = base / "home"
    home.mkdir()
    bin_dir = base / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(base / "run"))
    for name in _VARIABLES:
        choice = data.draw(st.sampled_from(["unset", "absent", "present", "relative"]),
                           label=name)
        if choice == "unset":
            monkeypatch.delenv(name, raising=False)
            continue
        if choice == "relative":  # relative to a directory only the harness knows
            monkeypatch.setenv(name, "relative/store")
            continue
        monkeypatch.setenv(name, str(base / name.lower()))
        if choice == "present":
            (base / name.lower()).mkdir()
    clanker = Clanker()
    environment = clanker.environment
    roots = sorted({os.fspath(root) for provider in clanker.harnesses()
                    if provider.sessions is not None
                    for root in provider.sessions.store_roots(environment.environ,
                                                              environment.files)})
    empty = True
    # Half the examples keep every store empty: those the answer without a scan is for.
    states = _ROOT_STATES[:2] if data.draw(st.booleans(), label="nothing") else _ROOT_STATES
    for root in roots:
        state = data.draw(st.sampled_from(states), label=root)
        path = Path(root)
        if state == "absent":
            continue  # (a variable's directory may hold it: then it is made below)
        path.mkdir(parents=True, exist_ok=True)
        if state == "subdirectory":
            (path / "project").mkdir()
        elif state == "file":
            (path / "notes.txt").write_text("not a session\n")
        empty = empty and state == "empty"
    for root in roots:  # one root can lie under another (a store in its home)
        found = Path(root)
        if found.is_dir() and any(found.iterdir()):
            empty = False
    opencode = data.draw(st.sampled_from(["absent", "not executable", "failing"]),
                         label="opencode")
    if opencode != "absent":
        script = bin_dir / "opencode"
        script.write_text("#!/bin/sh\necho 'no store here' >&2\nexit 1\n")
        script.chmod(0o755 if opencode == "failing" else 0o644)
    return empty, (["opencode"] if opencode == "failing" else [])


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_the_answer_without_a_scan_is_the_scans(data: st.DataObject,
                                                tmp_path_factory: pytest.TempPathFactory
                                                ) -> None:
    base = tmp_path_factory.mktemp("stores")
    with pytest.MonkeyPatch.context() as monkeypatch:
        empty, installed = _lay_out(base, data, monkeypatch)
        work = base / "work"
        work.mkdir()
        monkeypatch.chdir(work)
        chosen = data.draw(st.lists(st.sampled_from(["claude", "codex", "opencode", "pi",
                                                     "omp", "hermes", "agy"]),
                                    unique=True, max_size=3), label="harnesses")
        argv = ["sessions", *data.draw(st.sampled_from([[], ["--all"],
                                                        ["--workspace", str(work)]]),
                                       label="where")]
        argv += [arg for harness in chosen for arg in ("--harness", harness)]
        if data.draw(st.booleans(), label="json"):
            argv.append("--json")

        answered = Clanker().empty_sessions(workspace=str(work), harnesses=chosen or None)
        runs_a_command = "opencode" in installed and (not chosen or "opencode" in chosen)
        # Only stores of the chosen harnesses matter; with all of them chosen, exactly:
        if not chosen:
            assert (answered is not None) == (empty and not runs_a_command)
        elif not empty or runs_a_command:
            pass  # an unchosen store or command may be the one with something in it
        else:
            assert answered is not None

        event("answered without a scan" if answered is not None else "scanned")
        fast = _invoke(argv)
        monkeypatch.setattr(Clanker, "sessions_now", lambda self, **_: None)
        scanned = _invoke(argv)
    assert (fast.exit_code, fast.stdout, fast.stderr) == (
        scanned.exit_code, scanned.stdout, scanned.stderr)


def test_an_accounts_file_or_a_grid_socket_leaves_it_to_the_service(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Each store is empty; what else could answer (a managed account's home, a running
    # grid's index) is the service's to read.
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    for name in _VARIABLES:
        monkeypatch.delenv(name, raising=False)
    clanker = Clanker()
    assert clanker.empty_sessions(workspace=None) is not None
    clanker.paths.state.mkdir(parents=True, exist_ok=True)
    accounts = clanker.paths.state / "accounts.json"
    accounts.write_text("{}")
    assert Clanker().empty_sessions(workspace=None) is None
    accounts.unlink()
    socket = clanker.paths.grid_socket
    socket.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    socket.parent.chmod(0o700)
    socket.write_text("")
    try:
        assert Clanker().empty_sessions(workspace=None) is None
    finally:
        socket.unlink()


def test_a_linked_root_leaves_it_to_the_service(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    # A walk does not follow links: what the scan makes of one is its own to say.
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    for name in _VARIABLES:
        monkeypatch.delenv(name, raising=False)
    target = tmp_path / "elsewhere"
    target.mkdir()
    (tmp_path / "home" / ".codex").mkdir(parents=True)
    (tmp_path / "home" / ".codex" / "sessions").symlink_to(target)
    assert Clanker().empty_sessions(workspace=None, harnesses=["codex"]) is None
    assert Clanker().empty_sessions(workspace=None, harnesses=["claude"]) is not None


def test_a_store_that_cannot_be_found_is_its_providers_own_answer(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A relative CODEX_HOME names no root (it is relative to Codex's own directory):
    # Codex's scan is empty, not a missing command's failure, and a relative
    # HERMES_HOME is Hermes's own typed refusal, as the service reports them.
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    for name in _VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CODEX_HOME", "relative/codex")
    monkeypatch.setenv("HERMES_HOME", "relative/hermes")
    # OpenCode not installed, but its data directory there: a listing it cannot run.
    (tmp_path / "home" / ".local" / "share" / "opencode").mkdir(parents=True)
    listing = Clanker().empty_sessions(workspace=None,
                                       harnesses=["codex", "hermes", "opencode"])
    assert listing is not None
    errors = {scan.harness: scan.scan.error for scan in listing.scans}
    assert errors["codex"] is None
    assert errors["hermes"] is not None and errors["hermes"].kind.value == "not-configured"
    assert errors["opencode"] is not None
    assert errors["opencode"].kind.value == "binary-unavailable"
    fast = _invoke(["sessions", "--all", "--json", "--harness", "codex", "--harness", "hermes",
                    "--harness", "opencode"])
    monkeypatch.setattr(Clanker, "sessions_now", lambda self, **_: None)
    scanned = _invoke(["sessions", "--all", "--json", "--harness", "codex", "--harness",
                       "hermes", "--harness", "opencode"])
    assert (fast.exit_code, fast.stdout, fast.stderr) == (
        scanned.exit_code, scanned.stdout, scanned.stderr)
