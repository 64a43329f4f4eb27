"""A coder session as a grid terminal, its lifecycle straight from ACP.

The session registers with the grid like a launch (``clanker status`` and
``clanker watch`` list it) and reports, from the client's own events: a
prompt sent is ``turn_started`` (working), a permission request waiting for
the person is ``input_requested`` (needs input) until it is answered, and the
stop reason ends the turn (``end_turn`` and the other stops: done,
``cancelled``: interrupted, a failed turn: failed). Optional, like a launch's
attention: a grid that cannot start or refuses leaves the session running
without it, with one notice.
"""

from __future__ import annotations

import os
from typing import Any

from clanker._logging import get_logger
from clanker.paths import ClankerPaths

__all__ = ["CoderAttention"]

log = get_logger(__name__)

_STOPS = {"cancelled": "turn_interrupted"}
_TURN_EVENTS = {"turn-started": "turn_started", "turn-failed": "turn_failed"}


class CoderAttention:
    """Reports one coder session; call it with each client event, then :meth:`close`."""

    def __init__(self, paths: ClankerPaths, harness: str, cwd: str) -> None:
        self._paths = paths
        self._harness = harness
        self._cwd = cwd
        self._client: Any = None
        self._registration: Any = None
        self._session: str | None = None
        self._turns = 0
        self.notice: str | None = None

    def start(self) -> None:
        """Register the terminal (never raises: a failure becomes :attr:`notice`)."""
        from clanker.grid.client import GridClient
        from clanker.grid.daemon import ensure_running
        from clanker.grid.errors import GridError

        try:
            self._client = GridClient(ensure_running(self._paths))
            self._registration = self._client.register(
                harness=self._harness, workspace=self._cwd, cwd=self._cwd,
                launcher_pid=os.getpid())
        except (GridError, OSError, ValueError) as exc:
            self._client = None
            self.notice = f"attention: the grid is unavailable ({type(exc).__name__})"
            log.info("coder attention: %s", exc)

    def __call__(self, event: dict[str, Any]) -> None:
        envelope = self._envelope(event)
        if envelope is None or self._client is None or self._session is None:
            return
        try:
            self._client.deliver(self._registration.terminal, self._registration.token,
                                 [{"event": envelope[0], "scope": "root",
                                   "sessionId": self._session, **envelope[1]}])
        except Exception as exc:  # best effort: the session goes on without attention
            log.info("coder attention: delivery failed: %s", exc)

    def _envelope(self, event: dict[str, Any]) -> tuple[str, dict[str, str]] | None:
        kind = event.get("event")
        if kind == "session":
            self._session = str(event["sessionId"])
            return "session_started", {}
        if kind == "turn-started":
            self._turns += 1
        turn = {"turnId": f"turn-{self._turns}"}
        if kind in ("asking", "approval") and event.get("input"):
            name = "input_requested" if kind == "asking" else "input_resolved"
            return name, {**turn, "inputId": str(event["input"])}
        if kind == "turn-ended":
            return _STOPS.get(str(event.get("stopReason")), "turn_completed"), turn
        found = _TURN_EVENTS.get(str(kind))
        return None if found is None else (found, turn)

    def close(self) -> None:
        """Retire the terminal (never raises)."""
        if self._client is not None:
            try:
                self._client.retire(self._registration.terminal, self._registration.token)
            except Exception:
                log.debug("coder attention: the grid did not confirm retirement")
            self._client = None
