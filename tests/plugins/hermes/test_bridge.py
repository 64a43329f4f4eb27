"""Hermes's guidance (``HERMES_EPHEMERAL_SYSTEM_PROMPT``, read by the classic CLI);
no agent bridge (MCP servers live only in ``config.yaml``). The system message the
classic CLI of hermes-agent 0.19.0 sent with it was captured from a loopback stand-in
provider (``fixtures/guidance-system-prompt.json``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import clanker_hermes
from clanker.testing.doubles import attachment_context
from clanker_hermes.guidance import PROMPT_VARIABLE, HermesGuidance


def launch(root: Path, argv: tuple[str, ...] = ("hermes",),
           env: dict[str, str] | None = None, config: str | None = None) -> Any:
    home = root / "home"
    (home / "project").mkdir(parents=True, exist_ok=True)
    (home / ".hermes").mkdir(exist_ok=True)
    if config is not None:
        (home / ".hermes" / "config.yaml").write_text(config)
    private = root / "private"
    private.mkdir(mode=0o700, exist_ok=True)
    return attachment_context(argv=argv, env={"HOME": str(home), **(env or {})},
                              cwd=str(home / "project"), private_dir=private)


def test_hermes_has_guidance_and_no_bridge() -> None:
    assert isinstance(clanker_hermes.plugin.clanker_guidance(), HermesGuidance)
    assert not hasattr(clanker_hermes.plugin, "clanker_agent_bridge")


@pytest.mark.parametrize("argv", [("hermes",), ("hermes", "--resume", "20260101_000000_abcdef"),
                                  ("hermes", "-m", "x/y")])
def test_the_guidance_is_one_variable(tmp_path: Path, argv: tuple[str, ...]) -> None:
    plan = HermesGuidance().prepare(launch(tmp_path, argv, config="model: x\n"), "Ask clanker.")
    assert plan is not None and plan.argv is None
    assert dict(plan.env) == {PROMPT_VARIABLE: "Ask clanker."}


def test_a_prompt_of_the_users_in_the_environment_is_never_replaced(tmp_path: Path) -> None:
    assert HermesGuidance().prepare(launch(tmp_path, env={PROMPT_VARIABLE: "theirs"}), "g") is None


@pytest.mark.parametrize("config", ["agent:\n  system_prompt: be brief\n",
                                    "agent:\n  personalities:\n    a:\n      system_prompt: x\n"])
def test_a_system_prompt_in_their_config_is_never_replaced(tmp_path: Path, config: str) -> None:
    assert HermesGuidance().prepare(launch(tmp_path, config=config), "g") is None


@pytest.mark.parametrize(("argv", "env", "config"), [
    (("hermes", "--tui"), {}, None),
    (("hermes",), {"HERMES_TUI": "1"}, None),
    (("hermes",), {}, "display:\n  interface: tui\n"),
])
def test_the_tui_which_does_not_read_the_variable_gets_none(
        tmp_path: Path, argv: tuple[str, ...], env: dict[str, str], config: str | None) -> None:
    assert HermesGuidance().prepare(launch(tmp_path, argv, env, config), "g") is None


def test_a_profile_home_is_where_the_config_is_read(tmp_path: Path) -> None:
    profile = tmp_path / "home/.hermes/profiles/work"
    profile.mkdir(parents=True)
    (profile / "config.yaml").write_text("agent:\n  system_prompt: theirs\n")
    context = launch(tmp_path, env={"HERMES_HOME": str(profile)})
    assert HermesGuidance().prepare(context, "g") is None


def test_the_captured_system_message_ends_with_the_guidance() -> None:
    seen = json.loads((Path(__file__).with_name("fixtures")
                       / "guidance-system-prompt.json").read_text())
    assert seen["messages"][0] == "system"
    assert seen["system_prompt_tail"].endswith("\n\nCLANKER GUIDANCE: ask clanker first.")
