"""The stdio session executor against real child processes speaking a line protocol."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import CommandRequest, LocalTransport
from clanker.execution.request import MAX_SESSION_INPUT
from tests.helpers import path_with, write_script

ECHO_SERVER = """
    import json, sys
    sys.stdout.reconfigure(encoding="utf-8"); sys.stdin.reconfigure(encoding="utf-8")
    print(json.dumps({"hello": True}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        if request.get("method") == "crash":
            sys.exit(7)
        answer = {"id": request["id"], "echo": request.get("params")}
        print(json.dumps(answer, ensure_ascii=False), flush=True)
    print("bye", file=sys.stderr)
"""


@pytest.fixture
def transport(tmp_path: Path) -> LocalTransport:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    write_script(bin_dir, "echo-server", ECHO_SERVER)
    write_script(bin_dir, "silent", "import time; time.sleep(60)")
    write_script(bin_dir, "flood-lines", """
        import sys
        sys.stdout.write("z" * 300000)
        sys.stdout.flush()
        import time; time.sleep(60)
    """)
    write_script(bin_dir, "crlf", "import sys; sys.stdout.buffer.write(b'one\\r\\ntwo\\nthree')")
    return LocalTransport(path_with(bin_dir))


def test_request_response_exchange_and_clean_exit(transport: LocalTransport) -> None:
    async def scenario() -> None:
        async with await transport.open(CommandRequest(command="echo-server")) as session:
            assert await session.read_line() == '{"hello": true}'
            await session.write_line('{"id": 1, "params": "ünï"}')
            assert await session.read_line() == '{"id": 1, "echo": "ünï"}'
            await session.close_input()
            await session.close_input()  # idempotent
            assert await session.read_line() is None
            assert await session.read_line() is None  # EOF is sticky
            ended = await session.wait()
            assert ended.exit_code == 0
            assert ended.stderr == "bye\n"

    asyncio.run(scenario())


def test_nonzero_exit_is_a_result(transport: LocalTransport) -> None:
    async def scenario() -> int:
        async with await transport.open(CommandRequest(command="echo-server")) as session:
            await session.read_line()
            await session.write_line('{"id": 1, "method": "crash"}')
            return (await session.wait()).exit_code

    assert asyncio.run(scenario()) == 7


def test_line_endings_are_stripped_and_unterminated_tail_is_returned(
    transport: LocalTransport,
) -> None:
    async def scenario() -> list[str | None]:
        async with await transport.open(CommandRequest(command="crlf")) as session:
            return [await session.read_line() for _ in range(4)]

    assert asyncio.run(scenario()) == ["one", "two", "three", None]


def test_lifetime_deadline_fails_reads(transport: LocalTransport) -> None:
    async def scenario() -> None:
        async with await transport.open(CommandRequest(command="silent", timeout=0.5)) as session:
            await session.read_line()

    with pytest.raises(HarnessCapabilityError) as caught:
        asyncio.run(scenario())
    assert caught.value.kind is ErrorKind.TIMEOUT


def test_output_cap_bounds_an_unterminated_line(transport: LocalTransport) -> None:
    async def scenario() -> None:
        request = CommandRequest(command="flood-lines", max_output_bytes=100_000, timeout=10)
        async with await transport.open(request) as session:
            await session.read_line()

    with pytest.raises(HarnessCapabilityError) as caught:
        asyncio.run(scenario())
    assert caught.value.kind is ErrorKind.OUTPUT_LIMIT


def test_input_cap(transport: LocalTransport) -> None:
    async def scenario() -> None:
        async with await transport.open(CommandRequest(command="echo-server")) as session:
            await session.read_line()
            line = '{"id": 0, "params": "' + "p" * 1000 + '"}'
            for _ in range(MAX_SESSION_INPUT // len(line) + 2):
                await session.write_line(line)

    with pytest.raises(HarnessCapabilityError) as caught:
        asyncio.run(scenario())
    assert caught.value.kind is ErrorKind.INPUT_LIMIT


@pytest.mark.parametrize("bad", ["a\nb", "a\rb", "a\0b"])
def test_lines_cannot_smuggle_framing(transport: LocalTransport, bad: str) -> None:
    async def scenario() -> None:
        async with await transport.open(CommandRequest(command="echo-server")) as session:
            await session.write_line(bad)

    with pytest.raises(ValueError):
        asyncio.run(scenario())


def test_write_after_close_input_is_refused(transport: LocalTransport) -> None:
    async def scenario() -> None:
        async with await transport.open(CommandRequest(command="echo-server")) as session:
            await session.close_input()
            await session.write_line("{}")

    with pytest.raises(HarnessCapabilityError):
        asyncio.run(scenario())


def test_dispose_is_idempotent_and_reaps(transport: LocalTransport) -> None:
    async def scenario() -> None:
        session = await transport.open(CommandRequest(command="silent"))
        await session.dispose()
        await session.dispose()
        with pytest.raises(HarnessCapabilityError) as caught:
            await session.read_line()
        assert caught.value.kind is ErrorKind.ABORTED

    asyncio.run(scenario())


def test_cancelling_a_reader_then_disposing_stops_the_child(transport: LocalTransport) -> None:
    async def scenario() -> None:
        session = await transport.open(CommandRequest(command="silent", timeout=20))
        reader = asyncio.create_task(session.read_line())
        await asyncio.sleep(0.1)
        reader.cancel()
        with pytest.raises(asyncio.CancelledError):
            await reader
        await session.dispose()

    asyncio.run(scenario())


def test_sessions_refuse_stdin_payloads(transport: LocalTransport) -> None:
    with pytest.raises(ValueError):
        asyncio.run(transport.open(CommandRequest(command="echo-server", stdin=b"x")))
