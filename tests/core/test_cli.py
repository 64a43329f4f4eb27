"""The CLI end to end, against a fake harness binary on PATH."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from clanker.cli import cli
from clanker.registry import Registry, override_registry
from clanker.testing.doubles import prepend_to_path
from tests.helpers import make_plugin, write_script

FAKE_AGENT = """
    import json, os, sys, time
    args = sys.argv[1:]
    mode = os.environ.get("FAKE_MODE", "ok")
    if args == ["--version"]:
        if mode == "hang":
            time.sleep(60)
        print("garbage" if mode == "garbage" else "fake-agent 1.2.3")
    elif args == ["models"]:
        if mode == "flood":
            sys.stdout.write("x" * (2 * 1024 * 1024))
        else:
            print("m1\\tModel One\\nm2\\tModel Two")
    else:
        with open(os.environ["FAKE_RECORD"], "w") as handle:
            json.dump({"argv": args, "cwd": os.getcwd(), "pwd": os.environ.get("PWD"),
                       "env": sorted(k for k in os.environ if k.upper().startswith("CLANKER"))},
                      handle)
        sys.exit(int(os.environ.get("FAKE_EXIT", "0")))
"""


@pytest.fixture
def fake_bin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    write_script(bin_dir, "fake-agent", FAKE_AGENT)
    prepend_to_path(monkeypatch, bin_dir)
    monkeypatch.setenv("FAKE_RECORD", str(tmp_path / "record.json"))
    return bin_dir


@pytest.fixture(autouse=True)
def fake_registry() -> Iterator[Registry]:
    registry = Registry.from_plugins({"fake-agent": make_plugin()}, environ={})
    with override_registry(registry):
        yield registry


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_version_and_help() -> None:
    assert invoke("--version").output.startswith("clanker, version ")
    help_text = invoke("--help").output
    for command in ("doctor", "harnesses", "launch", "models", "plugins"):
        assert command in help_text


def test_harnesses_json_reports_installed_version(fake_bin: Path) -> None:
    result = invoke("harnesses", "--json")
    assert result.exit_code == 0
    [record] = json.loads(result.output)
    assert record["id"] == "fake-agent"
    assert record["installed"] is True
    assert record["version"] == "1.2.3"
    assert record["path"] == str(fake_bin / "fake-agent")
    assert record["capabilities"] == ["launch", "models"]
    assert record["operations"]["fork"] == {"support": "native", "transports": ["local"]}


def test_harnesses_lists_what_is_not_installed() -> None:
    result = invoke("harnesses")
    assert result.exit_code == 0
    assert "not installed" in result.output


def test_doctor_says_when_no_harness_is_installed() -> None:
    result = invoke("doctor")
    assert result.exit_code == 0
    assert "to install: pip install fake-agent" in result.output
    assert result.output.splitlines()[-1].startswith("no harness installed")


def test_doctor_is_ok_when_a_harness_is_installed(fake_bin: Path) -> None:
    result = invoke("doctor")
    assert result.exit_code == 0
    assert result.output.splitlines()[-1] == "ok"


@pytest.mark.parametrize("mode", ["garbage", "hang"])
def test_doctor_fails_when_a_binary_misbehaves(
    fake_bin: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    monkeypatch.setenv("FAKE_MODE", mode)
    result = invoke("doctor", "--json")
    assert result.exit_code == 1
    report = json.loads(result.output)
    assert report["ok"] is False
    expected = "parse-failure" if mode == "garbage" else "timeout"
    assert report["harnesses"][0]["error"]["kind"] == expected


def test_doctor_reports_refused_plugins() -> None:
    broken = Registry.from_plugins({"Bad": make_plugin()}, environ={})
    with override_registry(broken):
        result = invoke("doctor")
    assert result.exit_code == 1
    assert "plugin Bad" in result.output
    with override_registry(broken):
        report = json.loads(invoke("doctor", "--json").stdout)
        listed = json.loads(invoke("plugins", "--json").stdout)
    assert report["refused"] == listed["refused"]
    assert report["refused"][0]["name"] == "Bad"


def test_models_lists_then_serves_from_cache(
    fake_bin: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = invoke("models", "fake-agent", "--json")
    assert first.exit_code == 0
    assert json.loads(first.output)["source"] == "live"
    monkeypatch.setenv("PATH", "/nonexistent")
    cached = invoke("models", "fake-agent")
    assert cached.exit_code == 0
    assert "m1" in cached.output and "Model Two" in cached.output


def test_models_failure_shows_fallback_and_exits_with_the_kind(
    fake_bin: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_MODE", "flood")
    result = CliRunner().invoke(cli, ["models", "fake-agent"])
    assert result.exit_code == 9  # output-limit
    assert "fallback-1" in result.output
    assert "more output than allowed" in result.output


def test_unknown_harness_is_a_usage_error() -> None:
    result = CliRunner().invoke(cli, ["models", "nope"])
    assert result.exit_code == 2
    assert "unknown harness 'nope' (known: fake-agent)" in result.output


def test_plugins_json() -> None:
    data = json.loads(invoke("plugins", "--json").output)
    assert data["plugins"][0]["harness"] == "fake-agent"
    assert "clanker_models" in data["plugins"][0]["hooks"]


def test_launch_runs_the_harness_with_flags_and_returns_its_status(
    fake_bin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_EXIT", "17")
    monkeypatch.setenv("CLANKER_ATTENTION_TOKEN", "stale-secret")
    workdir = tmp_path / "work dir"
    workdir.mkdir()
    result = CliRunner().invoke(cli, [
        "launch", "fake-agent", "--model", "m1", "--resume", "abc123", "--cwd", str(workdir),
        "--", "--yolo", "-x", "two words",
    ])
    assert result.exit_code == 17
    record = json.loads((tmp_path / "record.json").read_text())
    assert record["argv"] == ["--model", "m1", "resume", "abc123", "--yolo", "-x", "two words"]
    assert record["cwd"] == str(workdir)
    assert record["pwd"] == str(workdir)
    assert record["env"] == ["CLANKER_HOME"]


def test_launch_refuses_bad_input_before_running(fake_bin: Path, tmp_path: Path) -> None:
    assert CliRunner().invoke(cli, ["launch", "fake-agent", "--resume", "../x"]).exit_code == 2
    both = CliRunner().invoke(cli, ["launch", "fake-agent", "--resume", "a", "--fork", "b"])
    assert both.exit_code == 2
    assert not (tmp_path / "record.json").exists()


def test_launch_missing_binary_exits_4() -> None:
    result = CliRunner().invoke(cli, ["launch", "fake-agent"])
    assert result.exit_code == 4
    assert "executable was not found" in result.output


def test_the_installed_script_never_prints_a_traceback(tmp_path: Path) -> None:
    """A real process: an internal error is one line and exit 1, not a traceback."""
    env = dict(os.environ, CLANKER_HOME=str(tmp_path / "not-a-dir-file"))
    (tmp_path / "not-a-dir-file").write_text("")
    done = subprocess.run(
        [sys.executable, "-m", "clanker.cli", "models", "nope"],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )
    assert "Traceback" not in done.stderr
    assert done.returncode == 2


@pytest.mark.parametrize("args", [("sessions",), ("coder", "--agent-command", "python3", "hi")])
def test_a_removed_working_directory_is_said_in_one_line(tmp_path: Path,
                                                         args: tuple[str, ...]) -> None:
    # A real process whose working directory is gone (`coder` first meets it in
    # its early start, before the CLI loads).
    gone = tmp_path / "gone"
    gone.mkdir()
    code = ("import os, sys; os.chdir(sys.argv[1]); os.rmdir(sys.argv[1]); "
            "sys.argv = ['clanker', *sys.argv[2:]]; "
            "from clanker.__main__ import main; sys.exit(main())")
    done = subprocess.run([sys.executable, "-c", code, str(gone), *args],
                          capture_output=True, text=True, timeout=60, check=False,
                          env=dict(os.environ, CLANKER_HOME=str(tmp_path / "home")))
    assert done.stderr == ("clanker: the current directory no longer exists; cd to one "
                           "that does\n")
    assert done.returncode == 2


# -- one error format ----------------------------------------------------------------


@pytest.mark.parametrize("args", [
    ("sessions", "show", "nope:abc", "--json"),
    ("sessions", "show", "fake-agent:abc", "--json"),
    ("attention", "explain", "t-none", "--json"),
])
def test_under_json_a_failure_is_json_on_stdout_too(
    args: tuple[str, ...], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLANKER_HOME", str(tmp_path / "home"))
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code not in (0, 1)
    error = json.loads(result.stdout)["error"]
    assert error["exit_code"] == result.exit_code
    assert error["message"] and error["kind"]
    assert result.stderr == f"clanker: {error['message']}\n"


def test_without_json_a_failure_is_one_line_on_stderr(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLANKER_HOME", str(tmp_path / "home"))
    result = CliRunner().invoke(cli, ["sessions", "show", "nope:abc"])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith("clanker: unknown harness 'nope'")


def test_a_failing_store_is_named_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from clanker.errors import ErrorKind, HarnessCapabilityError
    from clanker.sessions.capability import SessionsContext
    from clanker.sessions.types import SessionScan
    from tests.helpers import FakeSessions, make_sessions_plugin

    class Missing(FakeSessions):
        async def discover(self, context: SessionsContext) -> SessionScan:
            raise HarnessCapabilityError(ErrorKind.BINARY_UNAVAILABLE, "fake-agent")

    monkeypatch.setenv("CLANKER_HOME", str(tmp_path / "home"))
    registry = Registry.from_plugins({"fake-agent": make_sessions_plugin(Missing())}, environ={})
    with override_registry(registry):
        result = CliRunner().invoke(cli, ["sessions", "--all"])
    assert result.stderr.splitlines() == [
        "clanker: fake-agent: the harness executable was not found (fake-agent)"]


def test_launching_a_harness_that_is_not_installed_starts_no_grid(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from clanker.grid import daemon
    from clanker.paths import clanker_paths

    monkeypatch.setenv("CLANKER_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    result = CliRunner().invoke(cli, ["launch", "fake-agent", "--cwd", str(tmp_path)])
    assert result.exit_code == 4
    assert "the harness executable was not found" in result.stderr
    assert not daemon.status(clanker_paths()).running
    assert not (tmp_path / "home" / "run").exists()


def test_harnesses_offer_only_the_transports_clanker_has(monkeypatch: pytest.MonkeyPatch) -> None:
    from clanker.descriptor import OperationSupport, Support, Transport

    both = OperationSupport(Support.NATIVE, {Transport.LOCAL, Transport.SSH})
    registry = Registry.from_plugins({"fake-agent": make_plugin(fork=both)}, environ={})
    with override_registry(registry):
        [record] = json.loads(invoke("harnesses", "--json").stdout)
    assert record["operations"]["fork"]["transports"] == ["local"]


def test_a_launch_whose_attention_is_declined_says_why_once(
    fake_bin: Path, tmp_path: Path
) -> None:
    from clanker import hookimpl
    from clanker.attention.capability import AttachmentContext, AttachmentPlan, Declined

    class Declining:
        interpreter = None
        resume_preserves_session_id = False

        def prepare(self, context: AttachmentContext) -> AttachmentPlan | Declined:
            return Declined(reason="--settings owns the hooks; launch without it")

    plugin = make_plugin()
    type(plugin).clanker_attention = hookimpl(lambda self: Declining())  # type: ignore[attr-defined]
    registry = Registry.from_plugins({"fake-agent": plugin}, environ={})
    with override_registry(registry):
        result = CliRunner().invoke(cli, ["launch", "fake-agent", "--cwd", str(tmp_path)])
    assert result.exit_code == 0
    assert result.stderr == "clanker: attention: --settings owns the hooks; launch without it\n"
    record = json.loads((tmp_path / "record.json").read_text())
    assert record["env"] == ["CLANKER_HOME"]  # no credential the harness would not use
