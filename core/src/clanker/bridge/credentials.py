"""Bridge credentials: one per launched terminal, of which the grid keeps only a digest.

A credential is ``ckb_`` and 64 hex digits (256 bits from :mod:`secrets`). It
is minted for one terminal and bound to what the grid's record said at that
moment (terminal, harness, workspace, launch directory, environment,
launcher), and it carries the set of capability names it was granted. The raw
value leaves the grid once, in the ``bridge-grant`` reply, and then lives
only in the agent's environment; the store keeps ``sha256(token)``.

It is independent of the terminal's attention credential: another prefix,
another store, another check. An attention token never has the shape of a
bridge credential and is never in this store, and a bridge credential is never
in the attention store.

Lookup is by digest: the token is 256 random bits, so learning anything about
a dictionary probe of its SHA-256 tells an attacker nothing about another one.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable

from attrs import frozen

from clanker.bridge import wire

__all__ = ["Binding", "BridgeCredentials", "Grant", "digest"]


def digest(token: str) -> bytes:
    """The SHA-256 the store keeps for ``token``."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


@frozen(kw_only=True)
class Binding:
    """The grid's record of the terminal when its credential was minted."""

    terminal: str
    harness: str
    workspace: str | None
    launch_dir: str
    environment: str
    launcher_pid: int


@frozen(kw_only=True)
class Grant:
    """A live credential: whom it was minted for, and what it may run."""

    binding: Binding
    names: frozenset[str]


class BridgeCredentials:
    """The live bridge credentials, as digests (one per terminal)."""

    def __init__(self) -> None:
        self._grants: dict[bytes, Grant] = {}
        self._digests: dict[str, bytes] = {}

    def mint(self, binding: Binding, names: Iterable[str]) -> str:
        """Mint ``binding.terminal``'s credential for ``names`` and return the raw value
        (the only copy). A terminal that had one has it revoked first (rotation)."""
        self.revoke(binding.terminal)
        token = wire.TOKEN_PREFIX + secrets.token_hex(wire.TOKEN_HEX // 2)
        key = digest(token)
        self._grants[key] = Grant(binding=binding, names=frozenset(names))
        self._digests[binding.terminal] = key
        return token

    def adopt(self, binding: Binding, names: Iterable[str], token: str) -> None:
        """Take ``token`` as ``binding.terminal``'s credential for ``names``: one its
        agent already holds from a grid that went away. Raises ``ValueError`` for a
        malformed token, one that is live, or a terminal that has a credential."""
        if not wire.is_bridge_token(token):
            raise ValueError("not a bridge credential")
        key = digest(token)
        if key in self._grants or binding.terminal in self._digests:
            raise ValueError("that credential or terminal is already live")
        self._grants[key] = Grant(binding=binding, names=frozenset(names))
        self._digests[binding.terminal] = key

    def resolve(self, token: object) -> Grant | None:
        """The grant of a live credential, or ``None`` (malformed, unknown or revoked)."""
        if not wire.is_bridge_token(token):
            return None
        assert isinstance(token, str)
        return self._grants.get(digest(token))

    def grant_of(self, terminal: str) -> Grant | None:
        """The live grant of ``terminal``, if it has one."""
        key = self._digests.get(terminal)
        return None if key is None else self._grants.get(key)

    def revoke(self, terminal: str) -> bool:
        """Forget ``terminal``'s credential; say whether there was one."""
        key = self._digests.pop(terminal, None)
        if key is None:
            return False
        self._grants.pop(key, None)
        return True

    def __len__(self) -> int:
        return len(self._grants)

    def __repr__(self) -> str:
        return f"BridgeCredentials({len(self._grants)} live)"
