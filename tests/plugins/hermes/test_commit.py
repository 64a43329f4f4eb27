"""Hermes Agent has no commit capability, on purpose (docs/harnesses/hermes.md, "Commit messages").

hermes-agent 0.19.0's one-shot modes (`-z`, `chat -q`) print plain text, persist a session
and carry tools; ACP persists and carries tools; the TUI gateway's `llm.oneshot` is
structured and tool-free but cannot fail closed (reasoning-only and cut-off answers come
back as success, providers fall back silently, no per-request model). The capability is
absent rather than approximated; these tests keep it so.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from clanker.capabilities import Capability
from clanker.cli import cli
from clanker.registry import Registry, override_registry
from clanker.testing.commit import git, installed_provider
from clanker.testing.doubles import prepend_to_path
from tests.helpers import write_script

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "hermes" / "commit"


def test_hermes_declares_and_implements_no_commit_capability() -> None:
    provider = installed_provider("hermes")
    assert provider.commit is None
    assert Capability.COMMIT not in provider.capabilities
    assert "clanker_commit" not in provider.hooks


def test_the_commit_fixtures_say_they_back_no_capability() -> None:
    readme = (FIXTURES / "README.md").read_text()
    assert "Not used by a capability" in readme


def test_the_fixtures_show_why_llm_oneshot_cannot_fail_closed() -> None:
    """The finding, kept honest: these answers look exactly like a good one."""
    def answer(name: str) -> dict[str, object]:
        lines = [json.loads(line) for line in (FIXTURES / name).read_text().splitlines()]
        [response] = [line for line in lines if line.get("id") == 1]
        return response

    good = answer("gateway-llm-oneshot-stub-success.stdout.ndjson")
    reasoning = answer("gateway-llm-oneshot-stub-reasoning-only.stdout.ndjson")
    cut_off = answer("gateway-llm-oneshot-stub-length.stdout.ndjson")
    for response in (good, reasoning, cut_off):
        assert set(response) == {"jsonrpc", "id", "result"}
        result = response["result"]
        assert isinstance(result, dict) and set(result) == {"text"}
        assert isinstance(result["text"], str) and result["text"].strip()
    assert reasoning["result"] == {"text": "The change adds retries."}


def test_commit_message_with_hermes_is_unsupported_and_runs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "a.txt").write_text("one\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "One")
    (repo / "a.txt").write_text("two\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    ran = tmp_path / "hermes-ran"
    # Doubles of hermes and of Hermes's interpreter (the gateway's `python -m
    # tui_gateway.entry`) that only record that they were started: they never should be.
    record = f"open({str(ran)!r}, 'a').close()\n"
    write_script(bin_dir, "hermes", record)
    python = write_script(bin_dir, "hermes-python", record)
    prepend_to_path(monkeypatch, bin_dir)
    monkeypatch.setenv("HERMES_PYTHON", str(python))
    monkeypatch.chdir(repo)
    with override_registry(Registry.from_entry_points({"CLANKER_LOAD_PLUGINS": "hermes"})):
        result = CliRunner().invoke(cli, ["commit-message", "--harness", "hermes"])
        with_model = CliRunner().invoke(
            cli, ["commit-message", "--harness", "hermes", "-m", "probe-model", "--json"])
    for outcome in (result, with_model):
        assert outcome.exit_code == 3, outcome.output
        assert "does not support" in outcome.output
    assert not ran.exists()
    assert (repo / "a.txt").read_text() == "two\n"
