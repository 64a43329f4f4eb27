"""`clanker launch claude` end to end: real grid, real hook bridge, the Claude interpreter.

The harness is a double that fires hook payloads of claude 2.1.197
(``tests/fixtures/claude/attention``: captured live, or built from the binary's
hook schemas, as the README there says) through the commands in the
``--settings`` file clanker handed it, as Claude Code does; after each one it
asks ``clanker status --json``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.helpers import launch_hooked

FIXTURES = Path(__file__).parents[2] / "fixtures" / "claude" / "attention"

# How Claude Code finds its hooks: the `hooks` table of each settings source.
LOCATOR = '''
def hook_commands(argv):
    found = {}
    for flag, value in zip(argv, argv[1:]):
        if flag == "--settings":
            with open(value) as f:
                for event, groups in json.load(f)["hooks"].items():
                    found[event] = groups[0]["hooks"][0]["command"]
    return found
'''


def launch(tmp_path: Path, *names: str) -> tuple[dict[str, Any], list[Any]]:
    payloads = [json.loads((FIXTURES / f"{name}.json").read_text()) for name in names]
    return launch_hooked(tmp_path, "claude", LOCATOR, payloads,
                         env={"CLAUDE_CONFIG_DIR": str(tmp_path / "claude-config")})


def test_a_turn_with_a_permission_wait_and_a_subagent(tmp_path: Path) -> None:
    record, after = launch(
        tmp_path, "session-start.startup", "user-prompt-submit",
        "permission-request.subagent", "permission-request", "post-tool-batch.subagent",
        "post-tool-batch", "cwd-changed", "stop", "session-end",
    )
    observed = [(o["event"], o["attention"], o["location"]) for o in record["observed"]]
    assert observed == [
        ("SessionStart", "idle", "/home/u/src/repo"),
        ("UserPromptSubmit", "working", "/home/u/src/repo"),
        ("PermissionRequest", "working", "/home/u/src/repo"),  # a subagent's: not ours
        ("PermissionRequest", "needs-input", "/home/u/src/repo"),
        ("PostToolBatch", "needs-input", "/home/u/src/repo"),  # the subagent's batch
        ("PostToolBatch", "working", "/home/u/src/repo"),
        ("CwdChanged", "working", "/home/u/src/repo/docs"),
        ("Stop", "done", "/home/u/src/repo"),
        ("SessionEnd", "unknown", "/home/u/src/repo"),
    ]
    assert all(o["hooked"] and o["stdout"] == "" for o in record["observed"])
    assert record["terminal"] and all(row["terminal"] != record["terminal"] for row in after)


def test_a_turn_that_ends_on_an_api_error_is_failed_not_done(tmp_path: Path) -> None:
    record, _ = launch(
        tmp_path, "session-start.startup", "user-prompt-submit", "stop-failure.server-error")
    assert [o["attention"] for o in record["observed"]] == ["idle", "working", "failed"]
