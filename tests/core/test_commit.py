"""Commit messages: git context from real repositories, the answer check, the service, the CLI."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from clanker.cli import cli
from clanker.commit.gitcontext import (
    FILE_BUDGET,
    NotARepositoryError,
    NothingToCommitError,
    collect_changes,
)
from clanker.commit.message import SUBJECT_LIMIT, Style, normalize_message
from clanker.commit.prompt import PROMPT_LIMIT, build_prompt
from clanker.commit.service import CommitService, RepositoryBusyError
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import LocalTransport
from clanker.ids import HarnessId
from clanker.registry import Registry, override_registry
from clanker.testing.commit import git, propose
from clanker.testing.doubles import prepend_to_path
from tests.helpers import make_commit_plugin, write_script


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    (root / "app.py").write_text("print('v1')\n")
    (root / "big.txt").write_text("line\n" * 10)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "Add the app")
    return root


def changes(path: Path):  # type: ignore[no-untyped-def]
    return asyncio.run(collect_changes(LocalTransport(), str(path)))


def index_state(repo: Path) -> tuple[bytes, float]:
    index = repo / ".git" / "index"
    return index.read_bytes(), index.stat().st_mtime


def test_context_covers_staged_unstaged_and_untracked_without_touching_the_index(
    repo: Path, tmp_path: Path
) -> None:
    (repo / "app.py").write_text("print('v2')\n")
    git(repo, "add", "app.py")
    (repo / "app.py").write_text("print('v3')\n")
    (repo / "notes.md").write_text("# notes\n")
    (repo / "blob.bin").write_bytes(b"\0\1\2" * 100)
    (repo / "huge.txt").write_text("h" * (FILE_BUDGET * 3))
    (tmp_path / "secret.txt").write_text("do not read")
    (repo / "link.txt").symlink_to(tmp_path / "secret.txt")
    before = index_state(repo)
    change = changes(repo / "")
    assert index_state(repo) == before
    assert change.root == str(repo)
    assert "print('v3')" in change.patch and "print('v1')" in change.patch
    assert "--- new file: notes.md\n# notes" in change.untracked
    assert "do not read" not in change.untracked
    assert "new file link.txt (a symbolic link)" in change.omitted
    assert "new file blob.bin (binary)" in change.omitted
    assert "the rest of new file huge.txt" in change.omitted
    assert change.recent_subjects == ("Add the app",)


def test_huge_tracked_patches_are_cut_and_listed(repo: Path) -> None:
    (repo / "big.txt").write_text("changed line\n" * 20_000)
    change = changes(repo)
    assert "the rest of the patch of big.txt" in change.omitted
    assert len(change.patch) < FILE_BUDGET * 2


def test_a_repository_without_commits(tmp_path: Path) -> None:
    root = tmp_path / "fresh"
    root.mkdir()
    git(root, "init", "-q")
    (root / "a.txt").write_text("first\n")
    git(root, "add", "a.txt")
    change = changes(root)
    assert "+first" in change.patch


def test_not_a_repository_and_nothing_to_commit(repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "plain"
    outside.mkdir()
    with pytest.raises(NotARepositoryError):
        changes(outside)
    with pytest.raises(NothingToCommitError):
        changes(repo)


def test_the_prompt_is_bounded(repo: Path) -> None:
    for index in range(40):
        (repo / f"new-{index}.txt").write_text(f"content {index}\n" * 500)
    change = changes(repo)
    prompt = build_prompt(change, Style.PLAIN)
    assert len(prompt) <= PROMPT_LIMIT
    assert "over the size budget" in "\n".join(change.omitted)


# -- checking the answer ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "subject", "body"),
    [
        ("Add retry to the sync client", "Add retry to the sync client", None),
        ("\n\nFix the upload race  \n\nUploads raced the index.\nNow they wait.\n\n",
         "Fix the upload race", "Uploads raced the index.\nNow they wait."),
        ("Fix it\r\n\r\nBecause.", "Fix it", "Because."),
    ],
)
def test_plain_messages(answer: str, subject: str, body: str | None) -> None:
    message = normalize_message(answer, Style.PLAIN, harness="h")
    assert (message.subject, message.body) == (subject, body)


@pytest.mark.parametrize(
    "answer",
    [
        "",
        "   \n\n",
        "```\nFix it\n```",
        "Here is a commit message:\n\nFix it",
        '"Fix it"',
        "`Fix it`",
        "# Fix it",
        "- Fix it",
        "x" * (SUBJECT_LIMIT + 1),
        "Fix it\nno blank line before the body",
        "Fix \x1b[31mit",
    ],
)
def test_decorated_or_malformed_answers_fail_closed(answer: str) -> None:
    with pytest.raises(HarnessCapabilityError) as caught:
        normalize_message(answer, Style.PLAIN, harness="h")
    assert caught.value.kind is ErrorKind.PARSE_FAILURE


def test_conventional_style_is_checked() -> None:
    ok = normalize_message("feat(sync): add retry", Style.CONVENTIONAL, harness="h")
    assert ok.subject == "feat(sync): add retry"
    with pytest.raises(HarnessCapabilityError):
        normalize_message("Add retry", Style.CONVENTIONAL, harness="h")


@given(st.text())
def test_any_answer_is_a_message_or_a_typed_refusal(answer: str) -> None:
    try:
        message = normalize_message(answer, Style.PLAIN, harness="h")
    except HarnessCapabilityError as exc:
        assert exc.kind is ErrorKind.PARSE_FAILURE
    else:
        assert message.subject and "\n" not in message.subject
        assert len(message.subject) <= SUBJECT_LIMIT


# -- the service and the CLI, with a harness double -------------------------------------------

FAKE_COMMIT_AGENT = """
    import json, os, sys
    prompt = sys.stdin.read()
    open(os.environ["FAKE_PROMPT"], "w").write(prompt)
    answer = os.environ.get("FAKE_ANSWER", "Update the app\\n\\nIt prints v2 now.")
    if os.environ.get("FAKE_MODE") == "incomplete":
        print(json.dumps({"status": "failed"}))
    else:
        print(json.dumps({"status": "completed", "message": answer, "argv": sys.argv[1:]}))
