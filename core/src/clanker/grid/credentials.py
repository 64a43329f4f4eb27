"""Terminal credentials: 256-bit random tokens of which the grid keeps only digests.

The raw token leaves the grid exactly once, in the ``register`` reply, and
then lives only in the launched agent's environment. The store keeps
``sha256(token)`` per terminal, compares digests in constant time and forgets
a credential on revocation, so a revoked or never-minted token proves nothing.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from typing import Final

__all__ = ["TOKEN_PATTERN", "CredentialStore", "digest"]

TOKEN_PATTERN: Final = re.compile(r"[0-9a-f]{64}")
"""A raw token: 32 random bytes as lowercase hex."""

_NOTHING: Final = hashlib.sha256(b"").digest()


def digest(token: str) -> bytes:
    """Return the SHA-256 digest the store keeps for ``token``."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


class CredentialStore:
    """One credential per terminal, held as a digest only."""

    def __init__(self) -> None:
        self._digests: dict[str, bytes] = {}

    def mint(self, terminal: str) -> str:
        """Create ``terminal``'s credential and return the raw token (the only copy)."""
        if terminal in self._digests:
            raise ValueError("that terminal already has a credential")
        token = secrets.token_hex(32)
        self._digests[terminal] = digest(token)
        return token

    def adopt(self, terminal: str, token: str) -> None:
        """Take ``token`` as ``terminal``'s credential: one a launcher re-presents for
        its terminal after the grid that minted it went away (its harness holds it and
        cannot be handed another). Raises ``ValueError`` for a token that is not one
        this store could have minted, or a terminal that has a credential."""
        if terminal in self._digests:
            raise ValueError("that terminal already has a credential")
        if TOKEN_PATTERN.fullmatch(token) is None:
            raise ValueError("not a terminal credential")
        self._digests[terminal] = digest(token)

    def verify(self, terminal: str, token: object) -> bool:
        """Say whether ``token`` is ``terminal``'s live credential (constant-time compare)."""
        expected = self._digests.get(terminal)
        well_formed = isinstance(token, str) and TOKEN_PATTERN.fullmatch(token) is not None
        candidate = digest(token) if well_formed and isinstance(token, str) else _NOTHING
        # Always compare, so an unknown terminal costs the same as a wrong token.
        matches = hmac.compare_digest(candidate, expected if expected is not None else _NOTHING)
        return matches and well_formed and expected is not None

    def revoke(self, terminal: str) -> bool:
        """Forget ``terminal``'s credential; say whether there was one."""
        return self._digests.pop(terminal, None) is not None

    def __contains__(self, terminal: object) -> bool:
        return terminal in self._digests

    def __len__(self) -> int:
        return len(self._digests)

    def __repr__(self) -> str:
        return f"CredentialStore({len(self._digests)} live)"
