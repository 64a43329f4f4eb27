"""A launch's attention resources on the test sshd's host: one execution to install them,
one to remove exactly what was installed."""

from __future__ import annotations

import asyncio
import json
import os
import pwd
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clanker.attention.hook import STATE_FILES
from clanker.environment.remote_resources import (
    HOST_PYTHON,
    HOST_ROOT,
    RemoteResources,
    Resource,
)
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution.ssh import SshTransport
from clanker.testing import FailingExecutor
from tests.sshd import Sshd

_RESOURCES = (
    Resource("hook", f"#!/bin/sh\nexec {HOST_PYTHON} -I -S hook.py\n".encode(), executable=True),
    Resource("hook.py", b"print('bridge')\n"),
    Resource("settings.json", b"{}\n"),
)
_OWNER = "a" * 32


@pytest.fixture
def host_root(sshd: Sshd) -> Iterator[Path]:
    """clanker's directory in the test user's home, removed afterwards."""
    if os.geteuid() != 0:
        pytest.skip("looking into the remote home needs the dedicated test user (root)")
    try:
        yield sshd.home / HOST_ROOT
    finally:
        shutil.rmtree(sshd.home / ".local" / "state" / "clanker", ignore_errors=True)


def _resources(transport: SshTransport, sshd: Sshd) -> RemoteResources:
    return RemoteResources(transport, str(sshd.home))


def _installed(transport: SshTransport, sshd: Sshd, host_root: Path
               ) -> tuple[RemoteResources, str, Path]:
    """A launch directory with :data:`_RESOURCES` installed: its resources, name and path."""
    resources = _resources(transport, sshd)
    launch, _ = resources.new_directory()
    asyncio.run(resources.install(launch, _RESOURCES, owner=_OWNER))
    return resources, launch, host_root / launch


def test_install_writes_private_files_and_a_manifest_in_one_execution(
    sshd: Sshd, transport: SshTransport, host_root: Path
) -> None:
    resources = _resources(transport, sshd)
    launch, directory = resources.new_directory()
    before = transport.executions
    python = asyncio.run(resources.install(launch, _RESOURCES, owner=_OWNER))
    assert transport.executions - before == 1
    assert python.startswith("/")
    uid = pwd.getpwnam(sshd.user).pw_uid
    assert Path(directory) == host_root / launch
    for path in (host_root.parent, host_root, host_root / launch, host_root / launch / "state"):
        info = os.lstat(path)
        assert stat.S_ISDIR(info.st_mode) and info.st_uid == uid
        assert stat.S_IMODE(info.st_mode) == 0o700, path
    modes = {p.name: stat.S_IMODE(os.lstat(p).st_mode) for p in (host_root / launch).iterdir()}
    assert modes == {"hook": 0o700, "hook.py": 0o600, "settings.json": 0o600,
                     "manifest.json": 0o600, "state": 0o700}
    hook = (host_root / launch / "hook").read_text()
    assert HOST_PYTHON not in hook and python in hook
    manifest = json.loads((host_root / launch / "manifest.json").read_text())
    assert [f["name"] for f in manifest["files"]] == ["hook", "hook.py", "settings.json"]

    before = transport.executions
    done = asyncio.run(resources.cleanup(launch, STATE_FILES))
    assert transport.executions - before == 1
    assert done.complete
    assert not (host_root / launch).exists()
    assert host_root.is_dir(), "clanker's own directory stays for the next launch"