"""


@pytest.fixture
def harness(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    write_script(bin_dir, "fake-agent", FAKE_COMMIT_AGENT)
    prepend_to_path(monkeypatch, bin_dir)
    monkeypatch.setenv("FAKE_PROMPT", str(tmp_path / "prompt.txt"))
    registry = Registry.from_plugins({"fake-agent": make_commit_plugin()}, environ={})
    with override_registry(registry):
        yield tmp_path / "prompt.txt"


def test_the_service_asks_the_harness_and_checks_the_answer(
    repo: Path, harness: Path, tmp_path: Path
) -> None:
    (repo / "app.py").write_text("print('v2')\n")
    provider = Registry.from_plugins({"fake-agent": make_commit_plugin()}, environ={}) \
        .get_provider(HarnessId("fake-agent"))
    proposal = propose(provider, repo, tmp_path / "locks", "m1", Style.PLAIN)
    assert proposal.message.text == "Update the app\n\nIt prints v2 now."
    assert "print('v2')" in harness.read_text()


def test_a_second_request_for_the_same_repository_is_refused(repo: Path, tmp_path: Path) -> None:
    service = CommitService(executor=LocalTransport(), lock_dir=tmp_path / "locks")
    with service._exclusive(str(repo)), pytest.raises(RepositoryBusyError), \
            service._exclusive(str(repo)):
        pass
    with service._exclusive(str(repo)):  # released: free again
        pass


def test_cli_prints_the_message_and_changes_nothing(
    repo: Path, harness: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (repo / "app.py").write_text("print('v2')\n")
    monkeypatch.chdir(repo)
    before = (index_state(repo), git(repo, "rev-parse", "HEAD"))
    result = CliRunner().invoke(cli, ["commit-message", "--harness", "fake-agent", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["subject"] == "Update the app"
    assert data["repository"] == str(repo)
    assert (index_state(repo), git(repo, "rev-parse", "HEAD")) == before


def test_cli_commit_with_yes_stages_everything_and_commits(
    repo: Path, harness: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (repo / "app.py").write_text("print('v2')\n")
    (repo / "new.txt").write_text("new\n")
    monkeypatch.chdir(repo)
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Dev")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "dev@example.com")
    monkeypatch.setenv("GIT_COMMITTER_NAME", "Dev")
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", "dev@example.com")
    result = CliRunner().invoke(cli, ["commit-message", "--harness", "fake-agent", "--commit",
                                      "--yes"])
    assert result.exit_code == 0, result.output
    assert git(repo, "log", "-1", "--format=%B").strip() == "Update the app\n\nIt prints v2 now."
    assert git(repo, "status", "--porcelain") == ""


@pytest.mark.parametrize(
    ("setup", "code", "text"),
    [
        ("clean", 16, "nothing to commit"),
        ("outside", 15, "not inside a git work tree"),
        ("incomplete", 11, "not in the expected format"),
        ("decorated", 11, "code block"),
        ("no-harness", 2, "choose a harness"),
        ("no-yes", 2, "needs --yes"),
    ],
)
def test_cli_failures_are_clear_and_change_nothing(
    repo: Path, harness: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    setup: str, code: int, text: str,
) -> None:
    args = ["commit-message", "--harness", "fake-agent"]
    if setup != "clean":
        (repo / "app.py").write_text("print('v2')\n")
    monkeypatch.chdir(repo)
    if setup == "outside":
        (tmp_path / "plain").mkdir()
        monkeypatch.chdir(tmp_path / "plain")
    elif setup == "incomplete":
        monkeypatch.setenv("FAKE_MODE", "incomplete")
    elif setup == "decorated":
        monkeypatch.setenv("FAKE_ANSWER", "```\nUpdate the app\n```")
    elif setup == "no-harness":
        args = ["commit-message"]
    elif setup == "no-yes":
        args.append("--commit")
    before = (index_state(repo), git(repo, "rev-parse", "HEAD"))
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == code, result.output
    assert text in result.output
    assert (index_state(repo), git(repo, "rev-parse", "HEAD")) == before


def test_config_sets_the_default_harness_and_style(
    repo: Path, harness: Path, monkeypatch: pytest.MonkeyPatch, isolated_clanker: Path
) -> None:
    config = isolated_clanker / "config"
    config.mkdir()
    (config / "config.toml").write_text(
        '[commit]\nharness = "fake-agent"\nstyle = "conventional"\n'
    )
    (repo / "app.py").write_text("print('v2')\n")
    monkeypatch.chdir(repo)
    monkeypatch.setenv("FAKE_ANSWER", "feat(app): print v2")
    result = CliRunner().invoke(cli, ["commit-message"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "feat(app): print v2"
    (config / "config.toml").write_text('[commit]\nharnes = "typo"\n')
    bad = CliRunner().invoke(cli, ["commit-message"])
    assert bad.exit_code == 2
    assert "harnes" in bad.output


def test_an_unusable_model_name_is_a_usage_error(
    repo: Path, harness: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (repo / "app.py").write_text("print('v2')\n")
    monkeypatch.chdir(repo)
    result = CliRunner().invoke(cli, ["commit-message", "--harness", "fake-agent",
                                      "--model", "bad\x00model"])
    assert result.exit_code == 2
    assert "model name" in result.output


@pytest.mark.parametrize("kind", ["fifo", "link-to-itself", "link-elsewhere", "directory"])
def test_an_odd_lock_file_is_refused_without_blocking(tmp_path: Path, kind: str) -> None:
    import hashlib
    import os
    import threading

    repo = tmp_path / "repo"
    repo.mkdir()
    locks = tmp_path / "locks"
    locks.mkdir()
    name = hashlib.sha256(os.path.realpath(repo).encode()).hexdigest()[:32]
    lock = locks / f"commit-{name}.lock"
    if kind == "fifo":
        os.mkfifo(lock)
    elif kind == "link-to-itself":
        lock.symlink_to(lock)
    elif kind == "link-elsewhere":
        (tmp_path / "elsewhere").write_text("")
        lock.symlink_to(tmp_path / "elsewhere")
    else:
        lock.mkdir()
    service = CommitService(executor=LocalTransport(), lock_dir=locks)
    outcome: list[BaseException] = []

    def hold() -> None:
        try:
            with service._exclusive(str(repo)):
                pass
        except BaseException as exc:
            outcome.append(exc)

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    holder.join(timeout=30)  # a hang guard only
    assert not holder.is_alive(), "taking the lock blocked"
    [error] = outcome
    assert isinstance(error, RepositoryBusyError) and str(lock) in str(error)


def test_typed_events_yield_objects_naming_their_event_and_refuse_anything_else() -> None:
    from clanker.commit.capability import typed_events

    stream = '{"type":"a","x":1}\n\n  {"type":"b"}  \n{"type":"partial","big":"…"}\n'
    assert [e["type"] for e in typed_events(stream, harness="zed", skip=('{"type":"partial"',))
            ] == ["a", "b"]
    assert [e["event"] for e in typed_events('{"event":"e"}\n', harness="zed", key="event")] == [
        "e"]
    # U+2028 inside a string is text, not a line break.
    assert next(typed_events('{"type":"a","t":"x\u2028y"}', harness="zed"))["t"] == "x\u2028y"
    for bad in ("not json\n", '{"type":1}\n', "[1]\n", "[" * 100_000 + "\n", '{"kind":"a"}\n'):
        with pytest.raises(HarnessCapabilityError) as caught:
            list(typed_events('{"type":"ok"}\n' + bad, harness="zed"))
        assert caught.value.kind is ErrorKind.PARSE_FAILURE and caught.value.harness == "zed"


def test_commit_failures_name_their_harness_once() -> None:
    from clanker.commit.capability import CommitFailures

    failures = CommitFailures("zed")
    refused = failures.parse("the answer is empty")
    assert (refused.kind, refused.harness) == (ErrorKind.PARSE_FAILURE, "zed")
    failed = failures.fail(ErrorKind.COMMAND_FAILED, "exit status 1")
    assert (failed.kind, failed.harness) == (ErrorKind.COMMAND_FAILED, "zed")
    assert "exit status 1" in str(failed)


@pytest.mark.parametrize(("value", "shown"), [
    (401, 401), (100, 100), (599, 599), (99, None), (600, None), (-401, None),
    (True, None), (401.0, None), ("401", None), (None, None),
])
def test_only_an_http_status_code_is_shown(value: object, shown: int | None) -> None:
    from clanker.commit.capability import http_status

    assert http_status(value) == shown


# -- the helpers of a plugin's real-CLI commit tests (clanker.testing.commit) -------------


def test_a_refused_real_run_puts_the_marker_in_the_prompt_and_keeps_the_repository(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from clanker.testing.commit import (
        MARKER,
        change_repository,
        check_kept_nowhere,
        install_replay_double,
        refused_real_run,
    )

    repo = change_repository(tmp_path)
    double = install_replay_double(tmp_path / "bin", "pi")
    prepend_to_path(monkeypatch, double.path.parent)
    stream = Path(__file__).resolve().parents[1] / "fixtures" / "pi" / "commit"
    double.replay(monkeypatch, stream / "json-http-400.stdout.jsonl")
    error = refused_real_run("pi", repo, tmp_path / "locks", None)
    assert error.kind is ErrorKind.COMMAND_FAILED
    assert MARKER in double.stdin().decode()
    check_kept_nowhere(tmp_path, "never-written")
    with pytest.raises(AssertionError):
        check_kept_nowhere(tmp_path / "bin")  # the double's record of its stdin holds it
    check_kept_nowhere(tmp_path / "bin", outside=tmp_path / "bin")
    # A run that answers is no refusal.
    double.replay(monkeypatch, stream / "stub-success.stdout.jsonl")
    with pytest.raises(pytest.fail.Exception):
        refused_real_run("pi", repo, tmp_path / "locks", None)
