"""A listing without an event loop (``Clanker.sessions_now``) is the event loop's listing.

Each example lays the captured stores of Codex, Claude Code, Pi and Oh My Pi out
in a home of its own (a random part of their files, perhaps with a file that is
no session, an empty one and a cut copy), then lists them both ways: on this
thread, and through :meth:`Clanker.sessions` with its event loop. The two
listings (and the CLI's output over them) must be equal, and the answer without
a loop must be given whenever nothing needs one: no harness command installed,
no git for the workspace, no grid.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from hypothesis import event, given, settings
from hypothesis import strategies as st

from clanker.api import Clanker
from clanker.cli import cli
from clanker.sessions.listing import SessionListing

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
# Where each captured store goes in the home (the harnesses' default places).
_STORES = {
    "codex/sessions/codex-home": ".codex",
    "claude/sessions/claude-config": ".claude",
    "pi/sessions/pi-agent": ".pi/agent",
    "omp/sessions/omp-agent": ".omp/agent",
}
_VARIABLES = ("CODEX_HOME", "CLAUDE_CONFIG_DIR", "PI_CODING_AGENT_DIR",
              "PI_CODING_AGENT_SESSION_DIR", "PI_CONFIG_DIR", "OMP_PROFILE", "PI_PROFILE",
              "XDG_DATA_HOME", "HERMES_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME",
              "XDG_STATE_HOME")
_SESSION_FILES = sorted(
    (store, path.relative_to(FIXTURES / store))
    for store in _STORES for path in (FIXTURES / store).rglob("*.jsonl"))


def _isolated(base: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home of its own under ``base`` (returned, not made), with no store variable
    set and only ``base/bin`` on PATH: no harness, and no git."""
    home = base / "home"
    for name in _VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PATH", str(base / "bin"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(base / "run"))
    monkeypatch.setenv("CLANKER_HOME", str(base / "clanker"))
    return home