def test_cleanup_keeps_unknown_files_and_refuses_a_planted_link(
    sshd: Sshd, transport: SshTransport, host_root: Path
) -> None:
    resources, launch, directory = _installed(transport, sshd, host_root)
    outside = host_root.parent / "precious"
    outside.write_text("not clanker's to remove")
    (directory / "settings.json").unlink()
    (directory / "settings.json").symlink_to(outside)
    (directory / "notes.txt").write_text("the user's")
    (directory / "state" / "lock").write_text("")  # as the hook bridge leaves it
    os.chown(directory / "state" / "lock", pwd.getpwnam(sshd.user).pw_uid, -1)
    (directory / "state" / "theirs").write_text("the user's too")

    done = asyncio.run(resources.cleanup(launch, STATE_FILES))
    assert not done.complete
    assert done.refused == ("settings.json",)
    assert set(done.unknown) == {"notes.txt", "state/theirs"}
    assert {"hook", "hook.py", "state/lock"} <= set(done.removed)
    assert outside.read_text() == "not clanker's to remove", "a link is never followed"
    assert (directory / "notes.txt").read_text() == "the user's"
    assert (directory / "manifest.json").is_file(), "kept, so a later cleanup can finish"

    # Once what is not clanker's is gone, a second cleanup finishes.
    (directory / "notes.txt").unlink()
    (directory / "state" / "theirs").unlink()
    (directory / "settings.json").unlink()
    done = asyncio.run(resources.cleanup(launch, STATE_FILES))
    assert done.complete and not directory.exists()


def test_a_file_of_another_owner_or_mode_in_place_of_one_of_clanker_s_is_refused(
    sshd: Sshd, transport: SshTransport, host_root: Path
) -> None:
    resources, launch, directory = _installed(transport, sshd, host_root)
    (directory / "hook.py").unlink()
    (directory / "hook.py").write_text("root's")  # these tests run as root: another owner
    os.chmod(directory / "settings.json", 0o644)
    (directory / "hook").unlink()
    os.mkfifo(directory / "hook")
    os.chown(directory / "hook", pwd.getpwnam(sshd.user).pw_uid, -1)
    done = asyncio.run(resources.cleanup(launch, STATE_FILES))
    assert set(done.refused) == {"hook", "hook.py", "settings.json"}
    assert (directory / "hook.py").read_text() == "root's"
    assert stat.S_ISFIFO(os.lstat(directory / "hook").st_mode)


def test_a_link_in_place_of_clanker_s_directory_is_refused(
    sshd: Sshd, transport: SshTransport, host_root: Path, tmp_path: Path
) -> None:
    host_root.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    uid = pwd.getpwnam(sshd.user).pw_uid
    os.chown(host_root.parent, uid, -1)
    elsewhere = host_root.parent / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    os.chown(elsewhere, uid, -1)
    host_root.symlink_to(elsewhere)
    resources = _resources(transport, sshd)
    launch, _ = resources.new_directory()
    with pytest.raises(HarnessCapabilityError, match="not a private directory"):
        asyncio.run(resources.install(launch, _RESOURCES, owner=_OWNER))
    assert list(elsewhere.iterdir()) == []


def test_an_install_removes_this_machine_s_orphans_and_no_one_else_s(
    sshd: Sshd, transport: SshTransport, host_root: Path
) -> None:
    """A launcher killed before its cleanup leaves its directory; the next install from
    the same machine removes it (in the same execution), unless it is still running."""
    resources = _resources(transport, sshd)
    orphan, _ = resources.new_directory()
    running, _ = resources.new_directory()
    foreign, _ = resources.new_directory()
    asyncio.run(resources.install(orphan, _RESOURCES, owner=_OWNER))
    asyncio.run(resources.install(running, _RESOURCES, owner=_OWNER, keep=[orphan]))
    asyncio.run(resources.install(foreign, _RESOURCES, owner="f" * 32))
    assert {orphan, running, foreign} <= {p.name for p in host_root.iterdir()}
    (host_root / orphan / "state" / "state.json").write_text("{}")
    os.chown(host_root / orphan / "state" / "state.json", pwd.getpwnam(sshd.user).pw_uid, -1)
    (host_root / "unrelated").mkdir()

    launch, _ = resources.new_directory()
    before = transport.executions
    asyncio.run(resources.install(launch, _RESOURCES, owner=_OWNER, keep=[running],
                                  state_files=STATE_FILES))
    assert transport.executions - before == 1
    assert sorted(p.name for p in host_root.iterdir()) == sorted(
        [running, foreign, launch, "lock", "unrelated"])


