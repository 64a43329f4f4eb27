"""The account registry: records and selections, changed only as whole transactions.

One JSON document (``<state>/accounts.json``) holds every managed account's
record (no token, URL or raw harness answer is ever kept) and the selection
per environment and harness (absent: the default account). A change is a
function from the current state to the next: :meth:`AccountStore.change`
takes the file lock (:mod:`clanker.locking`, waiting at most 10 s), reads the
document afresh, builds the next state from a copy, writes it atomically, and
only then returns it. A failure anywhere leaves the file, and every state
already handed out, as they were, and is reported with one fixed sentence
(:class:`AccountStoreError`).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final, TypeVar

from attrs import evolve, field, frozen

from clanker.accounts.homes import is_account_id
from clanker.ids import HarnessId, is_harness_id
from clanker.locking import LockTimeoutError, UnsafeLockError, exclusive
from clanker.storage import UnusableFileError, parse_json, read_own_file, write_json_atomic

__all__ = [
    "MAX_LABEL",
    "AccountRecord",
    "AccountState",
    "AccountStatus",
    "AccountStore",
    "AccountStoreError",
]

_VERSION: Final = 1
_MAX_FILE: Final = 4 * 1024 * 1024
_MAX_ACCOUNTS: Final = 256
_LOCK_WAIT: Final = 10.0  # seconds another change of the registry may hold the lock
MAX_LABEL: Final = 64
_T = TypeVar("_T")


class AccountStoreError(Exception):
    """The account settings could not be read or saved (nothing was changed)."""

    def __init__(self, message: str = "the account settings could not be saved") -> None:
        super().__init__(message)


class AccountStatus(enum.StrEnum):
    CONNECTED = "connected"
    NEEDS_AUTH = "needs-auth"
    UNKNOWN = "unknown"


def check_label(value: str | None) -> None:
    """Refuse a label that is not printable text of 1 to 64 characters (``ValueError``)."""
    if value is not None and (not isinstance(value, str) or not value.strip()
                              or len(value) > MAX_LABEL or not value.isprintable()):
        raise ValueError(f"label: printable text of 1 to {MAX_LABEL} characters")


def _label(_: object, __: object, value: str | None) -> None:
    check_label(value)


def _optional_text(_: object, __: object, value: str | None) -> None:
    if value is not None and (not isinstance(value, str) or len(value) > 320
                              or not value.isprintable()):
        raise ValueError("printable text of at most 320 characters")


@frozen(kw_only=True)
class AccountRecord:
    """One managed account, as kept (what clanker knows of it, never a secret)."""

    id: str = field()
    harness: HarnessId = field()
    environment: str = "local"
    label: str | None = field(default=None, validator=_label)
    created_at: datetime
    email: str | None = field(default=None, validator=_optional_text)
    plan: str | None = field(default=None, validator=_optional_text)
    status: AccountStatus = AccountStatus.UNKNOWN
    identity_changed: bool = False
    """The harness since reported another identity (email) than the one this account
    was added with: flagged, never relabelled."""

    @id.validator
    def _id(self, _: object, value: str) -> None:
        if not is_account_id(value):
            raise ValueError("id: acct_ and 32 lower-case hex digits")

    @harness.validator
    def _harness(self, _: object, value: str) -> None:
        if not is_harness_id(value):
            raise ValueError("harness: not a harness id")

    @property
    def name(self) -> str:
        """How the person calls it: its label, else its email, else its id."""
        return self.label or self.email or self.id

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "harness": str(self.harness), "environment": self.environment,
                "label": self.label, "createdAt": self.created_at.isoformat(),
                "email": self.email, "plan": self.plan, "status": self.status.value,
                "identityChanged": self.identity_changed}

    @classmethod
    def from_json(cls, data: object) -> AccountRecord:
        if not isinstance(data, dict) or set(data) != {
                "id", "harness", "environment", "label", "createdAt", "email", "plan", "status",
                "identityChanged"}:
            raise ValueError("not an account record")
        created = datetime.fromisoformat(data["createdAt"])
        if created.tzinfo is None:
            raise ValueError("createdAt: no time zone")
        if not isinstance(data["environment"], str) or type(data["identityChanged"]) is not bool:
            raise ValueError("not an account record")
        return cls(id=data["id"], harness=HarnessId(data["harness"]),
                   environment=data["environment"], label=data["label"], created_at=created,
                   email=data["email"], plan=data["plan"], status=AccountStatus(data["status"]),
                   identity_changed=data["identityChanged"])


def _frozen(value: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(value))


def _selection_key(environment: str, harness: str) -> str:
    return f"{environment}\0{harness}"


@frozen(kw_only=True)
class AccountState:
    """Every record and selection at one moment (immutable: a change makes a new one)."""

    accounts: tuple[AccountRecord, ...] = ()
    selections: Mapping[str, str] = field(factory=dict, converter=_frozen)
    generation: int = 0
    """Bumped by every change of the set of accounts (add, remove, reconnect): what a
    cache of their sessions is keyed by."""

    def get(self, account_id: str) -> AccountRecord | None:
        return next((a for a in self.accounts if a.id == account_id), None)

    def selected(self, environment: str, harness: str) -> AccountRecord | None:
        """The selected managed account (``None``: the default account)."""
        chosen = self.selections.get(_selection_key(environment, harness))
        return None if chosen is None else self.get(chosen)

    def with_account(self, record: AccountRecord) -> AccountState:
        others = tuple(a for a in self.accounts if a.id != record.id)
        if len(others) >= _MAX_ACCOUNTS:
            raise AccountStoreError(f"at most {_MAX_ACCOUNTS} accounts can be kept")
        return evolve(self, accounts=(*others, record), generation=self.generation + 1)

    def without_account(self, account_id: str) -> AccountState:
        """Without the account, and a selection of it back to the default."""
        return evolve(
            self, accounts=tuple(a for a in self.accounts if a.id != account_id),
            selections={k: v for k, v in self.selections.items() if v != account_id},
            generation=self.generation + 1)

    def relabelled(self, account_id: str, label: str | None) -> AccountState:
        record = self.get(account_id)
        if record is None:
            return self
        return evolve(self, accounts=tuple(
            evolve(a, label=label) if a.id == account_id else a for a in self.accounts))

    def with_selection(self, environment: str, harness: str, account_id: str | None
                       ) -> AccountState:
        selections = dict(self.selections)
        key = _selection_key(environment, harness)
        if account_id is None:
            selections.pop(key, None)
        else:
            selections[key] = account_id
        return evolve(self, selections=selections)

    def to_json(self) -> dict[str, Any]:
        return {"version": _VERSION, "generation": self.generation,
                "accounts": [a.to_json() for a in self.accounts],
                "selections": dict(self.selections)}

    @classmethod
    def from_json(cls, data: object, *, environment: str) -> AccountState:
        """Read a document, keeping only records of ``environment`` (managed accounts
        are local: a record naming another environment never resolves a home here)."""
        if not isinstance(data, dict) or data.get("version") != _VERSION \
                or set(data) != {"version", "generation", "accounts", "selections"}:
            raise ValueError("not an account document")
        generation, accounts, selections = data["generation"], data["accounts"], \
            data["selections"]
        if type(generation) is not int or not isinstance(accounts, list) \
                or not isinstance(selections, dict):
            raise ValueError("not an account document")
        records = tuple(AccountRecord.from_json(item) for item in accounts)
        kept = tuple(r for r in records if r.environment == environment)
        ids = {r.id for r in kept}
        if len(ids) != len(kept):
            raise ValueError("an account is recorded twice")
        chosen = {k: v for k, v in selections.items()
                  if isinstance(k, str) and isinstance(v, str) and v in ids
                  and k.startswith(environment + "\0")}
        return cls(accounts=kept, selections=chosen, generation=generation)


class AccountStore:
    """The registry file and its lock."""

    def __init__(self, path: Path, *, environment: str = "local") -> None:
        self._path = path
        self._lock_path = path.with_name(path.name + ".lock")
        self._environment = environment

    def load(self) -> AccountState:
        """The state as the file has it now (empty when there is none)."""
        try:
            raw = read_own_file(self._path, max_bytes=_MAX_FILE)
        except (OSError, UnusableFileError):
            raise AccountStoreError("the account settings could not be read") from None
        if raw is None:
            return AccountState()
        try:
            return AccountState.from_json(parse_json(raw), environment=self._environment)
        except (ValueError, TypeError, KeyError):
            raise AccountStoreError("the account settings file is damaged; it was left "
                                    f"as it is ({self._path})") from None

    def change(self, step: Callable[[AccountState], AccountState]) -> AccountState:
        """Apply ``step`` to the current state under the lock and save the result;
        return it. Nothing is saved when ``step`` raises."""
        try:
            with exclusive(self._lock_path, timeout=_LOCK_WAIT):
                current = self.load()
                following = step(current)
                if following is not current:
                    write_json_atomic(self._path, following.to_json())
                return following
        except LockTimeoutError:
            raise AccountStoreError("the account settings are busy (another clanker is "
                                    "changing them)") from None
        except (UnsafeLockError, OSError):
            raise AccountStoreError() from None


def now() -> datetime:
    return datetime.now(UTC)
