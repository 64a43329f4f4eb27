"""Executors bound to a few variables, against real child processes: every command
and every session they start sees the bound variables, over the request's own."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from clanker.environment.bound import BoundExecutor, BoundSessionExecutor
from clanker.execution import CommandRequest, LocalTransport
from tests.helpers import path_with, write_script

_BOUND = {"HOME_A": "/bound/home"}


@pytest.fixture
def transport(tmp_path: Path) -> LocalTransport:
    write_script(tmp_path, "print-env", """
        import json, os
        print(json.dumps({name: os.environ.get(name) for name in ("HOME_A", "KEEP")}))
    """)
    return LocalTransport(path_with(tmp_path))


def _request() -> CommandRequest:
    return CommandRequest(command="print-env", env={"HOME_A": "/the/request's", "KEEP": "kept"})


def test_a_bound_command_gets_the_bound_variables_over_its_own(transport: LocalTransport) -> None:
    result = asyncio.run(BoundExecutor(transport, _BOUND).run(_request()))
    assert json.loads(result.stdout) == {"HOME_A": "/bound/home", "KEEP": "kept"}


def test_a_bound_session_gets_the_bound_variables_over_its_own(transport: LocalTransport) -> None:
    async def first_line() -> str | None:
        async with await BoundSessionExecutor(transport, _BOUND).open(_request()) as session:
            return await session.read_line()

    line = asyncio.run(first_line())
    assert line is not None
    assert json.loads(line) == {"HOME_A": "/bound/home", "KEEP": "kept"}


def test_the_bound_variables_are_copied_when_bound(transport: LocalTransport) -> None:
    variables = dict(_BOUND)
    executor = BoundExecutor(transport, variables)
    variables["HOME_A"] = "/changed/later"
    result = asyncio.run(executor.run(_request()))
    assert json.loads(result.stdout)["HOME_A"] == "/bound/home"