_TARGET = "/usr/lib/python3/dist-packages"
_MIRROR = (
    Resource("mirror/entry", b"", link=_TARGET),
    Resource("mirror/__init__.py", b"", link="/etc/hostname"),
    Resource("mirror/own/plugin.yaml", b"name: own\n"),
)


def _mirror_installed(transport: SshTransport, sshd: Sshd, host_root: Path
                      ) -> tuple[RemoteResources, str, Path]:
    resources = _resources(transport, sshd)
    launch, _ = resources.new_directory()
    asyncio.run(resources.install(launch, (*_RESOURCES, *_MIRROR), owner=_OWNER))
    return resources, launch, host_root / launch


def test_links_and_nested_directories_are_installed_recorded_and_removed(
    sshd: Sshd, transport: SshTransport, host_root: Path
) -> None:
    resources, launch, directory = _mirror_installed(transport, sshd, host_root)
    uid = pwd.getpwnam(sshd.user).pw_uid
    for name in ("mirror", "mirror/own"):
        info = os.lstat(directory / name)
        assert stat.S_ISDIR(info.st_mode) and info.st_uid == uid
        assert stat.S_IMODE(info.st_mode) == 0o700, name
    assert os.readlink(directory / "mirror" / "entry") == _TARGET
    assert os.lstat(directory / "mirror" / "entry").st_uid == uid
    assert stat.S_IMODE(os.lstat(directory / "mirror" / "own" / "plugin.yaml").st_mode) == 0o600
    manifest = json.loads((directory / "manifest.json").read_text())
    assert {"name": "mirror/entry", "link": _TARGET} in manifest["files"]
    assert manifest["dirs"] == ["state", "mirror", "mirror/own"]

    done = asyncio.run(resources.cleanup(launch, STATE_FILES))
    assert done.complete, done
    assert {"mirror/entry", "mirror/__init__.py", "mirror/own/plugin.yaml", "mirror/own",
            "mirror"} <= set(done.removed)
    assert not directory.exists()
    assert Path(_TARGET).is_dir(), "a link's target is never touched"


def _retarget(path: Path, user: str) -> None:
    path.unlink()
    path.symlink_to("/etc")
    os.chown(path, pwd.getpwnam(user).pw_uid, -1, follow_symlinks=False)


def _file(path: Path, user: str) -> None:
    path.unlink()
    path.write_text("the user's")
    os.chown(path, pwd.getpwnam(user).pw_uid, -1)


def _dir(path: Path, user: str) -> None:
    path.unlink()
    path.mkdir(mode=0o700)
    os.chown(path, pwd.getpwnam(user).pw_uid, -1)


@pytest.mark.parametrize("replace", [_retarget, _file, _dir], ids=["retargeted", "file", "dir"])
def test_a_link_that_is_no_longer_the_recorded_one_is_refused_and_left(
    sshd: Sshd, transport: SshTransport, host_root: Path, replace: object
) -> None:
    resources, launch, directory = _mirror_installed(transport, sshd, host_root)
    entry = directory / "mirror" / "entry"
    replace(entry, sshd.user)  # type: ignore[operator]
    before = (entry.is_symlink(), os.readlink(entry) if entry.is_symlink() else None,
              entry.is_dir(), entry.is_file())
    done = asyncio.run(resources.cleanup(launch, STATE_FILES))
    assert done.refused == ("mirror/entry",), done
    assert not done.complete
    after = (entry.is_symlink(), os.readlink(entry) if entry.is_symlink() else None,
             entry.is_dir(), entry.is_file())
    assert after == before, "left as it was found"
    assert (directory / "manifest.json").is_file(), "kept, so a later cleanup can finish"
    assert not (directory / "mirror" / "own").exists(), "the rest is removed"


