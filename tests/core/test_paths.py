"""The runtime directory: resolved only where it is used, refused when it is not private."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from clanker.cli import cli
from clanker.errors import EXIT_GRID_UNAVAILABLE
from clanker.paths import (
    ClankerPaths,
    UnsafeRuntimeDirectoryError,
    clanker_paths,
    runtime_directory,
)

STRANGER = 65534  # nobody


def explicit(tmp_path: Path) -> ClankerPaths:
    return ClankerPaths(config=tmp_path / "config", cache=tmp_path / "cache",
                        state=tmp_path / "state", runtime=tmp_path / "run")


def test_a_readable_runtime_directory_of_ours_is_accepted(tmp_path: Path) -> None:
    """Reading the root lets nobody in: what lives in it is 0700 on its own."""
    (tmp_path / "run").mkdir()
    (tmp_path / "run").chmod(0o755)
    assert explicit(tmp_path).runtime == tmp_path / "run"


def test_a_missing_runtime_directory_is_created_private_only_when_asked(tmp_path: Path) -> None:
    paths = explicit(tmp_path)
    assert paths.runtime == tmp_path / "run"
    assert not (tmp_path / "run").exists()  # reading it creates nothing
    old = os.umask(0o077)  # a strict umask must not leave it unusable
    try:
        assert runtime_directory(paths, create=True) == tmp_path / "run"
    finally:
        os.umask(old)
    assert (tmp_path / "run").stat().st_mode & 0o777 == 0o700
    assert paths.runtime == tmp_path / "run"


@pytest.mark.parametrize(
    ("make", "why"),
    [
        (lambda p: (p.mkdir(), p.chmod(0o777)), "has mode 0777"),
        (lambda p: (p.mkdir(), p.chmod(0o770)), "has mode 0770"),
        (lambda p: p.write_text(""), "is not a directory"),
        (lambda p: (p.with_name("real").mkdir(mode=0o700), p.symlink_to("real")),
         "is a symbolic link"),
    ],
)
def test_an_unsafe_runtime_directory_is_refused_naming_it(tmp_path: Path, make: object,
                                                          why: str) -> None:
    make(tmp_path / "run")  # type: ignore[operator]
    before = (tmp_path / "run").lstat()
    for create in (False, True):
        with pytest.raises(UnsafeRuntimeDirectoryError) as caught:
            runtime_directory(explicit(tmp_path), create=create)
        assert str(tmp_path / "run") in str(caught.value)
        assert why in str(caught.value)
    with pytest.raises(UnsafeRuntimeDirectoryError):
        _ = explicit(tmp_path).runtime
    after = (tmp_path / "run").lstat()
    assert (after.st_mode, after.st_uid) == (before.st_mode, before.st_uid)  # never repaired


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory away takes root")
def test_a_runtime_directory_of_another_user_is_refused(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir(mode=0o700)
    os.chown(tmp_path / "run", STRANGER, STRANGER)
    with pytest.raises(UnsafeRuntimeDirectoryError) as caught:
        _ = explicit(tmp_path).runtime
    assert f"belongs to uid {STRANGER}" in str(caught.value)


def test_status_exits_18_for_an_unsafe_runtime_directory(isolated_clanker: Path) -> None:
    (isolated_clanker / "run").mkdir(mode=0o777)
    (isolated_clanker / "run").chmod(0o777)
    result = CliRunner().invoke(cli, ["status"])
    assert result.exit_code == EXIT_GRID_UNAVAILABLE
    assert str(isolated_clanker / "run") in result.output
    assert "other users can write to it" in result.output


# -- the fallback another user can pre-create -------------------------------------------


def _fallback_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.upper().startswith(("CLANKER_", "XDG_"))}
    temp = tmp_path / "tmp"
    temp.mkdir(mode=0o700)
    env |= {"HOME": str(tmp_path / "home"), "TMPDIR": str(temp)}
    return env


def _clanker(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    program = "import sys; from clanker.cli import main; sys.exit(main())"
    return subprocess.run([sys.executable, "-c", program, *args], env=env, capture_output=True,
                          text=True, timeout=120, check=False)


@pytest.fixture
def hostile_fallback(tmp_path: Path) -> dict[str, str]:
    """No XDG_RUNTIME_DIR, and the /tmp fallback pre-created by someone else
    (as root: really another user's; otherwise ours but open to everyone)."""
    if os.path.isdir(f"/run/user/{os.geteuid()}"):
        pytest.skip("this machine has a runtime directory: platformdirs would not fall back")
    env = _fallback_env(tmp_path)
    fallback = Path(env["TMPDIR"]) / f"runtime-{os.geteuid()}"
    fallback.mkdir()
    fallback.chmod(0o777)
    if os.geteuid() == 0:
        os.chown(fallback, STRANGER, STRANGER)
    return env


def test_commands_that_never_touch_the_grid_ignore_an_unsafe_runtime_directory(
    hostile_fallback: dict[str, str],
) -> None:
    assert clanker_paths(hostile_fallback | {"CLANKER_HOME": ""}).cache  # resolves nothing else
    for args in (["sessions", "--all"], ["usage"], ["harnesses"]):
        done = _clanker(hostile_fallback, *args)
        assert "internal error" not in done.stderr, (args, done.stderr)
        assert done.returncode == 0, (args, done.stderr)


def test_status_refuses_an_unsafe_fallback_with_exit_18(
    hostile_fallback: dict[str, str],
) -> None:
    fallback = Path(hostile_fallback["TMPDIR"]) / f"runtime-{os.geteuid()}"
    for args in (["status"], ["grid", "start"]):
        done = _clanker(hostile_fallback, *args)
        assert done.returncode == EXIT_GRID_UNAVAILABLE, (args, done.stderr)
        assert str(fallback) in done.stderr
        assert "internal error" not in done.stderr
        assert "Traceback" not in done.stderr
    assert not any(fallback.iterdir())  # nothing was created in it
