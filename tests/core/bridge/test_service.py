"""The capability plane's authority: grants, live callers, bounded calls, typed refusals."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from clanker.bridge import wire
from clanker.bridge.credentials import Binding, BridgeCredentials
from clanker.bridge.declaration import (
    Annotations,
    BridgeHost,
    Caller,
    CapabilityRefused,
    PeerAgent,
    RateLimit,
    ResultRefused,
    Signal,
    check_result,
    define_capability,
)
from clanker.bridge.input import Arguments, Input, Integer, Text
from clanker.bridge.service import BridgeRefusal, BridgeService
from clanker.bridge.shipped import NOTIFY_BURST, NOTIFY_EVERY, SHIPPED
from clanker.execution import CommandRequest, CommandResult

BINDING = Binding(terminal="t-1", harness="fake-agent", workspace="/w", launch_dir="/w/app",
                  environment="local", launcher_pid=4242)


class Host:
    def __init__(self) -> None:
        self.said: list[str] = []

    def peers(self) -> tuple[PeerAgent, ...]:
        return ()

    def notify(self, message: str) -> int:
        self.said.append(message)
        return 1

    async def run_command(self, request: CommandRequest) -> CommandResult:
        return CommandResult("", "", 128)


class Port:
    """The grid, as the service sees it: which records are live."""

    def __init__(self) -> None:
        self.live: dict[str, Binding] = {BINDING.terminal: BINDING}
        self.host = Host()

    def binding(self, terminal: str) -> Binding | None:
        return self.live.get(terminal)

    def host_for(self, binding: Binding) -> BridgeHost:
        return self.host


seen: list[tuple[dict[str, Any], Caller]] = []


async def echo(arguments: Arguments, caller: Caller, signal: Signal) -> dict[str, Any]:
    seen.append((dict(arguments), caller))
    return {"got": dict(arguments)}


ECHO = define_capability(name="echo", description="Echo.",
                         input=Input(n=Integer("A number.", minimum=0, maximum=9)), run=echo)
OTHER = define_capability(name="other", description="Other.", input=Input(), run=echo)


def service(*capabilities: Any, clock: Any = None, **options: Any) -> tuple[BridgeService, Port]:
    port = Port()
    kwargs = {"clock": clock} if clock is not None else {}
    return BridgeService(port, capabilities or (ECHO, OTHER), **kwargs, **options), port


def refusal(call: Any) -> BridgeRefusal:
    def attempt() -> None:
        if asyncio.iscoroutine(call):
            asyncio.run(call)
        else:
            call()

    with pytest.raises(BridgeRefusal) as refused:
        attempt()
    return refused.value


def test_a_credential_is_256_bits_with_a_prefix_and_only_its_digest_is_kept() -> None:
    store = BridgeCredentials()
    token = store.mint(BINDING, ["echo"])
    assert wire.is_bridge_token(token) and token.startswith("ckb_") and len(token) == 68
    assert token not in repr(vars(store))
    assert store.resolve(token) is not None
    assert store.resolve(token.upper()) is None
    assert store.resolve("ab" * 32) is None  # an attention token's shape
    assert store.revoke("t-1") and store.resolve(token) is None
    assert not store.revoke("t-1")


def test_listing_shows_exactly_the_grant() -> None:
    bridge, _ = service()
    token = bridge.grant(BINDING, ["echo"])
    assert [entry["name"] for entry in bridge.entries(token)] == ["echo"]
    assert bridge.granted("t-1") == ("echo",)
    every = bridge.all_entries()
    assert [e["name"] for e in every] == ["echo", "other"]
    assert all(e["invokable"] is False for e in every)


def test_an_ungranted_name_behaves_exactly_as_an_unknown_one() -> None:
    bridge, _ = service()
    token = bridge.grant(BINDING, ["echo"])
    for name in ("other", "nothing", "ECHO", ""):
        assert refusal(lambda name=name: bridge.describe(token, name)).word == \
            wire.UNKNOWN_CAPABILITY
        unknown = refusal(bridge.call(token, name))
        assert (unknown.word, unknown.message) == (wire.UNKNOWN_CAPABILITY, None)


def test_granting_an_unknown_name_mints_nothing() -> None:
    bridge, _ = service()
    assert refusal(lambda: bridge.grant(BINDING, ["echo", "nope"])).word == \
        wire.UNKNOWN_CAPABILITY
    assert bridge.granted("t-1") == ()


def test_a_grant_again_rotates_the_credential() -> None:
    bridge, _ = service()
    first = bridge.grant(BINDING, ["echo"])
    second = bridge.grant(BINDING, ["other"])
    assert refusal(lambda: bridge.entries(first)).word == wire.UNAUTHORIZED
    assert [e["name"] for e in bridge.entries(second)] == ["other"]


@pytest.mark.parametrize("change", ["retired", "another record", "revoked"])
def test_the_caller_is_resolved_live_on_every_request(change: str) -> None:
    bridge, port = service()
    token = bridge.grant(BINDING, ["echo"])
    assert bridge.caller(token).launch_dir == "/w/app"
    if change == "retired":
        del port.live["t-1"]  # exited: no authority even before revocation
    elif change == "another record":
        port.live["t-1"] = Binding(terminal="t-1", harness="fake-agent", workspace="/elsewhere",
                                   launch_dir="/w/app", environment="local", launcher_pid=4242)
    else:
        bridge.revoke("t-1")
    for call in (lambda: bridge.entries(token), lambda: bridge.describe(token, "echo")):
        assert refusal(call).word == wire.UNAUTHORIZED
    assert refusal(bridge.call(token, "echo", arguments={"n": 1})).word == wire.UNAUTHORIZED


@pytest.mark.parametrize("token", [None, "", "ckb_" + "0" * 64, "ab" * 32, 7, ["ckb_"]])
def test_a_missing_or_forged_credential_is_unauthorized(token: object) -> None:
    bridge, _ = service()
    bridge.grant(BINDING, ["echo"])
    assert refusal(lambda: bridge.entries(token)).word == wire.UNAUTHORIZED


def test_only_parsed_arguments_reach_run_and_the_caller_comes_from_the_grid() -> None:
    bridge, _ = service()
    token = bridge.grant(BINDING, ["echo"])
    seen.clear()
    bad = refusal(bridge.call(token, "echo", arguments={"n": 1, "terminal": "t-2"}))
    assert bad.word == wire.INVALID_ARGUMENTS
    assert bad.message == "terminal: is not an argument of this capability"
    assert refusal(bridge.call(token, "echo", arguments={"n": "1"})).word == \
        wire.INVALID_ARGUMENTS
    assert seen == []
    assert asyncio.run(bridge.call(token, "echo", text_arguments={"n": "3"})) == {"got": {"n": 3}}
    [(arguments, caller)] = seen
    assert arguments == {"n": 3}
    assert (caller.terminal, caller.harness, caller.workspace, caller.granted) == (
        "t-1", "fake-agent", "/w", ("echo",))


def test_a_declared_rate_limit_holds_per_credential_and_only_counts_admitted_calls() -> None:
    now = [1000.0]
    limited = define_capability(name="ping", description="Ping.", input=Input(), run=echo,
                                rate_limit=RateLimit(burst=2, per_seconds=10.0))
    bridge, port = service(limited, clock=lambda: now[0])
    token = bridge.grant(BINDING, ["ping"])
    other = Binding(terminal="t-2", harness="fake-agent", workspace="/w", launch_dir="/w",
                    environment="local", launcher_pid=4242)
    port.live["t-2"] = other
    second = bridge.grant(other, ["ping"])
    assert refusal(bridge.call(token, "ping", arguments={"x": 1})).word == \
        wire.INVALID_ARGUMENTS  # refused before the rate is consumed
    for _ in range(2):
        asyncio.run(bridge.call(token, "ping"))
    spent = refusal(bridge.call(token, "ping"))
    assert spent.word == wire.RATE_LIMITED
    assert spent.message == "ping allows 2 calls, then one every 10 s; try again in 10 s"
    asyncio.run(bridge.call(second, "ping"))  # another credential's own budget
    now[0] += 10.0
    asyncio.run(bridge.call(token, "ping"))
    assert refusal(bridge.call(token, "ping")).word == wire.RATE_LIMITED


def test_notify_is_limited_to_three_then_one_every_ten_seconds() -> None:
    now = [0.0]
    bridge, port = service(*SHIPPED, clock=lambda: now[0])
    token = bridge.grant(BINDING, ["clanker_notify"])
    assert (NOTIFY_BURST, NOTIFY_EVERY) == (3, 10.0)
    for index in range(3):
        assert asyncio.run(bridge.call(token, "clanker_notify",
                                       arguments={"message": f"m{index}"})) == {"delivered": 1}
    assert refusal(bridge.call(token, "clanker_notify", arguments={"message": "m"})).word == \
        wire.RATE_LIMITED
    now[0] += 10.0
    asyncio.run(bridge.call(token, "clanker_notify", arguments={"message": "later"}))
    assert port.host.said == ["m0", "m1", "m2", "later"]


def test_a_call_past_its_time_is_cut_off_and_its_signal_aborted() -> None:
    signals: list[Signal] = []
    cancelled = []

    async def stuck(arguments: Arguments, caller: Caller, signal: Signal) -> dict[str, Any]:
        signals.append(signal)
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(signal.aborted)
            raise
        return {}

    slow = define_capability(name="slow", description="Slow.", input=Input(), run=stuck,
                             timeout=0.01)
    bridge, _ = service(slow)
    token = bridge.grant(BINDING, ["slow"])
    late = refusal(bridge.call(token, "slow"))
    assert (late.word, late.message) == (wire.TIMEOUT, "slow did not finish within 0.01 s")
    assert signals[0].aborted and signals[0].reason == "timeout"
    assert cancelled == [True]  # aborted before the task was cancelled
    assert bridge.running == 0


def test_a_cancelled_call_aborts_its_signal() -> None:
    signals: list[Signal] = []
    started = asyncio.Event()

    async def stuck(arguments: Arguments, caller: Caller, signal: Signal) -> dict[str, Any]:
        signals.append(signal)
        started.set()
        await signal.wait()
        return {}

    slow = define_capability(name="slow", description="Slow.", input=Input(), run=stuck,
                             timeout=60)
    bridge, _ = service(slow)
    token = bridge.grant(BINDING, ["slow"])

    async def scenario() -> None:
        call = asyncio.ensure_future(bridge.call(token, "slow"))
        await started.wait()
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call

    asyncio.run(scenario())
    assert signals[0].reason == "cancelled"
    assert bridge.running == 0


def test_calls_at_once_are_bounded() -> None:
    release = asyncio.Event()

    async def held(arguments: Arguments, caller: Caller, signal: Signal) -> dict[str, Any]:
        await release.wait()
        return {}

    hold = define_capability(name="hold", description="Hold.", input=Input(), run=held,
                             timeout=60)
    bridge, _ = service(hold, max_running=4, max_running_per_credential=2)
    token = bridge.grant(BINDING, ["hold"])

    async def scenario() -> BridgeRefusal:
        calls = [asyncio.ensure_future(bridge.call(token, "hold")) for _ in range(2)]
        await asyncio.sleep(0)
        with pytest.raises(BridgeRefusal) as refused:
            await bridge.call(token, "hold")
        release.set()
        await asyncio.gather(*calls)
        return refused.value

    assert asyncio.run(scenario()).word == wire.CAPACITY
    assert bridge.running == 0


@pytest.mark.parametrize(("result", "word"), [
    ({"x": "a" * 70_000}, wire.RESULT_TOO_LARGE),
    ({"x": "\x1b[31m"}, wire.CAPABILITY_FAILED),
    ({"x": "\u202eevil"}, wire.CAPABILITY_FAILED),
    ({"x": float("nan")}, wire.CAPABILITY_FAILED),
    ({"x": object()}, wire.CAPABILITY_FAILED),
    (["not", "an", "object"], wire.CAPABILITY_FAILED),
])
def test_a_result_that_is_too_large_or_not_display_safe_is_refused_never_cut(
    result: object, word: str
) -> None:
    async def answer(arguments: Arguments, caller: Caller, signal: Signal) -> Any:
        return result

    capability = define_capability(name="answer", description="Answer.", input=Input(),
                                   run=answer)
    bridge, _ = service(capability)
    token = bridge.grant(BINDING, ["answer"])
    refused = refusal(bridge.call(token, "answer"))
    assert refused.word == word


def test_a_failure_is_generic_and_a_refusal_says_its_sentence() -> None:
    async def fails(arguments: Arguments, caller: Caller, signal: Signal) -> dict[str, Any]:
        raise RuntimeError("/secret/path ckb_0000 internals")

    async def refuses(arguments: Arguments, caller: Caller, signal: Signal) -> dict[str, Any]:
        raise CapabilityRefused("the checkout is not clean")

    bridge, _ = service(define_capability(name="fails", description="F.", input=Input(),
                                          run=fails),
                        define_capability(name="refuses", description="R.", input=Input(),
                                          run=refuses))
    token = bridge.grant(BINDING, ["fails", "refuses"])
    failed = refusal(bridge.call(token, "fails"))
    assert (failed.word, failed.message) == (wire.CAPABILITY_FAILED, None)
    said = refusal(bridge.call(token, "refuses"))
    assert (said.word, said.message) == (wire.CAPABILITY_FAILED, "the checkout is not clean")


def test_check_result_returns_a_safe_object_unchanged() -> None:
    value = {"a": [1, 2.5, None, True, "line\nwith\ttab", {"b": "é ✓"}]}
    assert check_result(value) is value
    with pytest.raises(ResultRefused):
        check_result({"deep": _nest(20)})


def _nest(depth: int) -> object:
    return [] if depth == 0 else [_nest(depth - 1)]


@pytest.mark.parametrize("bad", [
    {"name": "Bad-Name"}, {"name": ""}, {"timeout": 61}, {"timeout": 0}, {"description": ""},
    {"description": "\x1b[2J"}, {"input": {"n": 1}},
])
def test_declarations_outside_the_rules_are_refused(bad: dict[str, Any]) -> None:
    arguments: dict[str, Any] = {"name": "ok", "description": "Fine.", "input": Input(),
                                 "run": echo, **bad}
    with pytest.raises((ValueError, TypeError)):
        define_capability(**arguments)


def test_the_shipped_capabilities_are_declared_with_mcp_annotations() -> None:
    by_name = {c.name: c for c in SHIPPED}
    assert set(by_name) == {"clanker_context", "clanker_agents", "clanker_notify"}
    assert by_name["clanker_context"].annotations == Annotations(read_only=True, idempotent=True)
    assert by_name["clanker_agents"].annotations == Annotations(read_only=True, idempotent=True)
    assert not by_name["clanker_notify"].annotations.read_only
    entry = by_name["clanker_notify"].entry()
    assert entry["annotations"] == {"readOnlyHint": False, "destructiveHint": False,
                                    "idempotentHint": False, "openWorldHint": False}
    assert entry["inputSchema"]["required"] == ["message"]
    assert entry["timeout"] == 10.0
    assert by_name["clanker_notify"].input == Input(
        message=Text("What to tell the person, on one line.", max_length=200))
