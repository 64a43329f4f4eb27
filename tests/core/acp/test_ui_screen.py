"""The full-screen footer's keys through prompt_toolkit's pipe input, with the real
client driving the fake agent in a subprocess: submitting, newlines, the approval
pane, Esc Esc, Ctrl+C, Ctrl+D, the restart and usage-limit offers, a prompt
queued during a turn, Ctrl+O (expand and collapse) and Ctrl+R (the diff view)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import keyring
import pytest
from prompt_toolkit.input import PipeInput, create_pipe_input
from prompt_toolkit.output import DummyOutput

from clanker.acp.ui.screen import Restart, Screen

from .conftest import FAKE_AGENT, Coder
from .keyrings import MemoryKeyring

SECRET = "sk-test-0123456789abcdef"


class Driver:
    """Keys in, the scrollback (what was printed above the footer) out."""

    def __init__(self, pipe: PipeInput, screen: Screen, written: list[str],
                 now: list[float]) -> None:
        self.pipe, self.screen, self.written, self.now = pipe, screen, written, now

    def type(self, text: str) -> None:
        self.pipe.send_text(text)

    @property
    def scrollback(self) -> str:
        return "".join(self.written)

    async def until(self, condition: Callable[[], bool], what: str) -> None:
        for _ in range(6000):  # a bound, not a measurement: 60 s at most
            if condition():
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"never: {what}\n{self.scrollback}")

    async def printed(self, text: str) -> None:
        await self.until(lambda: text in self.scrollback, repr(text))

    async def pane(self) -> str:
        await self.until(lambda: self.screen._pane is not None, "a pane")
        return "".join(text for _, text, *_ in self.screen._pane_text().__pt_formatted_text__())


Script = Callable[[Driver], Awaitable[None]]


def _converse(coder: Coder, script: Script, *,
              early: str | None = None) -> tuple[int | Restart, str]:
    async def run() -> tuple[int | Restart, str]:
        written: list[str] = []
        now = [1000.0]
        with create_pipe_input() as pipe:
            screen = Screen(cwd=str(coder.workspace), agent="fake", input=pipe,
                            output=DummyOutput(), write=written.append, color=False,
                            clock=lambda: now[0])
            async with (coder.clanker.coder(agent_command=("python3", FAKE_AGENT),
                                            cwd=coder.workspace, interactive=True,
                                            on_event=screen.on_event, ask=screen.ask) as client,
                        screen.running()):
                driver = Driver(pipe, screen, written, now)
                if early is not None:  # typed once the footer is up, before the first turn
                    driver.type(early)
                    await driver.until(lambda: bool(screen.prompts), "sent early")
                talk = asyncio.get_running_loop().create_task(screen.converse(client, 60))
                scripted = asyncio.get_running_loop().create_task(script(driver))
                await asyncio.wait({talk, scripted}, return_when=asyncio.FIRST_EXCEPTION)
                await scripted  # its failure first
                return await talk, "".join(written)

    return asyncio.run(run())


def test_enter_sends_the_composer_and_ctrl_d_on_an_empty_one_exits(coder: Coder) -> None:
    async def script(talk: Driver) -> None:
        talk.type("hello\r")
        await talk.printed("[end_turn] session fake-1")
        talk.type("x\x04")  # not empty: Ctrl+D is ignored
        await talk.until(lambda: talk.screen.composer.text == "x", "x typed")
        talk.type("\x7f\x04")  # Backspace, then Ctrl+D on the empty composer

    code, shown = _converse(coder, script)
    assert code == 0
    assert shown.splitlines()[1:4] == ["you  hello", "Hello world",
                                       "[end_turn] session fake-1"]


def test_a_prompt_sent_before_the_conversation_is_ready_is_its_first_turn(
        coder: Coder) -> None:
    async def script(talk: Driver) -> None:
        await talk.printed("[end_turn] session fake-1")
        talk.type("\x04")

    code, shown = _converse(coder, script, early="hello\r")
    assert code == 0
    assert "you  hello\nHello world\n" in shown
    assert "a turn is running" not in shown


@pytest.mark.parametrize("newline", ["\x1b\r", "\x1b[13;2u", "\n"])
def test_alt_enter_shift_enter_and_ctrl_j_insert_a_newline(coder: Coder, newline: str) -> None:
    async def script(talk: Driver) -> None:
        talk.type(f"first{newline}second")
        await talk.until(lambda: talk.screen.composer.text == "first\nsecond", "two lines")
        talk.type("\r")
        await talk.printed("[end_turn]")
        talk.type("\x04")

    code, shown = _converse(coder, script)
    assert code == 0
    assert "you  first\nsecond\n" in shown


def test_the_approval_pane_replaces_the_composer_and_a_approves_edits_for_the_session(
        coder: Coder) -> None:
    async def script(talk: Driver) -> None:
        talk.type("permission edit standard\r")
        pane = await talk.pane()
        assert "approve edit" in pane
        assert "[y] approve once   [a] approve edit this session   [n] refuse" in pane
        talk.type("hello")  # not the composer's while the pane is up
        talk.type("a")
        await talk.printed("outcome:allow-once")
        assert talk.screen.composer.text == ""
        talk.type("permission edit standard\r")  # remembered: not asked again
        await talk.printed("approved for this session: edit")
        await talk.until(lambda: talk.scrollback.count("outcome:allow-once") == 2, "twice")
        talk.type("\x04")

    code, shown = _converse(coder, script)
    assert code == 0
    assert "✓ allowed edit something [edit]  approved for this session: edit" in shown


@pytest.mark.parametrize(("key", "outcome"), [("y", "allow-once"), ("n", "reject-once")])
def test_y_approves_once_and_n_refuses(coder: Coder, key: str, outcome: str) -> None:
    async def script(talk: Driver) -> None:
        talk.type("permission execute standard\r")
        pane = await talk.pane()
        assert "[a]" not in pane  # execute asks every time
        talk.type("a")  # not offered: nothing happens
        talk.type(key)
        await talk.printed(f"outcome:{outcome}")
        talk.type("\x04")

    assert _converse(coder, script)[0] == 0


def test_esc_esc_interrupts_and_another_key_between_disarms(coder: Coder) -> None:
    async def script(talk: Driver) -> None:
        talk.type("wait-cancel\r")
        await talk.pane()
        talk.type("\x1b")
        await talk.until(lambda: talk.screen.armed, "armed")
        talk.type("x")  # any other key disarms
        await talk.until(lambda: not talk.screen.armed, "disarmed")
        talk.type("\x1b")  # so this Esc arms again
        await talk.until(lambda: talk.screen.armed, "armed again")
        talk.now[0] += 6  # past the five seconds: disarmed
        assert not talk.screen.armed
        talk.type("\x1b")
        await talk.until(lambda: talk.screen.armed, "armed a third time")
        assert talk.screen._pane is not None and "[cancelled]" not in talk.scrollback
        talk.type("\x1b")  # the second Esc in time: session/cancel
        await talk.printed("[cancelled] session fake-1")
        talk.type("\x04")

    code, shown = _converse(coder, script)
    assert code == 0
    assert "✗ cancelled execute something [execute]  the turn was cancelled" in shown
    assert "outcome:cancelled" in shown


def test_ctrl_c_interrupts_a_turn_and_at_rest_exits_130(coder: Coder) -> None:
    async def script(talk: Driver) -> None:
        talk.type("wait-cancel\r")
        await talk.pane()
        talk.type("\x03")
        await talk.printed("[cancelled] session fake-1")
        talk.type("\x03")

    code, shown = _converse(coder, script)
    assert code == 130
    assert "outcome:cancelled" in shown


def test_a_usage_limit_offers_to_send_the_prompt_again(coder: Coder) -> None:
    async def script(talk: Driver) -> None:
        talk.type("usage-limit\r")
        assert "send the same prompt again?" in await talk.pane()
        talk.type("y")  # the same prompt, so the same limit, and the same offer
        await talk.until(lambda: talk.scrollback.count("you  usage-limit") == 2, "sent again")
        assert "send the same prompt again?" in await talk.pane()
        talk.type("\r")  # Enter is no
        await talk.until(lambda: talk.screen._pane is None, "the composer back")
        talk.type("\x04")

    code, shown = _converse(coder, script)
    assert code == 0
    assert "clanker: the agent hit a usage limit, resets 3:10am" in shown


def test_a_sign_in_the_agent_asks_for_offers_to_send_the_prompt_again(coder: Coder) -> None:
    async def script(talk: Driver) -> None:
        talk.type("auth-required\r")
        assert "sign in (in another terminal), then: send the same prompt again?" in \
            await talk.pane()
        talk.type("y")
        await talk.until(lambda: talk.scrollback.count("you  auth-required") == 2, "again")
        await talk.pane()
        talk.type("n")
        await talk.until(lambda: talk.screen._pane is None, "the composer back")
        talk.type("\x04")

    code, shown = _converse(coder, script)
    assert code == 0
    assert "clanker: the agent needs signing in (error -32000)" in shown


@pytest.mark.parametrize(("answer", "ended"), [("y", Restart("fake-1")), ("n", 33)])
def test_a_dead_agent_offers_a_restart(coder: Coder, answer: str, ended: Any) -> None:
    async def script(talk: Driver) -> None:
        talk.type("die\r")
        pane = await talk.pane()
        assert "start the agent again and continue session fake-1?" in pane
        talk.type(answer)

    code, shown = _converse(coder, script)
    assert code == ended
    assert "clanker: the agent exited during the turn" in shown


def test_what_the_screen_shows_is_redacted(coder: Coder) -> None:
    before = keyring.get_keyring()
    keyring.set_keyring(MemoryKeyring())
    try:
        coder.clanker.set_coder_secret("python3", "FAKE_TOKEN", SECRET)

        async def script(talk: Driver) -> None:
            talk.type("ask-env FAKE_TOKEN\r")
            pane = await talk.pane()
            assert "echo [redacted]" in pane
            assert SECRET not in pane
            assert SECRET not in "".join(t for _, t, *_ in
                                         talk.screen._live_text().__pt_formatted_text__())
            talk.type("y")
            await talk.printed("[end_turn] session fake-1")
            talk.type("\x04")

        code, shown = _converse(coder, script)
    finally:
        keyring.set_keyring(before)
    assert code == 0
    assert "show [redacted]" in shown
    assert "outcome:selected value:[redacted]" in shown
    assert SECRET not in shown


def _shown(formatted: Any) -> str:
    return "".join(text for _, text, *_ in formatted.__pt_formatted_text__())


def test_enter_during_a_turn_queues_the_prompt_until_the_turn_ends(coder: Coder,
                                                                   tmp_path: Path) -> None:
    release = tmp_path / "release"

    async def script(talk: Driver) -> None:
        talk.type(f"hold {release}\r")
        await talk.until(lambda: talk.screen.working, "the turn running")
        talk.type("hello\r")
        await talk.until(lambda: talk.screen.prompts == ["hello"], "queued")
        assert talk.screen.composer.text == ""
        assert "queued: hello" in _shown(talk.screen._queue_text())
        assert "Enter queues" in _shown(talk.screen._hint_text())
        assert "you  hello" not in talk.scrollback
        release.touch()  # the turn ends: the queued prompt is the next one
        await talk.printed("Hello world")
        assert talk.screen.prompts == []
        talk.type("\x04")

    code, shown = _converse(coder, script)
    assert code == 0
    assert shown.index("released") < shown.index("you  hello") < shown.index("Hello world")


@pytest.mark.parametrize("interrupt", ["esc-esc", "ctrl-c"])
def test_an_interrupt_drops_the_queue(coder: Coder, tmp_path: Path, interrupt: str) -> None:
    async def script(talk: Driver) -> None:
        talk.type(f"hold {tmp_path / 'never'}\r")
        await talk.until(lambda: talk.screen.working, "the turn running")
        talk.type("one\r")
        talk.type("two\r")
        await talk.until(lambda: talk.screen.prompts == ["one", "two"], "two queued")
        if interrupt == "ctrl-c":
            talk.type("\x03")
        else:
            talk.type("\x1b")
            await talk.until(lambda: talk.screen.armed, "armed")
            talk.type("\x1b")
        await talk.printed("[cancelled] session fake-1")
        assert talk.screen.prompts == []
        talk.type("\x04")

    code, shown = _converse(coder, script)
    assert code == 0
    assert "you  one" not in shown and "you  two" not in shown


def test_ctrl_o_expands_the_last_cut_block_and_collapses_it(coder: Coder) -> None:
    async def script(talk: Driver) -> None:
        talk.type("\x0f")  # nothing was cut yet
        await talk.until(lambda: talk.screen.note is not None, "a note")
        assert talk.screen.viewer is None
        talk.type("output 250\r")
        await talk.printed("[end_turn] session fake-1")
        assert "… truncated: 200 of 250 lines shown" in talk.scrollback
        assert "line 250" not in talk.scrollback
        talk.type("\x0f")
        await talk.until(lambda: talk.screen.viewer is not None, "expanded")
        first = _shown(talk.screen._viewer_text())
        assert "▾ expanded" in first and "$ seq 250" in first and "line 250" not in first
        for _ in range(20):  # PageDown, to the end (bounded there)
            talk.type("\x1b[6~")
        await talk.until(lambda: "line 250" in _shown(talk.screen._viewer_text()), "the end")
        assert "truncated" not in _shown(talk.screen._viewer_text())
        talk.type("\x1b[5~")  # PageUp
        await talk.until(lambda: "line 250" not in _shown(talk.screen._viewer_text()), "up")
        talk.type("\x0f")
        await talk.until(lambda: talk.screen.viewer is None, "collapsed")
        talk.type("\x0f")  # expanded again, then a question comes: it gets the room
        await talk.until(lambda: talk.screen.viewer is not None, "expanded again")
        talk.type("permission execute standard\r")
        await talk.pane()
        assert talk.screen.viewer is None
        talk.type("\x0f")  # not while the pane is up (the keys are read in order)
        talk.type("n")
        await talk.printed("outcome:reject-once")
        assert talk.screen.viewer is None
        talk.type("\x04")

    code, shown = _converse(coder, script)
    assert code == 0
    assert "line 250" not in shown  # the scrollback keeps the cut block; the footer went


def test_ctrl_r_shows_diffs_side_by_side_and_back(coder: Coder) -> None:
    async def script(talk: Driver) -> None:
        talk.type("edit\r")
        await talk.until(lambda: talk.scrollback.count("edited") == 1, "one edit")
        talk.type("\x12")
        await talk.until(lambda: talk.screen.split_diffs, "split")
        talk.type("edit\r")
        await talk.until(lambda: talk.scrollback.count("edited") == 2, "two edits")
        talk.type("\x12")
        await talk.until(lambda: not talk.screen.split_diffs, "unified again")
        talk.type("edit\r")
        await talk.until(lambda: talk.scrollback.count("edited") == 3, "three edits")
        talk.type("\x04")

    code, shown = _converse(coder, script)
    assert code == 0
    first, second, third = shown.split("✎ edit f.py")[1:]
    side_by_side = re.compile(r"^\s*6\s+x = 5\s+6\s+x = 50$", re.MULTILINE)
    for unified in (first, third):
        assert "-x = 5\n+x = 50\n" in unified and not side_by_side.search(unified)
    assert side_by_side.search(second) and "+x = 50" not in second