def test_a_directory_of_the_mirror_replaced_by_a_link_is_never_followed(
    sshd: Sshd, transport: SshTransport, host_root: Path, tmp_path: Path
) -> None:
    resources, launch, directory = _mirror_installed(transport, sshd, host_root)
    uid = pwd.getpwnam(sshd.user).pw_uid
    decoy = host_root.parent / "decoy"
    decoy.mkdir(mode=0o700)
    os.chown(decoy, uid, -1)
    (decoy / "plugin.yaml").write_text("name: own\n")
    os.chown(decoy / "plugin.yaml", uid, -1)
    os.chmod(decoy / "plugin.yaml", 0o600)
    own = directory / "mirror" / "own"
    (own / "plugin.yaml").unlink()
    own.rmdir()
    own.symlink_to(decoy)
    os.chown(own, uid, -1, follow_symlinks=False)
    (directory / "mirror" / "theirs").write_text("unknown")
    done = asyncio.run(resources.cleanup(launch, STATE_FILES))
    assert set(done.refused) == {"mirror/own", "mirror/own/plugin.yaml"}, done
    assert done.unknown == ("mirror/theirs",)
    assert (decoy / "plugin.yaml").read_text() == "name: own\n", "nothing through the link"
    assert own.is_symlink() and (directory / "mirror" / "entry").is_symlink() is False


_PARTS = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,20}", fullmatch=True)


@given(st.lists(_PARTS, min_size=1, max_size=5))
def test_a_path_of_plain_parts_is_a_resource_name(parts: list[str]) -> None:
    if parts[0] in {"manifest.json", "state"}:
        with pytest.raises(ValueError, match="name"):
            Resource("/".join(parts), b"")
    else:
        assert Resource("/".join(parts), b"").name == "/".join(parts)


@given(st.lists(_PARTS, min_size=0, max_size=3), st.sampled_from(["", ".", "..", ".hidden",
                                                                   "a\nb", "-x"]),
       st.lists(_PARTS, min_size=0, max_size=3))
def test_a_path_with_an_unsafe_part_is_refused(before: list[str], bad: str,
                                               after: list[str]) -> None:
    with pytest.raises(ValueError, match="name"):
        Resource("/".join([*before, bad, *after]), b"")


@pytest.mark.parametrize("target", ["relative/target", "", "/a\x00b", "/" + "x" * 5000])
def test_a_link_target_must_be_absolute_and_bounded(target: str) -> None:
    with pytest.raises(ValueError, match="link"):
        Resource("mirror/entry", b"", link=target)


def test_a_link_carries_no_data() -> None:
    with pytest.raises(ValueError, match="link"):
        Resource("mirror/entry", b"data", link="/etc")
    with pytest.raises(ValueError, match="link"):
        Resource("mirror/entry", b"", executable=True, link="/etc")


_OFFLINE = FailingExecutor(HarnessCapabilityError(ErrorKind.TRANSPORT_FAILURE, "offline"))


@pytest.mark.parametrize("names", [("mirror", "mirror/entry"), ("a/b", "a/b/c/d"),
                                   ("x", "x/y", "z")])
def test_a_file_where_another_resource_s_directory_would_be_is_refused_unrun(
        names: tuple[str, ...]) -> None:
    # Refused before anything runs: an execution would raise the executor's error.
    resources = RemoteResources(_OFFLINE, "/home/dev")
    with pytest.raises(ValueError, match="directory"):
        asyncio.run(resources.install(resources.new_directory()[0],
                                      [Resource(name, b"") for name in names], owner=_OWNER))


def test_files_side_by_side_in_one_directory_are_not_in_each_other_s_way() -> None:
    resources = RemoteResources(_OFFLINE, "/home/dev")
    with pytest.raises(HarnessCapabilityError):  # it got as far as running the installer
        asyncio.run(resources.install(resources.new_directory()[0], [Resource("mirror/a", b""),
                                                 Resource("mirror/ab", b""),
                                                 Resource("mirror-b", b"")], owner=_OWNER))
