"""The early start (:mod:`clanker.acp.early`): ``clanker coder --agent-command``
starts the agent and writes ``initialize`` before the CLI is imported; the CLI
takes that process over, or stops it (its whole process group) when the run
does not come to start it, with the same usage errors as without it."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from clanker.acp import early
from clanker.acp.transport import AgentProcess
from clanker.acp.wire import encode, initialize_request

from .conftest import FAKE_AGENT, Coder, python3_on_path

# An agent that never answers: it keeps the first line it was sent (``<file>.line``)
# and reads until its input ends. For the runs that must not use the agent.
RECORDER = """
import sys
first = sys.stdin.buffer.readline()
with open(sys.argv[1] + ".line", "wb") as out:
    out.write(first)
for _ in sys.stdin.buffer:
    pass
"""

# Runs ``clanker`` in this interpreter (``clanker.__main__.main``, or with ``--cli``
# the click group alone, which never starts early); observes, without changing
# anything, each process the run starts (the reaper's pid, from clanker.procstart)
# and the modules loaded when the agent is started (the audit event of its Popen).
_DRIVER = """
import sys
at_start = sorted(sys.modules)
import json, os
import clanker.procstart as procstart
mark, entry, args = sys.argv[1], sys.argv[2], sys.argv[3:]
started, at_spawn = [], []
real_start = procstart.start
def start(argv, *rest, **kwargs):
    process, report = real_start(argv, *rest, **kwargs)
    if mark in repr(argv):
        started.append(process.pid)
    return process, report
procstart.start = start
def spawned(event, details):
    if event == "subprocess.Popen" and mark in repr(details[1]) and not at_spawn:
        at_spawn.append(sorted(sys.modules))
sys.addaudithook(spawned)
sys.argv = ["clanker", *args]
if entry == "--cli":
    from clanker.cli import main
else:
    from clanker.__main__ import main
code = 0
try:
    main()
except SystemExit as exited:
    code = exited.code
print(json.dumps({"exit": code, "started": started, "start": at_start,
                  "spawn": at_spawn[0] if at_spawn else None}), file=sys.stderr)
