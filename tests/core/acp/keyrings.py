"""Credential stores for the secret tests: real implementations of keyring's
backend interface (``keyring.backend.KeyringBackend``), holding values in memory
or in one JSON file (so two processes share them: ``PYTHON_KEYRING_BACKEND``
names :class:`FileKeyring`, ``TEST_KEYRING_FILE`` its file)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from keyring.backend import KeyringBackend
from keyring.errors import PasswordDeleteError, PasswordSetError


class MemoryKeyring(KeyringBackend):
    priority = 1  # type: ignore[assignment]

    def __init__(self) -> None:
        super().__init__()
        self.values: dict[tuple[str, str], str] = {}
        self.refuse_set = False

    def get_password(self, service: str, username: str) -> str | None:
        return self.values.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        if self.refuse_set:
            raise PasswordSetError("the store is locked")
        self.values[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        if self.values.pop((service, username), None) is None:
            raise PasswordDeleteError("no such password")


class FileKeyring(KeyringBackend):
    priority = 1  # type: ignore[assignment]

    @property
    def _file(self) -> Path:
        return Path(os.environ["TEST_KEYRING_FILE"])

    def _load(self) -> dict[str, str]:
        try:
            data: dict[str, str] = json.loads(self._file.read_text())
        except FileNotFoundError:
            return {}
        return data

    def get_password(self, service: str, username: str) -> str | None:
        return self._load().get(f"{service}\0{username}")

    def set_password(self, service: str, username: str, password: str) -> None:
        self._file.write_text(json.dumps({**self._load(), f"{service}\0{username}": password}))

    def delete_password(self, service: str, username: str) -> None:
        data = self._load()
        if data.pop(f"{service}\0{username}", None) is None:
            raise PasswordDeleteError("no such password")
        self._file.write_text(json.dumps(data))
