"""The account homes clanker owns: derived, created and removed only here.

A home is ``<root>/<harness>/acct_<32 hex>``, derived from a validated harness
id and an opaque account id and from nothing else (never a path anyone
supplies). Every use verifies, component by component with ``lstat``, that
the root, the harness directory and the home are real directories (no link
anywhere on the chain) owned by this user, and that the home's real path lies
strictly inside the real root; anything else fails closed with
:class:`UnsafeHomeError`. The path is canonical from the start (the root is
resolved once), so a harness that keys its secure-store entry on the home's
path always sees the same value.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from clanker.ids import HarnessId, is_harness_id

__all__ = ["ACCOUNT_ID", "AccountHomes", "UnsafeHomeError", "is_account_id", "new_account_id"]

ACCOUNT_ID: Final = re.compile(r"acct_[0-9a-f]{32}")
"""What an account id looks like: opaque, random, never derived from anything."""


def is_account_id(value: object) -> bool:
    return isinstance(value, str) and ACCOUNT_ID.fullmatch(value) is not None


def new_account_id() -> str:
    return "acct_" + secrets.token_hex(16)


class UnsafeHomeError(Exception):
    """An account home (or a directory above it) is not provably clanker's own."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"the account's home is not safe to use: {reason}")
        self.reason = reason


class AccountHomes:
    """The owned homes under one root (``<state>/accounts``)."""

    def __init__(self, root: Path) -> None:
        self._root = Path(os.path.abspath(root))

    @property
    def root(self) -> Path:
        return self._root

    def path(self, harness: HarnessId, account_id: str) -> Path:
        """Where the home of ``account_id`` is (derived only; nothing is checked)."""
        if not is_account_id(account_id):
            raise ValueError("account id: acct_ and 32 lower-case hex digits")
        if not is_harness_id(harness):
            raise ValueError("harness: not a harness id")
        return self._root / str(harness) / account_id

    def create(self, harness: HarnessId, account_id: str) -> Path:
        """Create the home 0700 (its parents too) and return its verified path."""
        home = self.path(harness, account_id)
        for directory in (self._root, home.parent):
            with contextlib.suppress(FileExistsError):
                directory.mkdir(mode=0o700, parents=True)
            self._check_directory(directory)
        with contextlib.suppress(FileExistsError):  # a retry: verified like any other
            home.mkdir(mode=0o700)
        return self.verify(harness, account_id)

    def verify(self, harness: HarnessId, account_id: str) -> Path:
        """The home's path, once the whole chain is proven to be clanker's own."""
        home = self.path(harness, account_id)
        for directory in (self._root, home.parent, home):
            self._check_directory(directory)
        real_root = Path(os.path.realpath(self._root))
        real = Path(os.path.realpath(home))
        if real.parent.parent != real_root or real.name != account_id:
            raise UnsafeHomeError("it does not resolve inside clanker's accounts directory")
        return home

    def exists(self, harness: HarnessId, account_id: str) -> bool:
        return os.path.lexists(self.path(harness, account_id))

    def has_content(self, harness: HarnessId, account_id: str) -> bool:
        """Whether the verified home holds anything (a harness wrote into it)."""
        home = self.verify(harness, account_id)
        with os.scandir(home) as entries:
            return any(True for _ in entries)

    def remove(self, harness: HarnessId, account_id: str) -> None:
        """Delete the verified home and everything in it (a missing one is removed
        already). Only a home proven to lie inside the owned root, through no link,
        is ever deleted: a harness's own home never can be."""
        if not self.exists(harness, account_id):
            return
        home = self.verify(harness, account_id)
        # rmtree refuses to follow a link at the top and removes links below as links.
        shutil.rmtree(home)

    def homes(self) -> Iterator[tuple[HarnessId, str]]:
        """Every well-named home under the root (for orphan recovery): unverified."""
        try:
            harnesses = list(os.scandir(self._root))
        except OSError:
            return
        for harness in harnesses:
            if not harness.is_dir(follow_symlinks=False):
                continue
            try:
                entries = list(os.scandir(harness.path))
            except OSError:
                continue
            for entry in entries:
                if is_harness_id(harness.name) and is_account_id(entry.name):
                    yield HarnessId(harness.name), entry.name

    @staticmethod
    def _check_directory(path: Path) -> None:
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            raise UnsafeHomeError(f"{path.name} is missing") from None
        except OSError as exc:
            raise UnsafeHomeError(f"{path.name} cannot be read ({exc.strerror})") from None
        if stat.S_ISLNK(info.st_mode):
            raise UnsafeHomeError(f"{path.name} is a symbolic link")
        if not stat.S_ISDIR(info.st_mode):
            raise UnsafeHomeError(f"{path.name} is not a directory")
        if info.st_uid != os.getuid():
            raise UnsafeHomeError(f"{path.name} belongs to another user")
        if info.st_mode & 0o077:
            raise UnsafeHomeError(f"{path.name} is open to other users")