"""


def _drive(coder: Coder, mark: str, *args: str, entry: str = "--main",
           cwd: Path | None = None) -> tuple[dict[str, object], subprocess.CompletedProcess[str]]:
    done = subprocess.run([sys.executable, "-c", _DRIVER, mark, entry, "coder", *args],
                          cwd=cwd or coder.workspace, env=coder.environ, capture_output=True,
                          text=True, timeout=120, check=False)
    *rest, last = done.stderr.strip().splitlines()
    report = json.loads(last)
    return report, subprocess.CompletedProcess(done.args, done.returncode, done.stdout,
                                               "\n".join(rest))


def _group_gone(pid: int) -> bool:
    """Whether no process is left in the process group (and session) ``pid`` led."""
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.fixture
def recorder(coder: Coder) -> Path:
    script = coder.workspace.parent / "recorder.py"
    script.write_text(RECORDER)
    return script


def test_a_run_takes_the_agent_started_before_the_cli(coder: Coder) -> None:
    report, done = _drive(coder, "fake_agent.py", "--no-attention", "--agent-command",
                          f"python3 {FAKE_AGENT}", "hello")
    assert (report["exit"], done.stdout) == (0, "Hello world\n"), done.stderr
    started = report["started"]
    assert isinstance(started, list) and len(started) == 1  # started once: taken, not again
    assert _group_gone(started[0])
    # Started with the standard library alone: no click, asyncio or attrs yet.
    spawn = report["spawn"]
    assert isinstance(spawn, list)
    assert sorted(m for m in spawn if m.split(".")[0] in ("click", "asyncio", "attrs",
                                                          "cattrs", "pluggy")) == []
    # Beyond what the interpreter started with: the standard library and these alone.
    loaded = set(spawn) - set(report["start"])  # type: ignore[arg-type]
    assert sorted(m for m in loaded if m.split(".")[0] not in sys.stdlib_module_names) == [
        "clanker", "clanker.__main__", "clanker.acp", "clanker.acp.early", "clanker.acp.wire",
        "clanker.envvars", "clanker.procstart"]
    # The transcript's first record is the frame written then, as it was written.
    [transcript] = (Path(coder.environ["CLANKER_HOME"]) / "state" / "coder").glob("fake-*.jsonl")
    first = json.loads(transcript.read_text().splitlines()[0])
    assert (first["dir"], first["frame"]) == ("out", initialize_request())


def test_an_inherited_credential_never_reaches_the_early_agent(coder: Coder) -> None:
    # A coder started from inside a launched agent inherits its clanker credentials:
    # the early start builds its environment as the local environment does
    # (envvars.host_environ), so the agent it started is the one taken (started
    # once, the environments equal) and never saw them.
    coder.environ["CLANKER_BRIDGE_TOKEN"] = "inherited-secret"
    report, done = _drive(coder, "fake_agent.py", "--no-attention", "--agent-command",
                          f"python3 {FAKE_AGENT}", "env CLANKER_BRIDGE_TOKEN")
    assert (report["exit"], done.stdout) == (0, "value:\n"), done.stderr
    assert isinstance(report["started"], list) and len(report["started"]) == 1


@pytest.mark.parametrize("bad", [("--idle-timeout", "0"), ("--approve", "everything"),
                                 ("--idle-timeout", "soon")])
def test_a_usage_error_reads_as_without_it_and_the_agent_is_stopped(
        coder: Coder, recorder: Path, bad: tuple[str, ...]) -> None:
    args = ("--no-attention", "--agent-command", f"python3 {recorder} {recorder}", *bad, "hi")
    report, done = _drive(coder, "recorder.py", *args)
    plain_report, plain = _drive(coder, "recorder.py", *args, entry="--cli")
    assert plain_report["started"] == []
    assert (report["exit"], done.stdout, done.stderr) == (plain_report["exit"], plain.stdout,
                                                          plain.stderr)
    assert report["exit"] == 2
    started = report["started"]
    assert isinstance(started, list) and len(started) == 1
    assert _group_gone(started[0])  # the reaper and the agent: nothing outlived the run


def _start(args: list[str], environ: dict[str, str]) -> Iterator[early.Started]:
    """Start early; yield what was started (nothing: ``start`` declined); stop it after."""
    try:
        if early.start(args, environ):
            yield early._held[0]
    finally:
        early.discard()


@pytest.mark.parametrize("args", [
    ["--harness", "opencode", "hi"],
    ["--agent-command", "python3 agent.py", "--show", "s1"],
    ["--agent-command", "python3 agent.py", "--list"],
    ["--agent-command", "python3 agent.py", "--help", "hi"],
    ["clean", "--agent-command", "python3 agent.py"],
    ["--agent-command", "python3 agent.py"],  # no prompt, and no terminal here
    ["--agent-command", "python3 agent.py", "  "],
    ["--agent-command", "python3 agent.py", "one", "two"],
    ["--agent-command", "python3 agent.py", "--agent-command", "python3 other.py", "hi"],
    ["--agent-command", "python3 agent.py", "--no-such-option", "hi"],
    ["--agent-command", "/usr/bin/python3 agent.py", "hi"],
    ["--agent-command", "'unclosed", "hi"],
    ["--agent-command", "no-such-acp-agent", "hi"],
    ["--agent-command"],
])
def test_what_the_cli_would_not_start_is_not_started(args: list[str], tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    environ = {**python3_on_path(tmp_path), "CLANKER_HOME": str(tmp_path / "home")}
    assert list(_start(args, environ)) == []


def test_an_agent_with_stored_secrets_is_not_started_early(
        tmp_path: Path, recorder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    home = tmp_path / "home"
    (home / "state").mkdir(parents=True)
    (home / "state" / "coder-secrets.json").write_text(json.dumps({"python3": ["AGENT_KEY"]}))
    environ = {**python3_on_path(tmp_path), "CLANKER_HOME": str(home)}
    args = ["--agent-command", f"python3 {recorder} {recorder}", "hi"]
    assert list(_start(args, environ)) == []
    # ... unless this run sets the variable itself (then no stored secret is injected).
    [started] = list(_start(args, {**environ, "AGENT_KEY": "set"}))
    assert _group_gone(started.process.pid)


def test_another_command_or_environment_is_stopped_not_taken(
        tmp_path: Path, recorder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    environ = {**python3_on_path(tmp_path), "CLANKER_HOME": str(tmp_path / "home")}
    argv = ("python3", str(recorder), str(recorder))
    line = encode(initialize_request()) + b"\n"
    assert early.start(["--agent-command", " ".join(argv), "hi"], environ)
    started = early._held[0]
    assert early.take(argv, {**environ, "PWD": str(tmp_path), "ANOTHER": "1"}, str(tmp_path),
                      line) is None
    assert _group_gone(started.process.pid)
    assert early.take(argv, environ, str(tmp_path), line) is None  # once only
    # What it was sent before it was stopped (if it got that far): initialize, whole.
    sent = recorder.with_name(recorder.name + ".line")
    assert not sent.exists() or sent.read_bytes() in (b"", line)


ECHO = "import sys; sys.stdout.write(sys.stdin.readline()); sys.stdout.flush()"


def test_the_first_line_is_written_as_the_agent_starts(tmp_path: Path) -> None:
    environ = python3_on_path(tmp_path)

    async def run() -> tuple[bytes | None, float | None, bytes | None]:
        process = await AgentProcess.start(("python3", "-c", ECHO), environ, str(tmp_path),
                                           tmp_path / "agent.log", first_line=b'{"id":0}')
        try:
            return await process.read_line(), process.first_line_at, process.first_line
        finally:
            await process.close()

    echoed, at, line = asyncio.run(run())
    assert (echoed, line) == (b'{"id":0}', b'{"id":0}')
    assert at is not None


@pytest.fixture
def opencode(coder: Coder) -> str:
    """``opencode`` on the run's ``PATH``: its ACP server (``opencode acp``) is the fake
    agent, so ``--harness opencode`` starts a real ACP agent."""
    bin_dir = Path(coder.environ["PATH"].split(os.pathsep)[0])
    (bin_dir / "opencode").write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_AGENT}"\n')
    (bin_dir / "opencode").chmod(0o755)
    return "opencode"


def test_a_harness_is_started_before_click_and_asyncio_and_taken(coder: Coder,
                                                                 opencode: str) -> None:
    report, done = _drive(coder, opencode, "--no-attention", "--harness", opencode, "hello")
    assert (report["exit"], done.stdout) == (0, "Hello world\n"), done.stderr
    started = report["started"]
    assert isinstance(started, list) and len(started) == 1
    assert _group_gone(started[0])
    spawn = report["spawn"]
    assert isinstance(spawn, list)
    # The registry and the launch path build its argv and environment; nothing else.
    assert sorted(m for m in spawn if m.split(".")[0] in ("click", "asyncio", "cattrs",
                                                          "tomllib", "rich", "prompt_toolkit")
                  or m.startswith(("clanker.cli", "clanker.acp.client", "clanker.config"))) == []
    # Only this harness's plugin is loaded for it, and no account store for a harness
    # without managed accounts (the CLI then builds the full registry as always).
    plugins = sorted(m for m in spawn if m.startswith("clanker_") and "." not in m)
    assert plugins == ["clanker_opencode"]
    assert [m for m in spawn if m.startswith("clanker.accounts")] == []


@pytest.mark.parametrize(("args", "starts"), [
    (("--harness", "opencode", "--idle-timeout", "0", "hi"), 1),  # started, then stopped
    (("--harness", "no-such-harness", "hi"), 0),
    (("--harness", "opencode", "--account", "nobody", "hi"), 0),
])
def test_a_harness_run_that_fails_reads_as_without_it(coder: Coder, opencode: str,
                                                     args: tuple[str, ...], starts: int) -> None:
    report, done = _drive(coder, opencode, "--no-attention", *args)
    plain_report, plain = _drive(coder, opencode, "--no-attention", *args, entry="--cli")
    assert (report["exit"], done.stdout, done.stderr) == (plain_report["exit"], plain.stdout,
                                                          plain.stderr)
    assert report["exit"] != 0
    started = report["started"]
    assert isinstance(started, list) and len(started) == starts
    assert all(_group_gone(pid) for pid in started)


def _select_claude_account(coder: Coder) -> Path:
    """A managed Claude account, selected, as ``clanker accounts add`` and ``use`` leave
    it (its home made and recorded directly: signing in needs the real CLI)."""
    from clanker.accounts.homes import AccountHomes, new_account_id
    from clanker.accounts.store import AccountRecord, AccountStatus, AccountStore, now
    from clanker.ids import HarnessId

    state = Path(coder.environ["CLANKER_HOME"]) / "state"
    account = new_account_id()
    home = AccountHomes(state / "accounts").create(HarnessId("claude"), account)
    record = AccountRecord(id=account, harness=HarnessId("claude"), label="work",
                           created_at=now(), status=AccountStatus.CONNECTED)
    AccountStore(state / "accounts.json").change(
        lambda s: s.with_account(record).with_selection("local", HarnessId("claude"), account))
    return home


@pytest.mark.parametrize("account", [(), ("--account", "work"), ("--account", "default")])
def test_a_harness_with_managed_accounts_is_started_early_under_its_account(
        coder: Coder, account: tuple[str, ...]) -> None:
    # Claude's ACP adapter is the fake agent. Taken, not started again, only when the
    # early start built the very environment the CLI builds: the selected (or named)
    # account's home included.
    bin_dir = Path(coder.environ["PATH"].split(os.pathsep)[0])
    adapter = bin_dir / "claude-agent-acp"
    adapter.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_AGENT}"\n')
    adapter.chmod(0o755)
    _select_claude_account(coder)
    report, done = _drive(coder, "claude-agent-acp", "--no-attention", "--harness", "claude",
                          *account, "hello")
    assert (report["exit"], done.stdout) == (0, "Hello world\n"), done.stderr
    started = report["started"]
    assert isinstance(started, list) and len(started) == 1
    assert _group_gone(started[0])
    spawn = report["spawn"]
    assert isinstance(spawn, list) and "click" not in spawn  # started early, by the library


@pytest.mark.parametrize("lists", [{"CLANKER_DISABLE_PLUGINS": "opencode"},
                                   {"CLANKER_LOAD_PLUGINS": "claude"},
                                   {"CLANKER_DISABLE_PLUGINS": "clanker-opencode"}])
def test_a_harness_the_plugin_lists_leave_out_is_not_started_early(
        coder: Coder, opencode: str, lists: dict[str, str]) -> None:
    # The one plugin loaded for the early start honours the lists as the full
    # registry does: nothing is started, and the CLI's refusal reads the same.
    coder.environ.update(lists)
    report, done = _drive(coder, opencode, "--no-attention", "--harness", opencode, "hi")
    plain_report, plain = _drive(coder, opencode, "--no-attention", "--harness", opencode,
                                 "hi", entry="--cli")
    assert (report["exit"], done.stdout, done.stderr) == (plain_report["exit"], plain.stdout,
                                                          plain.stderr)
    assert report["exit"] != 0 and "unknown harness" in done.stderr.lower()
    assert report["started"] == [] and report["spawn"] is None


# The spawn plan cache (clanker.acp.plan): a --harness run started through the
# library keeps a plan; the next run starts that server with the standard library.

def _plan_file(coder: Coder, harness: str = "opencode") -> Path:
    return Path(coder.environ["CLANKER_HOME"]) / "cache" / f"coder-plan-{harness}.json"


def _library_loaded(report: dict[str, object]) -> bool:
    spawn = report["spawn"]
    assert isinstance(spawn, list)
    return "clanker.registry" in spawn


def test_a_harness_run_keeps_a_plan_the_next_run_starts_from(coder: Coder,
                                                             opencode: str) -> None:
    first, done = _drive(coder, opencode, "--no-attention", "--harness", opencode, "hello")
    assert (first["exit"], done.stdout) == (0, "Hello world\n"), done.stderr
    assert _library_loaded(first)
    kept = _plan_file(coder)
    assert kept.stat().st_mode & 0o777 == 0o600
    assert json.loads(kept.read_text())["argv"] == ["opencode", "acp"]
    written = kept.stat().st_mtime_ns
    report, done = _drive(coder, opencode, "--no-attention", "--harness", opencode, "hello")
    assert (report["exit"], done.stdout) == (0, "Hello world\n"), done.stderr
    started = report["started"]
    assert isinstance(started, list) and len(started) == 1  # taken, not started again
    assert _group_gone(started[0])
    spawn = report["spawn"]
    assert isinstance(spawn, list)
    loaded = set(spawn) - set(report["start"])  # type: ignore[arg-type]
    assert sorted(m for m in loaded if m.split(".")[0] not in sys.stdlib_module_names) == [
        "clanker", "clanker.__main__", "clanker.acp", "clanker.acp.early", "clanker.acp.plan",
        "clanker.acp.wire", "clanker.envvars", "clanker.procstart"]
    assert kept.stat().st_mtime_ns == written  # the same plan: not written again


def test_a_plan_holds_in_another_workspace(coder: Coder, opencode: str) -> None:
    """The server's argv and environment do not name the directory, so the plan is the
    harness's, not the workspace's: a run in another project starts from it too."""
    _drive(coder, opencode, "--no-attention", "--harness", opencode, "hello")
    assert json.loads(_plan_file(coder).read_text())["cwd"] is None
    other = coder.workspace.parent / "another-project"
    other.mkdir()
    report, done = _drive(coder, opencode, "--no-attention", "--harness", opencode, "hello",
                          cwd=other)
    assert (report["exit"], done.stdout) == (0, "Hello world\n"), done.stderr
    started = report["started"]
    assert isinstance(started, list) and len(started) == 1  # taken, not started again
    assert not _library_loaded(report)


def test_a_plan_that_builds_another_agent_costs_the_head_start_only(coder: Coder,
                                                                    opencode: str) -> None:
    _drive(coder, opencode, "--no-attention", "--harness", opencode, "hello")
    kept = _plan_file(coder)
    plan = json.loads(kept.read_text())
    right = dict(plan)
    plan["set"] = {"SOMETHING_ELSE": "1"}  # every key holds; the environment is not the one
    kept.write_text(json.dumps(plan))
    report, done = _drive(coder, opencode, "--no-attention", "--harness", opencode, "hello")
    assert (report["exit"], done.stdout) == (0, "Hello world\n"), done.stderr
    started = report["started"]
    assert isinstance(started, list) and len(started) == 2  # stopped, and the right one started
    assert all(_group_gone(pid) for pid in started)
    assert not _library_loaded(report)
    assert json.loads(kept.read_text()) == right  # the plan written right again


def test_a_plan_whose_executable_changed_is_not_used(coder: Coder, opencode: str) -> None:
    _drive(coder, opencode, "--no-attention", "--harness", opencode, "hello")
    executable = Path(coder.environ["PATH"].split(os.pathsep)[0]) / opencode
    executable.write_text(executable.read_text() + "# reinstalled\n")
    report, done = _drive(coder, opencode, "--no-attention", "--harness", opencode, "hello")
    assert (report["exit"], done.stdout) == (0, "Hello world\n"), done.stderr
    started = report["started"]
    assert isinstance(started, list) and len(started) == 1
    assert _library_loaded(report)  # the library's early start, the plan left unread


@pytest.mark.parametrize("spoil", ["torn", "garbage", "foreign", "shared", "oversized",
                                   "linked", "directory", "other-version"])
def test_a_spoilt_plan_file_is_ignored(coder: Coder, opencode: str, spoil: str) -> None:
    _drive(coder, opencode, "--no-attention", "--harness", opencode, "hello")
    kept = _plan_file(coder)
    raw = kept.read_bytes()
    if spoil == "torn":
        kept.write_bytes(raw[: len(raw) // 2])
    elif spoil == "garbage":
        kept.write_bytes(b"\xff\x00not json")
    elif spoil == "foreign":
        plan = json.loads(raw)
        plan["harness"] = "claude"
        kept.write_text(json.dumps(plan))
    elif spoil == "shared":
        kept.chmod(0o644)
    elif spoil == "oversized":
        plan = json.loads(raw)
        plan["unset"] = ["X" * 1024] * 300
        kept.write_text(json.dumps(plan))
    elif spoil == "linked":
        target = kept.with_name("elsewhere.json")
        kept.rename(target)
        kept.symlink_to(target)
    elif spoil == "directory":
        kept.unlink()
        kept.mkdir()
    else:
        plan = json.loads(raw)
        plan["version"] = 0
        kept.write_text(json.dumps(plan))
    report, done = _drive(coder, opencode, "--no-attention", "--harness", opencode, "hello")
    assert (report["exit"], done.stdout) == (0, "Hello world\n"), done.stderr
    started = report["started"]
    assert isinstance(started, list) and len(started) == 1
    assert _library_loaded(report)


def test_no_plan_is_kept_for_a_harness_under_a_managed_account(coder: Coder) -> None:
    bin_dir = Path(coder.environ["PATH"].split(os.pathsep)[0])
    adapter = bin_dir / "claude-agent-acp"
    adapter.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_AGENT}"\n')
    adapter.chmod(0o755)
    _select_claude_account(coder)
    report, done = _drive(coder, "claude-agent-acp", "--no-attention", "--harness", "claude",
                          "hello")
    assert (report["exit"], done.stdout) == (0, "Hello world\n"), done.stderr
    assert not _plan_file(coder, "claude").exists()


def test_a_plan_is_not_used_once_a_secret_is_stored(coder: Coder, opencode: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    _drive(coder, opencode, "--no-attention", "--harness", opencode, "hello")
    monkeypatch.chdir(coder.workspace)
    args = ["--harness", opencode, "hi"]
    [started] = list(_start_planned(args, coder.environ))
    assert started.argv == ("opencode", "acp")
    state = Path(coder.environ["CLANKER_HOME"]) / "state"
    (state / "coder-secrets.json").write_text(json.dumps({"opencode": ["AGENT_KEY"]}))
    assert list(_start_planned(args, coder.environ)) == []


def _start_planned(args: list[str], environ: dict[str, str]) -> Iterator[early.Started]:
    """Start early from a plan alone (the library's start declines)."""
    try:
        if early.start(args, environ, harness=lambda harness, account: False):
            yield early._held[0]
    finally:
        early.discard()
