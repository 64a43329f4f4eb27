"""What a command imports when it has little to do: what it does not need loads on first use.

Each case runs the real CLI in a fresh interpreter and reads ``sys.modules``
once it has answered: a check of what was imported, never of how long it took.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from clanker.accounts.store import AccountState

_PROBE = textwrap.dedent("""
    import json, sys
    from clanker.cli import main

    try:
        main(sys.argv[1:])
    except SystemExit as exited:
        code = exited.code
    print(json.dumps({"exit": code, "modules": sorted(sys.modules)}), file=sys.stderr)
""")

# Loaded only by what needs them: a store that is there (sqlite3, a cache to
# write), a managed account (hashes, secrets, the accounts service), a grid's
# socket (the grid's modules), a scan large enough for the summary worker (pickle).
_NOT_FOR_EMPTY_STORES = ("sqlite3", "hashlib", "secrets", "tempfile", "pickle",
                         "clanker.accounts.service", "clanker.accounts.store",
                         "clanker.accounts.homes", "clanker.grid.daemon",
                         "clanker.sessions.selection")


def _run(argv: list[str], tmp_path: Path) -> tuple[int, set[str], str]:
    empty = tmp_path / "empty"
    empty.mkdir(exist_ok=True)
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("CLANKER_", "OPENCODE_", "HERMES_", "PI_", "CODEX_", "CLAUDE_"))}
    env.update({"CLANKER_HOME": str(tmp_path / "clanker"), "HOME": str(empty),
                "XDG_DATA_HOME": str(empty), "XDG_CONFIG_HOME": str(empty),
                "XDG_STATE_HOME": str(empty), "XDG_CACHE_HOME": str(empty),
                "XDG_RUNTIME_DIR": str(tmp_path / "run"),
                "CODEX_HOME": str(empty), "CLAUDE_CONFIG_DIR": str(empty),
                "PI_CODING_AGENT_DIR": str(empty), "PATH": str(tmp_path / "no-bin")})
    done = subprocess.run([sys.executable, "-c", _PROBE, *argv], capture_output=True,
                          text=True, env=env, check=False, timeout=120)
    report = json.loads(done.stderr.strip().splitlines()[-1])
    return report["exit"], set(report["modules"]), done.stdout


def test_sessions_over_empty_stores_loads_no_database_and_no_accounts(tmp_path: Path) -> None:
    code, modules, out = _run(["sessions", "--json", "--all"], tmp_path)
    assert code == 0
    listing = json.loads(out)
    assert listing["sessions"] == []
    assert {scan["harness"] for scan in listing["scans"]} >= {"claude", "codex", "pi"}
    assert sorted(modules & set(_NOT_FOR_EMPTY_STORES)) == []
    # Nothing in any store and no listing command installed: answered without a scan.
    assert sorted(modules & set(_NOT_FOR_NOTHING_TO_READ)) == []


# What a scan needs, and a listing with nothing to read does not (``logging``: nothing
# is logged, and no event loop runs whose errors the CLI turns into one line).
_NOT_FOR_NOTHING_TO_READ = ("asyncio", "ssl", "concurrent.futures", "subprocess", "logging",
                            "clanker.sessions.service", "clanker.sessions.pool",
                            "clanker.sessions.answers_disk", "cattrs",
                            "clanker.execution.local", "clanker.execution.process",
                            # The store readers: where a store is costs none of them.
                            "clanker.stores", "clanker.pistore", "clanker.sessions.filestore",
                            *(f"clanker_{harness}.summaries" for harness in (
                                "agy", "claude", "codex", "hermes", "omp", "opencode", "pi")))


def test_a_store_with_a_file_is_scanned(tmp_path: Path) -> None:
    # The same stores with one entry under Codex's: the service lists (and finds no
    # session in a file that is not one), on this thread: files alone need no loop.
    sessions = tmp_path / "empty" / "sessions"
    sessions.mkdir(parents=True)
    (sessions / "note.txt").write_text("not a rollout\n")
    code, modules, out = _run(["sessions", "--json", "--all"], tmp_path)
    assert code == 0
    assert json.loads(out)["sessions"] == []
    assert "clanker.sessions.service" in modules
    assert sorted(modules & {"asyncio", "ssl", "concurrent.futures"}) == []


def test_an_installed_listing_command_is_run(tmp_path: Path) -> None:
    # OpenCode lists through its own executable: once one is on PATH it is asked.
    bin_dir = tmp_path / "no-bin"
    bin_dir.mkdir()
    (bin_dir / "opencode").write_text("#!/bin/sh\nexit 3\n")
    (bin_dir / "opencode").chmod(0o755)
    code, modules, out = _run(["sessions", "--json", "--all"], tmp_path)
    assert code == 0
    scans = {scan["harness"]: scan for scan in json.loads(out)["scans"]}
    assert scans["opencode"]["error"]["kind"] != "binary-unavailable"
    assert {"asyncio", "clanker.sessions.service"} <= modules


def test_an_accounts_file_brings_the_accounts_service_in(tmp_path: Path) -> None:
    # The same command with a (here empty) accounts file: the service reads it.
    state = tmp_path / "clanker" / "state"
    state.mkdir(parents=True)
    (state / "accounts.json").write_text(json.dumps(AccountState().to_json()))
    os.chmod(state / "accounts.json", 0o600)
    code, modules, _ = _run(["sessions", "--json", "--all"], tmp_path)
    assert code == 0
    assert "clanker.accounts.service" in modules


@pytest.mark.parametrize("argv", [["harnesses", "--json"], ["status"]])
def test_commands_without_a_store_load_no_database(argv: list[str], tmp_path: Path) -> None:
    code, modules, _ = _run(argv, tmp_path)
    assert code == 0
    assert sorted(modules & {"sqlite3", "hashlib", "clanker.accounts.service"}) == []


# With nothing installed there is no version to ask: no event loop, no process.
_NOT_FOR_A_LOOKUP = ("asyncio", "ssl", "subprocess", "shutil", "concurrent.futures",
                     "clanker.execution.local", "clanker.execution.process",
                     "clanker.execution.session")


def test_harnesses_with_nothing_installed_starts_no_event_loop(tmp_path: Path) -> None:
    code, modules, out = _run(["harnesses", "--json"], tmp_path)
    assert code == 0
    records = json.loads(out)
    assert {record["id"] for record in records} >= {"claude", "codex", "pi"}
    assert not any(record["installed"] for record in records)
    assert sorted(modules & set(_NOT_FOR_A_LOOKUP)) == []


def test_harnesses_with_one_installed_asks_it_for_its_version(tmp_path: Path) -> None:
    # The same command with Codex on PATH: its version is asked through the executor.
    bin_dir = tmp_path / "no-bin"
    bin_dir.mkdir()
    (bin_dir / "codex").write_text("#!/bin/sh\necho 'codex-cli 0.171.0'\n")
    (bin_dir / "codex").chmod(0o755)
    code, modules, out = _run(["harnesses", "--json"], tmp_path)
    assert code == 0
    codex = next(record for record in json.loads(out) if record["id"] == "codex")
    assert (codex["installed"], codex["path"], codex["version"]) == (
        True, str(bin_dir / "codex"), "0.171.0")
    assert {"asyncio", "clanker.execution.local"} <= modules


_INTERFACE = ("rich", "prompt_toolkit", "clanker.acp.ui", "clanker.acp.ui.blocks",
              "clanker.acp.ui.screen")


@pytest.mark.parametrize("argv", [["--help"], ["harnesses", "--json"], ["status"],
                                  ["coder", "--help"], ["coder", "--show", "no-such-session"]])
def test_only_the_coder_conversation_loads_the_terminal_interface(argv: list[str],
                                                                  tmp_path: Path) -> None:
    # rich and prompt_toolkit come in when a conversation's screen starts, never before.
    code, modules, _ = _run(argv, tmp_path)
    assert code in (0, 37)  # 37: no such coder transcript
    assert sorted(m for m in modules if m.split(".")[0] in ("rich", "prompt_toolkit")
                  or m.startswith("clanker.acp.ui")) == []
    assert not set(_INTERFACE) & modules


def test_status_with_no_grid_running_loads_no_ssh_transport(tmp_path: Path) -> None:
    # The hosts module (and with it the SSH transport and asyncio) waits for a grid
    # or a `--host`; with neither, `status` only says that nothing is running.
    code, modules, out = _run(["status"], tmp_path)
    assert code == 0
    assert "the grid is not running" in out
    assert sorted(modules & {"clanker.hosts", "clanker.execution.ssh", "asyncio", "ssl"}) == []


def test_status_for_a_host_loads_the_hosts_module(tmp_path: Path) -> None:
    # The same command naming a host: an unknown name is the hosts module's error.
    code, modules, _ = _run(["status", "--host", "nowhere"], tmp_path)
    assert code == 40
    assert "clanker.hosts" in modules


def _imported_by(code: str) -> set[str]:
    """The modules ``code`` loads beyond what a bare interpreter starts with."""
    probe = ("import sys; before = set(sys.modules)\n" + code +
             "\nprint(' '.join(sorted(set(sys.modules) - before)))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True, timeout=60)
    return set(done.stdout.split())


def test_the_coder_early_start_is_the_standard_library_alone() -> None:
    # `clanker coder --agent-command` starts its agent with these before click loads.
    loaded = _imported_by("import clanker.acp.early, clanker.acp.wire, clanker.procstart")
    assert sorted(m for m in loaded if m.split(".")[0] not in sys.stdlib_module_names) == [
        "clanker", "clanker.acp", "clanker.acp.early", "clanker.acp.wire", "clanker.envvars",
        "clanker.procstart"]
    assert not {"asyncio", "typing_extensions"} & loaded


def test_a_harness_early_start_reads_its_server_without_asyncio_or_click(tmp_path: Path) -> None:
    # `clanker coder --harness`'s early start: the library builds the server's argv and
    # environment (that harness's plugin alone, the launch path; no account store for
    # a harness without managed accounts) before asyncio and click; here it then
    # finds no opencode on PATH, which the CLI would report.
    loaded = _imported_by(
        "import os\n"
        f"os.environ.update(CLANKER_HOME={str(tmp_path)!r}, PATH={str(tmp_path)!r})\n"
        "from clanker.api import Clanker\n"
        "from clanker.errors import HarnessCapabilityError\n"
        "try:\n"
        "    Clanker().start_coder_early('opencode', cwd=os.getcwd())\n"
        "except HarnessCapabilityError as error:\n"
        "    assert error.kind.value == 'binary-unavailable', error\n")
    assert sorted({m.split(".")[0] for m in loaded} - set(sys.stdlib_module_names)) == [
        "attr", "attrs", "clanker", "clanker_opencode", "pluggy"]
    assert sorted(m for m in loaded if m.startswith("clanker")) == [
        "clanker", "clanker._logging", "clanker.acp", "clanker.acp.capability",
        "clanker.acp.early", "clanker.acp.errors", "clanker.acp.secrets",
        "clanker.acp.service", "clanker.acp.transcript", "clanker.acp.wire", "clanker.api",
        "clanker.capabilities", "clanker.descriptor", "clanker.entrypoints",
        "clanker.environment", "clanker.environment.local", "clanker.envvars",
        "clanker.errors", "clanker.execution", "clanker.execution.request", "clanker.grid",
        "clanker.grid.errors", "clanker.hookspecs", "clanker.ids", "clanker.launch",
        "clanker.launch.attachments", "clanker.launch.blocking", "clanker.launch.planning",
        "clanker.launch.request", "clanker.launch.service", "clanker.paths",
        "clanker.plugin", "clanker.registry", "clanker.storage", "clanker_opencode",
        "clanker_opencode.acp"]
    assert not {"asyncio", "hashlib", "secrets"} & loaded


def test_a_harness_early_start_uses_an_overridden_registry(tmp_path: Path) -> None:
    # A process-wide registry set already (here one without opencode) is the one
    # asked, as every other call asks it: no plugin is loaded on the side.
    loaded = _imported_by(
        "import os\n"
        f"os.environ.update(CLANKER_HOME={str(tmp_path)!r}, PATH={str(tmp_path)!r})\n"
        "from clanker.api import Clanker\n"
        "from clanker.registry import Registry, UnknownHarnessError, override_registry\n"
        "with override_registry(Registry.from_plugins({})):\n"
        "    try:\n"
        "        Clanker().start_coder_early('opencode', cwd=os.getcwd())\n"
        "    except UnknownHarnessError as error:\n"
        "        assert error.known == (), error\n"
        "    else:\n"
        "        raise AssertionError('opencode was found')\n")
    assert "clanker_opencode" not in loaded


def test_the_script_leaves_its_objects_to_the_exit_and_the_cli_alone_does_not() -> None:
    # clanker/__main__.py freezes the collector's objects as the process ends, so the
    # shutdown does not walk them (benchmarks/RESULTS.md); clanker.cli.main, which a
    # caller may run in a process that goes on, leaves the collector as it was.
    probe = textwrap.dedent("""
        import gc, sys
        from clanker.__main__ import main as script
        from clanker.cli import main as cli

        def frozen_after(run):
            try:
                run()
            except SystemExit:
                pass
            return gc.get_freeze_count()

        sys.argv = ["clanker", "--version"]
        print(frozen_after(lambda: cli(["--version"])), frozen_after(script), file=sys.stderr)
    """)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True, timeout=120)
    by_cli, by_script = map(int, done.stderr.split())
    assert by_cli == 0
    assert by_script > 0
    assert done.stdout.count("clanker") == 2  # both printed their version, whole
