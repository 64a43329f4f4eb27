"""Oh My Pi's guidance (``--append-system-prompt=``, one value only); no agent bridge
(no launch-scoped MCP channel was verified). The system prompt OMP built with it was
captured from a loopback stand-in provider (``fixtures/guidance-system-prompt.json``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import clanker_omp
from clanker.testing.doubles import home_attachment_context
from clanker_omp.guidance import APPEND_FLAG, GUIDANCE_FILE_NAME, OmpGuidance

FIXTURES = Path(__file__).with_name("fixtures")


def launch(root: Path, argv: tuple[str, ...] = ("omp", "launch"),
           env: dict[str, str] | None = None) -> Any:
    return home_attachment_context(root, argv, env)


def test_omp_has_guidance_and_no_bridge() -> None:
    assert isinstance(clanker_omp.plugin.clanker_guidance(), OmpGuidance)
    assert not hasattr(clanker_omp.plugin, "clanker_agent_bridge")


@pytest.mark.parametrize("rest", [(), ("--resume", "/s.jsonl"), ("--fork", "/s.jsonl"),
                                  ("--model", "a/b", "hello")])
def test_one_flag_after_the_launch_subcommand(tmp_path: Path, rest: tuple[str, ...]) -> None:
    context = launch(tmp_path, ("omp", "launch", *rest))
    plan = OmpGuidance().prepare(context, "Ask clanker.")
    target = context.private_dir / GUIDANCE_FILE_NAME
    assert plan is not None and not plan.env
    assert plan.argv == ("omp", "launch", f"{APPEND_FLAG}={target}", *rest)
    assert target.read_text() == "Ask clanker."


@pytest.mark.parametrize("flag", [(APPEND_FLAG, "theirs"), (f"{APPEND_FLAG}=theirs",),
                                  ("--cwd", "/elsewhere"), ("--cwd=/elsewhere",)])
def test_a_prompt_of_the_users_on_the_command_line_is_never_replaced(
        tmp_path: Path, flag: tuple[str, ...]) -> None:
    context = launch(tmp_path, ("omp", "launch", *flag))
    assert OmpGuidance().prepare(context, "g") is None
    assert not (context.private_dir / GUIDANCE_FILE_NAME).exists()


@pytest.mark.parametrize("where", [
    "home/project/.omp/APPEND_SYSTEM.md", "home/project/.pi/APPEND_SYSTEM.md",
    "home/project/.claude/APPEND_SYSTEM.md", "home/.omp/agent/APPEND_SYSTEM.md",
    "home/.pi/agent/APPEND_SYSTEM.md", "home/.claude/APPEND_SYSTEM.md",
])
def test_an_append_system_file_of_the_users_is_never_replaced(tmp_path: Path,
                                                              where: str) -> None:
    (tmp_path / where).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / where).write_text("theirs")
    assert OmpGuidance().prepare(launch(tmp_path), "g") is None


def test_the_agent_dir_variables_are_looked_at(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "APPEND_SYSTEM.md").write_text("theirs")
    context = launch(tmp_path, env={"PI_CODING_AGENT_DIR": str(agent)})
    assert OmpGuidance().prepare(context, "g") is None


def test_the_captured_system_prompt_ends_with_the_guidance() -> None:
    seen = json.loads((FIXTURES / "guidance-system-prompt.json").read_text())
    assert seen["argv"][:3] == ["omp", "launch",
                                f"{APPEND_FLAG}=<launch private dir>/{GUIDANCE_FILE_NAME}"]
    assert seen["system_prompt_tail"].endswith("CLANKER GUIDANCE: ask clanker first.")


def test_a_second_flag_was_seen_replacing_the_first_so_none_is_right() -> None:
    seen = json.loads((FIXTURES / "guidance-system-prompt.json").read_text())["two_flags"]
    assert seen["first_text_in_system_prompt"] is False
    assert seen["system_prompt_tail"].endswith("SECOND TEXT.")
