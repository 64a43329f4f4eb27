"""`clanker launch codex` end to end: real grid, real hook bridge, the Codex interpreter.

The harness is a double that fires the hook payloads captured from codex 0.171.0
(``tests/fixtures/codex/attention``) through the commands clanker put on its
command line, as Codex does; after each one it asks ``clanker status --json``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.helpers import CODEX_LIVE_APP_SERVER_ATTENTION, launch_hooked

FIXTURES = Path(__file__).parents[2] / "fixtures" / "codex" / "attention"

# How Codex finds its hooks: `-c hooks.<Event>=<TOML array of matcher groups>`.
LOCATOR = '''
import tomllib

def hook_commands(argv):
    found = {}
    for flag, value in zip(argv, argv[1:]):
        if flag == "-c" and value.startswith("hooks."):
            key, _, toml = value.partition("=")
            groups = tomllib.loads("v = " + toml)["v"]
            found[key.removeprefix("hooks.")] = groups[0]["hooks"][0]["command"]
    return found
'''


def launch(tmp_path: Path, payloads: str, *flags: str) -> tuple[dict[str, Any], list[Any]]:
    return launch_hooked(
        tmp_path, "codex", LOCATOR, json.loads((FIXTURES / payloads).read_text()), *flags,
        env={"CODEX_HOME": str(tmp_path / "codex-home")},
    )


def test_a_session_with_an_approval_and_an_interrupt(tmp_path: Path) -> None:
    record, after = launch(tmp_path, "live-app-server.json")
    observed = [(o["event"], o["attention"]) for o in record["observed"]]
    assert observed == CODEX_LIVE_APP_SERVER_ATTENTION
    assert all(o["hooked"] and o["stdout"] == "" for o in record["observed"])
    assert record["observed"][1]["location"] == "/home/user/project"
    # The launcher's exit retired the terminal.
    assert record["terminal"] and all(row["terminal"] != record["terminal"] for row in after)


def test_a_launch_without_attention_has_no_hooks(tmp_path: Path) -> None:
    record, _ = launch(tmp_path, "live-tui-resume.json", "--no-attention")
    assert record["terminal"] is None
    assert not any(o["hooked"] for o in record["observed"])
    assert not any(a.startswith("hooks.") for a in record["argv"])
