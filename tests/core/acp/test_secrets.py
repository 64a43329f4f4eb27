"""Agent secrets: stored through keyring (a real in-memory backend), named in
clanker's index, refused where there is no credential store, injected into the
agent's environment only and redacted everywhere clanker writes."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import keyring
import pytest
from keyring.backends import fail

from clanker.acp.errors import CoderError, CoderFailure
from clanker.acp.transcript import REDACTED
from clanker.api import Clanker
from clanker.environment.local import LocalEnvironment

from .conftest import FAKE_AGENT, Coder
from .keyrings import MemoryKeyring

SECRET = "sk-test-0123456789abcdef"
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def store() -> Iterator[MemoryKeyring]:
    before = keyring.get_keyring()
    backend = MemoryKeyring()
    keyring.set_keyring(backend)
    yield backend
    keyring.set_keyring(before)


def test_set_list_remove(coder: Coder, store: MemoryKeyring) -> None:
    clanker = coder.clanker
    clanker.set_coder_secret("python3", "FAKE_TOKEN", SECRET)
    clanker.set_coder_secret("python3", "OTHER_KEY", "other-value")
    assert clanker.coder_secrets("python3") == ["FAKE_TOKEN", "OTHER_KEY"]
    assert clanker.coder_secrets("opencode") == []
    assert store.values[("clanker-coder/python3", "FAKE_TOKEN")] == SECRET
    index = (coder.paths.state / "coder-secrets.json").read_text()
    assert SECRET not in index and "FAKE_TOKEN" in index
    assert clanker.remove_coder_secret("python3", "FAKE_TOKEN") is True
    assert clanker.remove_coder_secret("python3", "FAKE_TOKEN") is False
    assert clanker.coder_secrets("python3") == ["OTHER_KEY"]
    assert ("clanker-coder/python3", "FAKE_TOKEN") not in store.values


@pytest.mark.parametrize("name", ["CLANKER_HOME", "clanker_x", "PATH", "PWD", "HOME", "1ABC",
                                  "A-B", "A=B", "", "A B"])
def test_names_that_cannot_be_secrets_are_refused(coder: Coder, store: MemoryKeyring,
                                                  name: str) -> None:
    with pytest.raises(ValueError, match="secret name"):
        coder.clanker.set_coder_secret("python3", name, SECRET)
    assert store.values == {}
    assert coder.clanker.coder_secrets("python3") == []


@pytest.mark.parametrize("agent", ["../x", "a/b", "", "-x"])
def test_agents_that_are_not_names_are_refused(coder: Coder, store: MemoryKeyring,
                                               agent: str) -> None:
    with pytest.raises(ValueError, match="agent"):
        coder.clanker.set_coder_secret(agent, "TOKEN", SECRET)
    assert store.values == {}


def test_a_store_that_refuses_leaves_the_index_as_it_was(coder: Coder,
                                                         store: MemoryKeyring) -> None:
    coder.clanker.set_coder_secret("python3", "KEPT", SECRET)
    store.refuse_set = True
    with pytest.raises(CoderError) as caught:
        coder.clanker.set_coder_secret("python3", "NEW_ONE", "new-value-1")
    assert caught.value.failure is CoderFailure.NO_KEYRING
    assert coder.clanker.coder_secrets("python3") == ["KEPT"]


def test_an_index_another_process_keeps_locked_is_a_timeout_that_changes_nothing(
    coder: Coder, store: MemoryKeyring, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from clanker.acp import secrets
    from clanker.errors import ErrorKind
    from clanker.locking import LockTimeoutError

    coder.clanker.set_coder_secret("python3", "KEPT", SECRET)
    index = coder.clanker._coder_service().secrets.index
    ready = tmp_path / "held"
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from pathlib import Path; from clanker.locking import exclusive\n"
        "with exclusive(Path(sys.argv[1]), timeout=0):\n"
        "    Path(sys.argv[2]).touch(); time.sleep(600)\n"),
        str(index.with_name(index.name + ".lock")), str(ready)])
    try:
        while not ready.exists():
            assert holder.poll() is None, "the process holding the lock ended"
            time.sleep(0.01)
        monkeypatch.setattr(secrets, "_LOCK_WAIT", 0.2)
        with pytest.raises(LockTimeoutError) as caught:
            coder.clanker.set_coder_secret("python3", "NEW_ONE", "new-value-1")
        assert caught.value.kind is ErrorKind.TIMEOUT
    finally:
        holder.kill()
        holder.wait()
    assert coder.clanker.coder_secrets("python3") == ["KEPT"]
    assert list(store.values) == [("clanker-coder/python3", "KEPT")]


def test_without_a_credential_store_it_says_so(coder: Coder) -> None:
    before = keyring.get_keyring()
    keyring.set_keyring(fail.Keyring())
    try:
        with pytest.raises(CoderError) as caught:
            coder.clanker.set_coder_secret("python3", "FAKE_TOKEN", SECRET)
    finally:
        keyring.set_keyring(before)
    assert caught.value.failure is CoderFailure.NO_KEYRING
    assert caught.value.exit_code == 39
    assert "FAKE_TOKEN=... clanker coder" in caught.value.message
    assert coder.clanker.coder_secrets("python3") == []


def test_a_session_gets_its_agents_secret_redacted(coder: Coder, store: MemoryKeyring) -> None:
    coder.clanker.set_coder_secret("python3", "FAKE_TOKEN", SECRET)

    async def run() -> str | None:
        async with coder.session() as client:
            await client.prompt("env FAKE_TOKEN")
            return client.transcript_path

    path = Path(str(asyncio.run(run())))
    assert coder.agent_text() == f"value:{REDACTED}"
    text = path.read_text()
    assert SECRET not in text and REDACTED in text
    log = next((coder.paths.state / "coder").glob("agent-*.log"))
    assert log.read_text() == f"debug: token is {REDACTED}\n"


def test_another_agent_does_not_get_it(coder: Coder, store: MemoryKeyring) -> None:
    coder.clanker.set_coder_secret("opencode", "FAKE_TOKEN", SECRET)

    async def run() -> None:
        async with coder.session() as client:
            await client.prompt("env FAKE_TOKEN")

    asyncio.run(run())
    assert coder.agent_text() == "value:"


def test_a_variable_set_for_the_run_wins(coder: Coder, store: MemoryKeyring) -> None:
    coder.clanker.set_coder_secret("python3", "FAKE_TOKEN", SECRET)
    coder.environ["FAKE_TOKEN"] = "from-the-invocation"
    coder.clanker = Clanker(environment=LocalEnvironment(coder.environ), paths=coder.paths)

    async def run() -> None:
        async with coder.session() as client:
            await client.prompt("env FAKE_TOKEN")

    asyncio.run(run())
    assert coder.agent_text() == "value:from-the-invocation"
    assert store.values[("clanker-coder/python3", "FAKE_TOKEN")] == SECRET


def _cli(tmp_path: Path, coder: Coder, *args: str, stdin: str = ""
         ) -> subprocess.CompletedProcess[str]:
    env = {**coder.environ, "CLANKER_HOME": str(tmp_path / "home"),
           "PYTHON_KEYRING_BACKEND": "tests.core.acp.keyrings.FileKeyring",
           "TEST_KEYRING_FILE": str(tmp_path / "keyring.json"),
           "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "clanker", "coder", *args],
                          cwd=coder.workspace, env=env, input=stdin, capture_output=True,
                          text=True, timeout=120, check=False)


def test_end_to_end_through_the_cli(tmp_path: Path, coder: Coder) -> None:
    stored = _cli(tmp_path, coder, "secret", "set", "python3", "FAKE_TOKEN", stdin=SECRET + "\n")
    assert stored.returncode == 0, stored.stderr
    assert SECRET not in stored.stdout + stored.stderr
    listed = _cli(tmp_path, coder, "secret", "list", "python3", "--json")
    assert json.loads(listed.stdout) == {"agent": "python3", "names": ["FAKE_TOKEN"]}
    run = _cli(tmp_path, coder, "--no-attention", "--agent-command",
               f"python3 {FAKE_AGENT}", "env FAKE_TOKEN")
    assert run.returncode == 0, run.stderr
    assert run.stdout == f"value:{REDACTED}\n"
    transcripts = list((tmp_path / "home" / "state" / "coder").glob("*.jsonl"))
    assert len(transcripts) == 1
    text = transcripts[0].read_text()
    assert SECRET not in text and REDACTED in text
    removed = _cli(tmp_path, coder, "secret", "remove", "python3", "FAKE_TOKEN")
    assert removed.returncode == 0, removed.stderr
    assert json.loads((tmp_path / "keyring.json").read_text()) == {}
    again = _cli(tmp_path, coder, "secret", "remove", "python3", "FAKE_TOKEN")
    assert again.returncode == 2


def test_the_cli_without_a_credential_store(tmp_path: Path, coder: Coder) -> None:
    env_backend = "keyring.backends.fail.Keyring"
    result = subprocess.run(
        [sys.executable, "-m", "clanker", "coder", "secret", "set", "python3", "FAKE_TOKEN"],
        cwd=coder.workspace, input=SECRET + "\n", capture_output=True, text=True, timeout=120,
        check=False, env={**coder.environ, "CLANKER_HOME": str(tmp_path / "home"),
                          "PYTHON_KEYRING_BACKEND": env_backend})
    assert result.returncode == 39
    assert result.stderr.count("\n") == 1
    assert "set the variable for this invocation instead" in result.stderr
    assert SECRET not in result.stderr


def test_a_variable_the_harness_server_sets_cannot_be_a_secret(coder: Coder,
                                                               store: MemoryKeyring) -> None:
    from .test_harness_server import _clanker

    clanker = _clanker(coder)
    with pytest.raises(ValueError, match="the launch path sets"):
        clanker.set_coder_secret("fake-acp", "FAKE_AGENT_TOKEN", SECRET)
    clanker.set_coder_secret("fake-acp", "FAKE_TOKEN", SECRET)

    async def run() -> None:
        async with clanker.coder("fake-acp", cwd=coder.workspace,
                                 on_event=coder.events.append) as client:
            await client.prompt("env FAKE_TOKEN")

    asyncio.run(run())
    assert coder.agent_text() == f"value:{REDACTED}"


def test_a_start_that_needs_the_store_where_there_is_none(coder: Coder,
                                                          store: MemoryKeyring) -> None:
    coder.clanker.set_coder_secret("python3", "FAKE_TOKEN", SECRET)
    keyring.set_keyring(fail.Keyring())  # the fixture puts the previous one back

    async def run() -> None:
        async with coder.session() as client:
            await client.prompt("env FAKE_TOKEN")

    with pytest.raises(CoderError) as caught:
        asyncio.run(run())
    assert caught.value.failure is CoderFailure.NO_KEYRING
    assert "FAKE_TOKEN=... clanker coder" in caught.value.message
    assert list((coder.paths.state / "coder").glob("*.jsonl")) == []
