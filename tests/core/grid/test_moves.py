"""``await-move`` against a real grid: only a live terminal's own credential listens;
an instruction goes down its connection and the launcher's answer comes back; a
terminal nobody listens for is refused; retiring the terminal ends the channel."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from clanker.grid.client import GridClient
from clanker.grid.errors import GridRequestError
from clanker.grid.moves import MoveUnavailable
from clanker.grid.protocol import MoveInstruction, MoveOutcome
from clanker.grid.server import Grid
from tests.core.grid.test_server import call, register, serve


def test_an_instruction_reaches_the_listening_launcher_and_its_answer_comes_back(
    short_dir: Path,
) -> None:
    async def body(grid: Grid, client: GridClient) -> None:
        reg = await call(register, client, os.getpid(), "/work/here")
        with pytest.raises(GridRequestError) as forged:
            await call(client.await_moves, reg.terminal, "not-the-token")
        assert forged.value.word == "unauthorized"
        with pytest.raises(MoveUnavailable) as nobody:
            await grid.move(reg.terminal, "/work/there", "s1")
        assert nobody.value.word == "not-relayed"
        channel = await call(client.await_moves, reg.terminal, reg.token)
        try:
            asked = grid.move(reg.terminal, "/work/there", "s1")
            answered = call(lambda: (channel.next(), channel.answer(
                MoveOutcome(moved=False, why="exited"))))
            outcome, (instruction, _) = await asyncio.gather(asked, answered)
            assert instruction == MoveInstruction(target="/work/there", session="s1")
            assert outcome == MoveOutcome(moved=False, why="exited")
            await call(client.retire, reg.terminal, reg.token)
            assert await call(channel.next) is None  # retired: the channel ends
        finally:
            channel.close()

    serve(short_dir / "g.sock", body)



def test_a_terminal_retired_during_its_move_still_gets_that_answer_and_no_other(
    short_dir: Path,
) -> None:
    """An after-turn launcher releases the source's registration before the resume
    registers, then answers over the old terminal's channel."""

    async def body(grid: Grid, client: GridClient) -> None:
        reg = await call(register, client, os.getpid(), "/work/here")
        channel = await call(client.await_moves, reg.terminal, reg.token)
        try:
            def launcher() -> MoveInstruction | None:
                instruction = channel.next()
                client.retire(reg.terminal, reg.token)  # the source goes first
                channel.answer(MoveOutcome(moved=True))
                return instruction

            outcome, instruction = await asyncio.gather(
                grid.move(reg.terminal, "/work/there", "s1"), call(launcher))
            assert instruction == MoveInstruction(target="/work/there", session="s1")
            assert outcome == MoveOutcome(moved=True)
            assert grid.entry(reg.terminal) is None
            assert await call(channel.next) is None  # answered: now the channel ends
            with pytest.raises(MoveUnavailable) as gone:
                await grid.move(reg.terminal, "/work/there", "s1")
            assert gone.value.word == "not-relayed"
        finally:
            channel.close()

    serve(short_dir / "g.sock", body)
