"""The ACP client: one agent process, one session, turns answered by the ladder.

Protocol v1 (``protocolVersion: 1``) with the ``fs`` and ``terminal`` client
capabilities off, so the agent does its own file and shell work and every
effect reaches clanker as a permission request. Updates are applied to the
:class:`~clanker.acp.state.SessionState` in arrival order and passed on as
events; permission requests are answered by the
:class:`~clanker.acp.policy.Policy` (asking the person through ``ask`` when it
says so). :meth:`AcpClient.cancel` answers every pending permission request
``cancelled``, as the protocol requires, before the agent stops the turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from clanker.acp import wire
from clanker.acp.connection import METHOD_NOT_FOUND, AgentExited, Connection, RemoteError
from clanker.acp.errors import CoderError, CoderFailure
from clanker.acp.policy import Answer, Decision, PermissionRequest, Policy
from clanker.acp.state import SessionState
from clanker.acp.transcript import Redactor, Transcript
from clanker.acp.transport import INITIALIZE_TIMEOUT, AgentProcess
from clanker.errors import ErrorKind, HarnessCapabilityError

__all__ = ["INITIALIZE_TIMEOUT", "PROTOCOL_VERSION", "STOP_REASONS", "AcpClient", "Ask",
           "EventSink"]

PROTOCOL_VERSION: Final = wire.PROTOCOL_VERSION
STOP_REASONS: Final = frozenset({"end_turn", "max_tokens", "max_turn_requests", "refusal",
                                 "cancelled"})
_CLOSE_TIMEOUT: Final = 2.0
_AUTH_REQUIRED: Final = -32000
_USAGE_LIMIT: Final = re.compile(r"usage limit|rate limit|quota|too many requests", re.I)
_SIGN_IN: Final = re.compile(r"auth(?:entication)? required|not (?:signed|logged) in|"
                             r"unauthori[sz]ed|invalid api key|expired token", re.I)
_RESETS: Final = re.compile(r"resets?\s+(?:at\s+)?([^.;)\n]{1,40})", re.I)

Ask = Callable[[PermissionRequest, Decision], Awaitable[Answer]]
EventSink = Callable[[dict[str, Any]], None]


class AcpClient:
    """Drive one agent. Use :meth:`start`, then a session method, then :meth:`prompt`."""

    def __init__(self, process: AgentProcess, *, policy: Policy, transcript: Transcript,
                 on_event: EventSink, ask: Ask | None = None, harness: str = "agent",
                 session_meta: Mapping[str, Any] | None = None) -> None:
        self.process = process
        self.policy = policy
        self.state = SessionState()
        self.session_id: str | None = None
        self.agent: dict[str, Any] = {}
        """The ``initialize`` result: ``agentCapabilities``, ``agentInfo``, ``authMethods``."""
        self.refusals = 0
        """Permission requests the ladder refused because nobody could be asked."""
        self._transcript = transcript
        self._on_event = on_event
        self._ask = ask
        self._harness = harness
        self._session_meta = dict(session_meta or {})
        self._pending: dict[asyncio.Future[Decision], PermissionRequest] = {}
        self._replaying = False
        self._inputs = 0
        self._connection = Connection(process, observe=transcript.record,
                                      on_notification=self._notified, on_request=self._requested)
        self._reader: asyncio.Task[None] | None = None

    # -- lifecycle -------------------------------------------------------

    async def start(self, *, timeout: float = INITIALIZE_TIMEOUT,
                    meanwhile: Callable[[], object] | None = None) -> dict[str, Any]:
        """Send ``initialize``; return the agent's answer. Raises ``timeout`` when
        it does not answer within ``timeout`` seconds, ``command-failed`` when it
        exits first, ``unsupported`` for another protocol version.

        ``meanwhile`` is called once the frame is written, before the answer is
        awaited: what the client needs only later (the configured ladder, the
        interface) is loaded while the agent starts.

        When the process already wrote ``initialize`` as it started
        (:attr:`AgentProcess.first_line`, which must be that very frame), it is
        recorded with the time it was written and its answer awaited."""
        self._reader = asyncio.get_running_loop().create_task(self._connection.run())
        request = wire.initialize_request()
        written = self.process.first_line_at
        if written is not None:
            if self.process.first_line != wire.encode(request):
                raise ValueError("start: the agent's first line is not this client's initialize")
            self._transcript.record("out", request, at=written)
            answer = self._connection.written_request(request)
        else:
            answer = await self._sent("initialize", request["params"])
        try:
            self._event({"event": "agent-started", "pid": self.process.pid})
            if meanwhile is not None:
                meanwhile()
            # The bound starts once that is done: what ran meanwhile is not the agent's time.
            async with asyncio.timeout(timeout):
                result = await self._answer("initialize", answer)
        except TimeoutError:
            raise HarnessCapabilityError(
                ErrorKind.TIMEOUT, f"no answer to initialize within {timeout:g}s",
                harness=self._harness) from None
        finally:
            answer.cancel()
        if not isinstance(result, dict) or result.get("protocolVersion") != PROTOCOL_VERSION:
            version = result.get("protocolVersion") if isinstance(result, dict) else None
            raise HarnessCapabilityError(ErrorKind.UNSUPPORTED,
                                         f"ACP protocol version {version!r}, not 1",
                                         harness=self._harness)
        self.agent = result
        return result

    @property
    def agent_exited(self) -> bool:
        """Whether the agent's output has ended (it exited or closed stdout): no
        further turn can run on this client."""
        return self._connection.closed

    def capability(self, *path: str) -> bool:
        """Whether the agent advertised ``agentCapabilities.<path>``."""
        node: object = self.agent.get("agentCapabilities")
        for name in path:
            if not isinstance(node, dict) or name not in node:
                return False
            node = node[name]
        return node is not None and node is not False

    async def new_session(self, cwd: str) -> str:
        result = await self._call("session/new", self._session_params(cwd=cwd, mcpServers=[]))
        session_id = result.get("sessionId") if isinstance(result, dict) else None
        if not isinstance(session_id, str) or not session_id:
            raise HarnessCapabilityError(ErrorKind.PARSE_FAILURE, "session/new: no sessionId",
                                         harness=self._harness)
        self._session_result(result)
        self._bind(session_id)
        return session_id

    def _session_params(self, **params: Any) -> dict[str, Any]:
        """A session's opening parameters, with the server's own ``_meta`` if it has one."""
        return {**params, "_meta": self._session_meta} if self._session_meta else params

    async def resume(self, session_id: str, cwd: str) -> str:
        """Continue ``session_id``: ``session/resume``, else ``session/load`` (its
        replayed updates arrive as history); never a new session. Returns the
        method that worked; raises ``resume-failed`` when neither did."""
        params = self._session_params(sessionId=session_id, cwd=cwd, mcpServers=[])
        reasons = []
        for method, advertised in (("session/resume", self.capability("sessionCapabilities",
                                                                      "resume")),
                                   ("session/load", self.capability("loadSession"))):
            if not advertised:
                reasons.append(f"{method} not offered")
                continue
            self._replaying = method == "session/load"
            try:
                result = await self._call(method, params, remote_errors=False)
            except RemoteError as exc:
                reasons.append(f"{method}: {exc.code}")
                continue
            finally:
                self._replaying = False
            self._session_result(result)
            if method == "session/resume":  # no replay: the history is clanker's own record
                self._emit_history(session_id)
            self._bind(session_id)  # a load answer carries no id: keep the one asked for
            self._event({"event": "resumed", "method": method, "sessionId": session_id})
            return method
        raise CoderError(CoderFailure.RESUME_FAILED,
                         f"session {session_id} could not be continued ({'; '.join(reasons)})")

    async def choose(self, category: str, value: str) -> None:
        """Set the session's config option of ``category`` (``model``, ``mode``,
        ``thought_level``) to ``value`` with ``session/set_config_option``.

        Raises ``unsupported`` when the agent offers no such option and
        :class:`ValueError` (naming the choices) for a value it does not list."""
        if self.session_id is None:
            raise RuntimeError("choose: no session yet")
        option = next((o for o in self.state.config_options if isinstance(o, dict)
                       and (o.get("category") == category or o.get("id") == category)), None)
        if option is None or not isinstance(option.get("id"), str):
            raise HarnessCapabilityError(ErrorKind.UNSUPPORTED, f"choosing the {category}",
                                         harness=self._harness)
        values = [c.get("value") for c in option.get("options") or [] if isinstance(c, dict)]
        if value not in values:
            shown = ", ".join(str(v) for v in values[:20])
            raise ValueError(f"{category} {value!r} is not offered (offered: {shown})")
        result = await self._call("session/set_config_option", {
            "sessionId": self.session_id, "configId": option["id"], "value": value})
        self._session_result(result)
        self._event({"event": "configured", "category": category, "value": value})

    async def list_sessions(self, cwd: str) -> list[dict[str, Any]]:
        """``session/list`` for ``cwd`` (first page); ``unsupported`` when not advertised."""
        if not self.capability("sessionCapabilities", "list"):
            raise HarnessCapabilityError(ErrorKind.UNSUPPORTED, "session/list",
                                         harness=self._harness)
        result = await self._call("session/list", {"cwd": cwd})
        sessions = result.get("sessions") if isinstance(result, dict) else None
        return [s for s in sessions if isinstance(s, dict)] if isinstance(sessions, list) else []

    async def prompt(self, text: str, *, idle_timeout: float | None = None) -> str:
        """Run one turn; return its stop reason. Raises ``turn-failed`` when the agent
        dies or errs, ``usage-limit`` when its provider refused for quota,
        ``unauthenticated`` when it says it needs signing in, and
        ``silent`` when ``idle_timeout`` seconds pass without a frame from the agent
        while nobody is being asked (the turn is cancelled first)."""
        if self.session_id is None:
            raise RuntimeError("prompt: no session yet")
        self.state.new_turn()
        self._event({"event": "turn-started"})
        params = {"sessionId": self.session_id, "prompt": [{"type": "text", "text": text}]}
        try:
            result = await self._bounded_turn(params, idle_timeout)
        except AgentExited:
            self._event({"event": "turn-failed", "reason": "agent-exited"})
            raise CoderError(CoderFailure.TURN_FAILED, "the agent exited during the turn"
                             f"{self._resume_hint()}") from None
        except RemoteError as exc:
            raise self._turn_error(exc) from None
        finally:
            self._answer_pending(None)
        reason = result.get("stopReason") if isinstance(result, dict) else None
        if reason not in STOP_REASONS:
            self._event({"event": "turn-failed", "reason": "no-stop-reason"})
            raise CoderError(CoderFailure.TURN_FAILED, f"the turn ended without a known stop "
                                                       f"reason ({str(reason)[:40]!r})")
        self._event({"event": "turn-ended", "stopReason": reason})
        return str(reason)

    async def _bounded_turn(self, params: dict[str, Any], idle_timeout: float | None) -> Any:
        turn = asyncio.get_running_loop().create_task(
            self._connection.request("session/prompt", params))
        try:
            seen = self._connection.received
            while True:
                done, _ = await asyncio.wait({turn}, timeout=idle_timeout)
                if done:
                    return turn.result()
                moved, seen = self._connection.received != seen, self._connection.received
                if moved or self._pending:
                    continue  # working, or waiting for the person: not idle
                await self.cancel()
                await asyncio.wait({turn}, timeout=idle_timeout)  # its answer changes nothing
                self._event({"event": "turn-failed", "reason": "silent"})
                raise CoderError(CoderFailure.SILENT,
                                 f"the agent sent nothing for {idle_timeout:g}s; the turn was "
                                 "cancelled")
        finally:
            if not turn.done():
                turn.cancel()
                await asyncio.gather(turn, return_exceptions=True)

    async def cancel(self) -> None:
        """Ask the agent to stop the turn; answer every pending permission ``cancelled``."""
        if self.session_id is None:
            return
        self._answer_pending(Decision("cancelled", None, "the turn was cancelled"))
        self._event({"event": "cancel"})
        with contextlib.suppress(AgentExited):  # gone already: the turn fails on its own
            await self._connection.notify("session/cancel", {"sessionId": self.session_id})

    async def close(self) -> None:
        """Close the session where the agent offers ``session/close`` (briefly: it is
        a courtesy), then stop the agent (SIGTERM, then SIGKILL) and every task."""
        self._answer_pending(Decision("cancelled", None, "the client closed"))
        if (self.session_id is not None and not self._connection.closed
                and self.capability("sessionCapabilities", "close")):
            with contextlib.suppress(AgentExited, RemoteError, TimeoutError):
                async with asyncio.timeout(_CLOSE_TIMEOUT):
                    await self._connection.request("session/close",
                                                   {"sessionId": self.session_id})
        try:
            await self._connection.aclose()
            await self.process.close()
        finally:
            if self._reader is not None:
                self._reader.cancel()
                await asyncio.gather(self._reader, return_exceptions=True)
            if self.process.dropped_lines:
                self._transcript.record("clanker", {"event": "dropped-lines",
                                                    "count": self.process.dropped_lines})
            self._transcript.close()

    # -- inbound ---------------------------------------------------------

    def _notified(self, method: str, params: Any) -> None:
        if method != "session/update" or not isinstance(params, dict):
            return  # kept in the transcript; nothing to render
        update = params.get("update")
        block = self.state.apply(update)
        kind = update.get("sessionUpdate") if isinstance(update, dict) else None
        event: dict[str, Any] = {"event": "update", "kind": kind}
        if self._replaying:
            event["history"] = True
        if block is not None:
            event["block"] = block.key
            if block.kind == "unsupported":
                event["unsupported"] = True
        if isinstance(update, dict) and kind in ("agent_message_chunk", "agent_thought_chunk",
                                                 "user_message_chunk"):
            content = update.get("content")
            if isinstance(content, dict) and isinstance(content.get("text"), str):
                event["text"] = content["text"]
        self._emit(event)

    async def _requested(self, method: str, params: Any) -> Any:
        if method != "session/request_permission":
            # fs/* and terminal/* were not advertised; nothing else is the client's.
            raise RemoteError(METHOD_NOT_FOUND, f"{method} is not offered by this client")
        request = PermissionRequest.from_params(params)
        call = params.get("toolCall") if isinstance(params, dict) else None
        call_id = call.get("toolCallId") if isinstance(call, dict) else None
        decision = self.policy.decide(request)
        event: dict[str, Any] = {"event": "approval", "toolCallId": call_id,
                                 "title": request.title, "kind": request.tool_kind}
        if decision.verdict == "ask":
            self._inputs += 1
            event["input"] = f"input-{self._inputs}"
            self._event({**event, "event": "asking"})
            decision = await self._asked(request, decision, params)
        elif decision.verdict != "allow" and not self.policy.interactive:
            self.refusals += 1
        self._event({**event, "verdict": decision.verdict, "rule": decision.rule})
        return {"outcome": decision.outcome()}

    async def _asked(self, request: PermissionRequest, decision: Decision,
                     params: object) -> Decision:
        """Ask the person; a cancel, or a session approval of the same kind, may
        answer first."""
        future: asyncio.Future[Decision] = asyncio.get_running_loop().create_future()
        self._pending[future] = request
        asking = None
        if self._ask is not None:
            ask = self._ask

            # What the person is shown is redacted like everything else rendered; the
            # ladder keeps deciding on the request as sent.
            shown = PermissionRequest.from_params(self.redact.value(params))

            async def person() -> None:
                choice = await ask(shown, decision)
                if not future.done():
                    answered, self.policy = self.policy.answer(request, choice)
                    future.set_result(answered)
                    if choice is Answer.SESSION:
                        self._resolve_remembered()

            asking = asyncio.get_running_loop().create_task(person())
        else:
            future.set_result(self.policy.answer(request, Answer.REJECT)[0])
        try:
            return await future
        finally:
            self._pending.pop(future, None)
            if asking is not None and not asking.done():
                asking.cancel()

    def _resolve_remembered(self) -> None:
        """A kind approved for the session answers its other pending requests too."""
        for future, request in list(self._pending.items()):
            if future.done():
                continue
            decision = self.policy.decide(request)
            if decision.verdict == "allow":
                future.set_result(decision)

    def _answer_pending(self, decision: Decision | None) -> None:
        for future in list(self._pending):
            if not future.done():
                future.set_result(decision or Decision("cancelled", None, "the turn ended"))

    # -- helpers ---------------------------------------------------------

    async def _call(self, method: str, params: object, *, remote_errors: bool = True) -> Any:
        answer = await self._sent(method, params)
        try:
            return await self._answer(method, answer, remote_errors=remote_errors)
        finally:
            answer.cancel()

    async def _sent(self, method: str, params: object) -> asyncio.Future[Any]:
        try:
            return await self._connection.send_request(method, params)
        except AgentExited:
            raise HarnessCapabilityError(ErrorKind.COMMAND_FAILED,
                                         f"the agent exited before answering {method}",
                                         harness=self._harness) from None

    async def _answer(self, method: str, answer: asyncio.Future[Any], *,
                      remote_errors: bool = True) -> Any:
        try:
            return await answer
        except AgentExited:
            raise HarnessCapabilityError(ErrorKind.COMMAND_FAILED,
                                         f"the agent exited before answering {method}",
                                         harness=self._harness) from None
        except RemoteError as exc:
            if not remote_errors:
                raise
            kind = (ErrorKind.UNAUTHENTICATED if exc.code == _AUTH_REQUIRED
                    else ErrorKind.COMMAND_FAILED)
            raise HarnessCapabilityError(kind, f"{method}: error {exc.code}",
                                         harness=self._harness) from None

    def _emit_history(self, session_id: str) -> None:
        from clanker.acp.render import render_state, replay
        from clanker.acp.transcript import read_transcript, transcript_path

        try:
            records = list(read_transcript(transcript_path(self._transcript.directory,
                                                           session_id)))
        except (ValueError, OSError):
            return  # no transcript of it here: nothing to show
        self._emit({"event": "history", "text": render_state(replay(records))})

    def _bind(self, session_id: str) -> None:
        self.session_id = session_id
        try:
            self._transcript.bind(session_id)
        except ValueError:  # an id that is no file name: the transcript gets a name of its own
            self._transcript.bind(f"session-{abs(hash(session_id)):x}")
        self._event({"event": "session", "sessionId": session_id})

    @property
    def redact(self) -> Redactor:
        """The redactor of this session: every value clanker injected into the agent."""
        return self._transcript.redact

    @property
    def transcript_path(self) -> str | None:
        path = self._transcript.path
        return None if path is None else str(path)

    def _session_result(self, result: object) -> None:
        if not isinstance(result, dict):
            return
        modes = result.get("modes")
        if isinstance(modes, dict) and isinstance(modes.get("currentModeId"), str):
            self.state.mode = modes["currentModeId"]
        options = result.get("configOptions")
        if isinstance(options, list):
            self.state.config_options = options

    def _turn_error(self, exc: RemoteError) -> CoderError:
        text = f"{exc.remote_message} {exc.data if isinstance(exc.data, str | dict) else ''}"
        if _USAGE_LIMIT.search(text):
            resets = _RESETS.search(text)
            when = f", resets {resets.group(1).strip()}" if resets else ""
            self._event({"event": "turn-failed", "reason": "usage-limit",
                         "resets": resets.group(1).strip() if resets else None})
            return CoderError(CoderFailure.USAGE_LIMIT,
                              f"the agent hit a usage limit{when}{self._resume_hint()}")
        if exc.code == _AUTH_REQUIRED or _SIGN_IN.search(text):
            self._event({"event": "turn-failed", "reason": "unauthenticated", "code": exc.code})
            return CoderError(CoderFailure.UNAUTHENTICATED,
                              f"the agent needs signing in (error {exc.code}): sign in, then "
                              f"send the prompt again{self._resume_hint()}")
        self._event({"event": "turn-failed", "reason": "error", "code": exc.code})
        return CoderError(CoderFailure.TURN_FAILED, f"the agent answered the prompt with "
                                                    f"error {exc.code}")

    def _emit(self, event: dict[str, Any]) -> None:
        redacted = self._transcript.redact.value(event)
        assert isinstance(redacted, dict)
        self._on_event(redacted)

    def _resume_hint(self) -> str:
        return f"; continue it with --resume {self.session_id}" if self.session_id else ""

    def _event(self, event: dict[str, Any]) -> None:
        self._transcript.record("clanker", event)
        self._emit(event)
