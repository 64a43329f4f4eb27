"""Pi's guidance (``--append-system-prompt``); Pi 0.73.1 has no agent bridge (no MCP
client at all). The system prompts Pi built with it were captured from a loopback
stand-in provider (``fixtures/guidance-system-prompt.json``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import clanker_pi
from clanker.testing.doubles import home_attachment_context
from clanker_pi.guidance import APPEND_FLAG, GUIDANCE_FILE_NAME, PiGuidance

FIXTURES = Path(__file__).with_name("fixtures")
RESUME = ("pi", "--session", "/home/u/.pi/agent/sessions/--p--/s.jsonl")
FORK = ("pi", "--fork", "/home/u/.pi/agent/sessions/--p--/s.jsonl")


def launch(root: Path, argv: tuple[str, ...] = ("pi",), env: dict[str, str] | None = None) -> Any:
    return home_attachment_context(root, argv, env)


def test_pi_has_guidance_and_no_bridge() -> None:
    assert isinstance(clanker_pi.plugin.clanker_guidance(), PiGuidance)
    assert not hasattr(clanker_pi.plugin, "clanker_agent_bridge")


@pytest.mark.parametrize("argv", [("pi",), RESUME, FORK, ("pi", "--model", "a/b", "hello")])
def test_one_file_is_appended_right_after_the_executable(tmp_path: Path,
                                                        argv: tuple[str, ...]) -> None:
    context = launch(tmp_path, argv)
    plan = PiGuidance().prepare(context, "Ask clanker.")
    target = context.private_dir / GUIDANCE_FILE_NAME
    assert plan is not None and not plan.env
    assert plan.argv == ("pi", APPEND_FLAG, str(target), *argv[1:])
    assert target.read_text() == "Ask clanker."


def test_the_users_own_appended_prompts_stay(tmp_path: Path) -> None:
    argv = ("pi", APPEND_FLAG, "theirs.md", APPEND_FLAG, "more text")
    context = launch(tmp_path, argv)
    plan = PiGuidance().prepare(context, "g")
    assert plan is not None and plan.argv is not None
    assert plan.argv[3:] == argv[1:]  # theirs unchanged, in order, after ours


@pytest.mark.parametrize("where", ["home/.pi/agent/APPEND_SYSTEM.md",
                                   "home/project/.pi/APPEND_SYSTEM.md"])
def test_the_users_append_system_file_is_passed_as_pi_would_have_found_it(
        tmp_path: Path, where: str) -> None:
    (tmp_path / where).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / where).write_text("theirs")
    context = launch(tmp_path)
    plan = PiGuidance().prepare(context, "g")
    assert plan is not None
    assert plan.argv == ("pi", APPEND_FLAG, str(tmp_path / where), APPEND_FLAG,
                         str(context.private_dir / GUIDANCE_FILE_NAME))


def test_the_project_file_wins_over_the_agent_dirs_as_in_pi(tmp_path: Path) -> None:
    for where in ("home/.pi/agent/APPEND_SYSTEM.md", "home/project/.pi/APPEND_SYSTEM.md"):
        (tmp_path / where).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / where).write_text("theirs")
    plan = PiGuidance().prepare(launch(tmp_path), "g")
    assert plan is not None and plan.argv is not None
    assert plan.argv[2] == str(tmp_path / "home/project/.pi/APPEND_SYSTEM.md")


def test_pi_coding_agent_dir_is_where_the_agent_file_is_looked_for(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "APPEND_SYSTEM.md").write_text("theirs")
    plan = PiGuidance().prepare(launch(tmp_path, env={"PI_CODING_AGENT_DIR": str(agent)}), "g")
    assert plan is not None and plan.argv is not None
    assert plan.argv[2] == str(agent / "APPEND_SYSTEM.md")


def test_with_a_flag_of_theirs_the_file_is_not_added_pi_would_not_read_it(tmp_path: Path) -> None:
    (tmp_path / "home/.pi/agent").mkdir(parents=True)
    (tmp_path / "home/.pi/agent/APPEND_SYSTEM.md").write_text("theirs")
    argv = ("pi", APPEND_FLAG, "their text")
    plan = PiGuidance().prepare(launch(tmp_path, argv), "g")
    assert plan is not None and plan.argv is not None
    assert plan.argv.count(APPEND_FLAG) == 2


@settings(max_examples=50, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(min_size=1, max_size=200))
def test_the_guidance_text_never_enters_argv(tmp_path: Path, text: str) -> None:
    for entry in (tmp_path / "private").glob("*"):
        entry.unlink()
    context = launch(tmp_path)
    plan = PiGuidance().prepare(context, text)
    assert plan is not None and plan.argv is not None
    assert plan.argv[2] == str(context.private_dir / GUIDANCE_FILE_NAME)
    assert (context.private_dir / GUIDANCE_FILE_NAME).read_bytes() == text.encode()


def test_the_captured_system_prompts_keep_the_users_text_beside_ours() -> None:
    runs = json.loads((FIXTURES / "guidance-system-prompt.json").read_text())["runs"]
    file_run, flag_run = runs
    assert file_run["system_prompt_tail"].index("USER APPEND FILE") < \
        file_run["system_prompt_tail"].index("CLANKER GUIDANCE")
    assert "CLANKER GUIDANCE" in flag_run["system_prompt_tail"]
    assert "USER FLAG TEXT." in flag_run["system_prompt_tail"]