def _home(base: Path, data: st.DataObject, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = _isolated(base, monkeypatch)
    home.mkdir()
    kept = data.draw(st.lists(st.sampled_from(_SESSION_FILES), unique=True,
                              min_size=data.draw(st.sampled_from([0, 1, 1, 1])), max_size=12),
                     label="files")
    for store, relative in kept:
        target = home / _STORES[store] / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(FIXTURES / store / relative, target)
    if kept and data.draw(st.booleans(), label="odd files"):
        # Beside a kept file, under names its harness reads (the last digit of its id
        # changed): one that is no JSON, an empty one and a cut copy.
        store, relative = kept[0]
        original = home / _STORES[store] / relative
        whole = original.read_bytes()
        stem = original.name.removesuffix(".jsonl")
        digits = [d for d in "abcdef0123" if d != stem[-1]]
        for digit, content in zip(digits, (b"this is no JSON\n", b"", whole[: len(whole) // 2]),
                                  strict=False):
            (original.parent / f"{stem[:-1]}{digit}.jsonl").write_bytes(content)
    return home


def _loop_listing(clanker: Clanker, **kwargs: object) -> SessionListing:
    return asyncio.run(clanker.sessions(grid=False, **kwargs))  # type: ignore[arg-type]


def _invoke(argv: list[str]) -> Result:
    return CliRunner().invoke(cli, argv, catch_exceptions=False)


@settings(max_examples=50, deadline=None)
@given(data=st.data())
def test_the_listing_without_a_loop_is_the_loops(data: st.DataObject,
                                                 tmp_path_factory: pytest.TempPathFactory
                                                 ) -> None:
    base = tmp_path_factory.mktemp("now")
    with pytest.MonkeyPatch.context() as monkeypatch:
        _home(base, data, monkeypatch)
        work = base / "work"
        work.mkdir()
        monkeypatch.chdir(work)
        chosen = data.draw(st.lists(st.sampled_from(["claude", "codex", "pi", "omp", "hermes",
                                                     "agy", "opencode"]),
                                    unique=True, max_size=3), label="harnesses") or None
        limit = data.draw(st.sampled_from([None, 1, 3, 100]), label="limit")
        # A directory of no session, one that the captured sessions were recorded in (it
        # need not exist), or every directory.
        workspace = data.draw(st.sampled_from([None, None, str(work), "/home/dev/src/app"]),
                              label="workspace")

        now = Clanker().sessions_now(workspace=workspace, harnesses=chosen, limit=limit)
        # Nothing here needs a loop: no command is installed (git included), no grid runs.
        assert now is not None
        looped = _loop_listing(Clanker(), workspace=workspace, harnesses=chosen, limit=limit)
        assert now.sessions == looped.sessions
        assert now.scans == looped.scans
        event("no session" if not now.sessions else "sessions listed")
        event("a file skipped" if any(r.scan.skipped for r in now.scans) else "none skipped")
        if workspace not in (None, str(work)):
            return  # a directory that is not there: no CLI listing for it

        argv = ["sessions", "--json", *(["--all"] if workspace != str(work) else []),
                *(f"--harness={h}" for h in chosen or ()),
                *([] if limit is None else [f"--limit={limit}"])]
        fast = _invoke(argv)
        monkeypatch.setattr(Clanker, "sessions_now", lambda self, **_: None)
        looped_cli = _invoke(argv)
    assert (fast.exit_code, fast.stdout, fast.stderr) == (
        looped_cli.exit_code, looped_cli.stdout, looped_cli.stderr)


def _one_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = _isolated(tmp_path, monkeypatch)
    shutil.copytree(FIXTURES / "codex/sessions/codex-home", home / ".codex")
    (tmp_path / "bin").mkdir()
    return home


def _install(tmp_path: Path, name: str, script: str) -> None:
    path = tmp_path / "bin" / name
    path.write_text(f"#!/bin/sh\n{script}\n")
    path.chmod(0o755)


def test_an_installed_listing_command_needs_the_loop(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # OpenCode lists through its own executable: once one is installed, only the loop
    # can run it (before that, its absence is the scan's own binary-unavailable).
    _one_store(tmp_path, monkeypatch)
    listing = Clanker().sessions_now(workspace=None)
    assert listing is not None
    assert len(listing.sessions) == len(_loop_listing(Clanker(), workspace=None).sessions) > 0
    _install(tmp_path, "opencode", "exit 3")
    assert Clanker().sessions_now(workspace=None) is None
    assert Clanker().sessions_now(workspace=None, harnesses=["codex"]) is not None


def _process_env(tmp_path: Path, home: Path) -> dict[str, str]:
    """This process's environment for a CLI run of its own: ``home`` its home, the
    harnesses' and clanker's variables gone, ``tmp_path/bin`` all of its ``PATH``."""
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("CLANKER_", "OPENCODE_", "HERMES_", "PI_", "CODEX_", "CLAUDE_",
                                  "XDG_"))}
    env.update(HOME=str(home), PATH=str(tmp_path / "bin"), CLANKER_HOME=str(tmp_path / "c"),
               XDG_RUNTIME_DIR=str(tmp_path / "run"))
    return env


def test_an_installed_listing_command_leaves_nothing_behind_for_the_loop(
        tmp_path: Path) -> None:
    # The listing without a loop gives way to the loop's as soon as OpenCode is found;
    # it must not have started anything on a loop of its own on the way (asyncio makes
    # one for a task started with none running, and reports the task destroyed unrun).
    home = tmp_path / "home"
    shutil.copytree(FIXTURES / "codex/sessions/codex-home", home / ".codex")
    (tmp_path / "bin").mkdir()
    _install(tmp_path, "opencode", "exit 3")
    env = _process_env(tmp_path, home)
    probe = ("import gc, sys\n"
             "from clanker.cli import main\n"
             "try:\n    main(['sessions', '--all'])\nexcept SystemExit:\n    pass\n"
             "gc.collect()\n")  # whatever was left unrun is reported by now
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          env=env, check=True, timeout=120)
    assert done.stderr.splitlines() == [
        "clanker: opencode: the harness command failed (exit status 3)"]
    assert "codex:" in done.stdout  # the Codex fixture's sessions are listed


def test_the_workspaces_worktrees_need_the_loop_once_git_is_there(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _one_store(tmp_path, monkeypatch)
    work = tmp_path / "work"
    work.mkdir()
    # No git: the workspace alone is the scope, as the loop's listing finds too.
    assert Clanker().sessions_now(workspace=work, harnesses=["codex"]) is not None
    git = shutil.which("git", path=os.defpath)
    assert git is not None
    (tmp_path / "bin" / "git").symlink_to(git)
    assert Clanker().sessions_now(workspace=work, harnesses=["codex"]) is None
    assert Clanker().sessions_now(workspace=None, harnesses=["codex"]) is not None


def test_a_grid_socket_leaves_it_to_the_grid(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    _one_store(tmp_path, monkeypatch)
    clanker = Clanker()
    socket = clanker.paths.grid_socket
    socket.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    socket.parent.chmod(0o700)
    socket.write_text("")
    assert Clanker().sessions_now(workspace=None) is None


def test_a_cli_listing_of_file_stores_starts_no_event_loop(tmp_path: Path) -> None:
    # The whole point: asyncio, and the ssl it imports, are some 7 MB of a listing.
    home = tmp_path / "home"
    shutil.copytree(FIXTURES / "claude/sessions/claude-config", home / ".claude")
    env = _process_env(tmp_path, home)
    probe = ("import json, sys\n"
             "sys.argv = ['clanker', 'sessions', '--json', '--all']\n"
             "from clanker.cli import main\n"
             "try:\n    main()\nexcept SystemExit:\n    pass\n"
             "print(json.dumps(sorted(sys.modules)), file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          env=env, check=True, timeout=120)
    modules = set(json.loads(done.stderr.strip().splitlines()[-1]))
    assert len(json.loads(done.stdout)["sessions"]) > 0
    assert "clanker.sessions.service" in modules
    assert sorted(modules & {"asyncio", "ssl", "concurrent.futures"}) == []
