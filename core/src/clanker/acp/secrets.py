"""Agent secrets: values in the OS credential store, their names in clanker's state.

A secret (an API key an ACP agent needs) is stored with ``keyring`` under the
service ``clanker-coder/<agent>`` and the variable's name, and injected into
that agent's environment only, when clanker starts it. ``keyring`` cannot
list what it holds, so the names (never the values) are kept in an index,
``<state>/coder-secrets.json``, changed under a lock and replaced atomically:
a name is added before its value is stored (and taken back when storing
fails), and removed only once its value is deleted, so no value clanker
stored is ever left where nothing names it.

``keyring`` is imported here only, and only when a secret is read or written:
a session whose agent has no secret never loads it.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from clanker.acp.errors import CoderError, CoderFailure

if TYPE_CHECKING:
    from keyring.backend import KeyringBackend

__all__ = ["AgentSecrets", "check_agent", "check_name"]

_AGENT: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,127}")
_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
RESERVED: Final = frozenset({"PATH", "PWD", "HOME"})
"""Set by the launch path for every agent (besides each harness's own variables)."""
_MAX_NAMES: Final = 64
_SERVICE: Final = "clanker-coder/"
_LOCK_WAIT: Final = 30.0  # a change holds the lock across one credential-store call
_UNAVAILABLE: Final = ("no OS credential store is available to keyring here ({backend}); "
                       "set the variable for this invocation instead: "
                       "{names}=... clanker coder ...")


def check_agent(agent: str) -> str:
    """``agent`` (a harness id or an executable's name); :class:`ValueError` otherwise."""
    if _AGENT.fullmatch(agent) is None:
        raise ValueError(f"agent {agent!r}: a harness id or an executable's name "
                         "(letters, digits, '.', '_', '+', '-'; no path)")
    return agent


def check_name(name: str, reserved: frozenset[str] = frozenset()) -> str:
    """``name`` when it can be a secret's variable; :class:`ValueError` otherwise."""
    if _NAME.fullmatch(name) is None:
        raise ValueError(f"secret name {name!r}: an environment variable name "
                         "(letters, digits and '_', not starting with a digit)")
    if name.upper().startswith("CLANKER_"):
        raise ValueError(f"secret name {name!r}: CLANKER_* variables are clanker's own")
    if name in RESERVED or name in reserved:
        raise ValueError(f"secret name {name!r}: the launch path sets this variable")
    return name


def _backend(names: str) -> KeyringBackend:
    """The credential store; ``no-keyring`` when keyring has none (its fail backend)."""
    import keyring
    from keyring.backends import fail

    backend = keyring.get_keyring()
    if isinstance(backend, fail.Keyring):
        raise CoderError(CoderFailure.NO_KEYRING,
                         _UNAVAILABLE.format(backend="keyring.backends.fail", names=names))
    return backend


def _unusable(exc: Exception, name: str) -> CoderError:
    return CoderError(CoderFailure.NO_KEYRING,
                      _UNAVAILABLE.format(backend=type(exc).__name__, names=name))


def _store_call(action: Any, service: str, name: str, *value: str) -> Any:
    """One call to the store; its failure becomes ``no-keyring`` (no value in the message)."""
    from keyring.errors import KeyringError

    try:
        return action(service, name, *value)
    except KeyringError as exc:
        raise _unusable(exc, name) from None


class AgentSecrets:
    """The secrets of every agent: values in the credential store, names in ``index``."""

    def __init__(self, index: Path) -> None:
        self.index = index

    def names(self, agent: str) -> list[str]:
        """The names stored for ``agent``, sorted (the store is not asked)."""
        return sorted(self._read().get(check_agent(agent), ()))

    def set(self, agent: str, name: str, value: str,
            reserved: frozenset[str] = frozenset()) -> None:
        """Store ``value`` as ``agent``'s ``name`` (replacing one stored before)."""
        check_agent(agent)
        check_name(name, reserved)
        if not value:
            raise ValueError("secret value: empty")
        backend = _backend(name)
        with self._locked():
            index = self._read()
            names = set(index.get(agent, ()))
            if name not in names and len(names) >= _MAX_NAMES:
                raise ValueError(f"agent {agent!r} already has {_MAX_NAMES} secrets")
            self._write({**index, agent: sorted(names | {name})})
            try:
                _store_call(backend.set_password, _SERVICE + agent, name, value)
            except BaseException:
                self._write(index)
                raise

    def remove(self, agent: str, name: str) -> bool:
        """Forget ``agent``'s ``name``; whether it was stored."""
        check_agent(agent)
        with self._locked():
            index = self._read()
            names = set(index.get(agent, ()))
            if name not in names:
                return False
            backend = _backend(name)
            from keyring.errors import KeyringError, PasswordDeleteError

            try:
                backend.delete_password(_SERVICE + agent, name)
            except PasswordDeleteError as exc:  # already gone, or not deletable
                if _store_call(backend.get_password, _SERVICE + agent, name) is not None:
                    raise _unusable(exc, name) from None
            except KeyringError as exc:
                raise _unusable(exc, name) from None
            remaining = sorted(names - {name})
            if remaining:
                index[agent] = remaining
            else:
                index.pop(agent, None)
            self._write(index)
            return True

    def values(self, agent: str, skip: Collection[str] = ()
               ) -> tuple[dict[str, str], list[str]]:
        """``agent``'s stored values, except the names in ``skip`` (set for this run),
        and the names the store no longer holds. The store is not touched when
        ``agent`` has no secrets."""
        wanted = [n for n in self.names(agent) if n not in skip]
        if not wanted:
            return {}, []
        backend = _backend("=... ".join(wanted))
        found: dict[str, str] = {}
        missing: list[str] = []
        for name in wanted:
            value = _store_call(backend.get_password, _SERVICE + agent, name)
            if value:
                found[name] = value
            else:
                missing.append(name)
        return found, missing

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Hold the index's lock. A lock held past the wait raises
        :class:`~clanker.locking.LockTimeoutError` (exit 8, as for every lock of
        clanker's); a refused one is a ``ValueError`` naming it."""
        from clanker.locking import UnsafeLockError, exclusive

        with contextlib.ExitStack() as stack:
            try:
                stack.enter_context(exclusive(self.index.with_name(self.index.name + ".lock"),
                                              timeout=_LOCK_WAIT))
            except UnsafeLockError as exc:
                raise ValueError(f"the secrets index lock {exc}") from None
            yield

    def _read(self) -> dict[str, list[str]]:
        """The index; an unusable or corrupt one is refused (names are never guessed)."""
        from clanker.storage import UnusableFileError, parse_json, read_own_file

        try:
            raw = read_own_file(self.index, max_bytes=1024 * 1024)
        except UnusableFileError as exc:
            raise ValueError(f"the secrets index {exc}") from None
        if raw is None:
            return {}
        data = parse_json(raw)
        if not isinstance(data, dict) or not all(
                isinstance(k, str) and isinstance(v, list) and all(isinstance(n, str) for n in v)
                for k, v in data.items()):
            raise ValueError(f"the secrets index {self.index} is corrupt; "
                             "remove it and set the secrets again")
        return {k: list(v) for k, v in data.items()}

    def _write(self, index: dict[str, list[str]]) -> None:
        from clanker.storage import write_json_atomic

        write_json_atomic(self.index, index)
