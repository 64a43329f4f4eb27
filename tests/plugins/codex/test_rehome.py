"""Codex's rehome declaration: after the turn, ``resume <id> --cd <target>`` with the
person's own ``-C``/``--cd`` replaced, and exactly the binary's writer-lock
contentions retried (at most 3 attempts, 250 ms apart), a resume proven only after 8 s.
A launch with the bridge and attention is granted the checkout tools (the relayed launch
moves it after its turn: tests/core/bridge/test_after_turn_launch.py). With codex
installed, the retire-then-resume sequence runs against it offline."""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

import clanker_codex
from clanker import hookimpl
from clanker.bridge.isolated import CHECKOUT_NAMES
from clanker.checkouts.capability import (
    NO_RETRY,
    CheckoutRehomeCapability,
    ContentionRetry,
    RehomeStrategy,
    contention_retry_of,
)
from clanker.checkouts.rehome import rehome_request
from clanker.cli import cli
from clanker.launch.planning import plan_launch
from clanker.launch.relayed import hot_replaced, movable
from clanker.launch.request import SessionTarget
from clanker.registry import Registry, override_registry
from clanker.testing.base import PROPERTY
from clanker.testing.strategies import user_flags
from clanker_codex.rehome import CONTENTION_MESSAGES, CodexRehome
from tests.core.bridge.conftest import home  # noqa: F401  (the fixture)
from tests.core.bridge.test_launch import Accepting, fake_bin  # noqa: F401  (the fixture)
from tests.helpers import make_plugin

TARGET = "/srv/my repo-worktrees/feature-0a1b2c3d"
SESSION = "01a22b86-c7d0-79e0-b3c0-03c56f3ce14a"


def test_codex_declares_an_after_turn_move() -> None:
    rehome = CodexRehome()
    assert isinstance(rehome, CheckoutRehomeCapability)
    assert rehome.strategy is RehomeStrategy.AFTER_TURN


@pytest.mark.parametrize("given_flags", [
    ("-C", "/elsewhere"), ("-C=/elsewhere",), ("-C/elsewhere",), ("--cd", "/elsewhere"),
    ("--cd=/elsewhere",), ("-C", "/a", "--cd=/b", "--cd", "/c"), ("-C",), ("--cd",),
])
def test_the_persons_target_option_is_replaced_in_every_spelling(
    given_flags: tuple[str, ...]
) -> None:
    flags = ("-m", "gpt-6", *given_flags, "--search")
    assert CodexRehome().resume_flags(TARGET, flags) == ("-m", "gpt-6", "--search",
                                                          "--cd", TARGET)


def test_flags_after_a_double_dash_are_the_prompt_and_kept() -> None:
    flags = ("-C", "/a", "--", "-C", "/b")
    assert CodexRehome().resume_flags(TARGET, flags) == ("--cd", TARGET, "--", "-C", "/b")


def test_a_lower_case_config_override_is_not_a_target() -> None:
    flags = ("-c", 'model="o3"', "--config", "x=1")
    assert CodexRehome().resume_flags(TARGET, flags) == (*flags, "--cd", TARGET)


@PROPERTY
@given(flags=user_flags(), extra=st.lists(st.sampled_from(
    [("-C", "/x"), ("--cd", "/y"), ("-C=/z",), ("--cd=/w",)]), max_size=3))
def test_the_resume_names_the_target_once_and_keeps_everything_else(
    flags: tuple[str, ...], extra: list[tuple[str, ...]]
) -> None:
    given_flags = tuple(flags) + tuple(f for pair in extra for f in pair)
    resumed = CodexRehome().resume_flags(TARGET, given_flags)
    assert resumed[-2:] == ("--cd", TARGET) or "--" in resumed
    head = resumed[:resumed.index("--")] if "--" in resumed else resumed
    assert [i for i, f in enumerate(head) if f in ("-C", "--cd") or f.startswith(
        ("-C", "--cd="))] == [len(head) - 2]


def test_the_resume_runs_through_codex_resume_with_the_target() -> None:
    provider = Registry.from_plugins({"codex": clanker_codex.plugin},
                                     environ={}).get_provider("codex")
    assert provider.checkout_rehome is not None
    request = rehome_request(provider.checkout_rehome, SessionTarget(native_id=SESSION),
                             TARGET, ("--cd", "/old", "--search"))
    argv = plan_launch(provider, request).argv
    assert argv[argv.index("resume"):] == ("resume", SESSION, "--search", "--cd", TARGET)
    assert request.cwd == TARGET


@pytest.mark.parametrize("output", [
    "Error: failed to acquire thread writer lock",
    "thread 019a-b is already running with a different rollout path /x/rollout.jsonl\n",
    "\x1b[31mfailed to acquire thread writer lock\x1b[0m: busy",
])
def test_the_binarys_writer_lock_contentions_are_transient(output: str) -> None:
    assert CodexRehome().is_transient_contention(output)


@pytest.mark.parametrize("output", [
    "", "No saved session found with ID 01a22b86", "failed to open thread writer lock",
    "failed to remove thread writer lock", "failed to clean up stale thread writer locks",
    "thread writer lock", "already running",
])
def test_nothing_else_is_retried(output: str) -> None:
    assert not CodexRehome().is_transient_contention(output)


def test_exactly_the_spec_strings_are_named() -> None:
    assert CONTENTION_MESSAGES == ("failed to acquire thread writer lock",
                                   "is already running with a different rollout path")


def test_the_retry_is_three_attempts_250_ms_apart() -> None:
    assert contention_retry_of(CodexRehome()) == ContentionRetry(attempts=3, interval=0.25)


def test_a_resume_is_watched_longer_than_codex_takes_to_give_up() -> None:
    from clanker.checkouts.capability import observation_window_of
    from clanker_claude.rehome import ClaudeRehome

    assert observation_window_of(CodexRehome()) == 8.0
    assert observation_window_of(ClaudeRehome()) is None  # clanker's default holds

    class Wrong(CodexRehome):
        observation_window = 0

    with pytest.raises(ValueError, match="observation_window"):
        observation_window_of(Wrong())


def test_a_declaration_without_a_retry_retries_nothing() -> None:
    from clanker_claude.rehome import ClaudeRehome

    assert contention_retry_of(ClaudeRehome()) is NO_RETRY
    assert NO_RETRY.attempts == 1


@pytest.mark.parametrize(("attempts", "interval"), [(0, 0.25), (3, -1.0), (3, 11.0)])
def test_a_retry_out_of_bounds_is_refused(attempts: int, interval: float) -> None:
    with pytest.raises(ValueError, match=r"attempts|interval"):
        ContentionRetry(attempts=attempts, interval=interval)


def after_turn_plugin(rehome: CheckoutRehomeCapability) -> object:
    made = make_plugin()
    type(made).clanker_attention = hookimpl(lambda self: Accepting())  # type: ignore[attr-defined]
    type(made).clanker_checkout_rehome = hookimpl(  # type: ignore[attr-defined]
        lambda self: rehome)
    return made


def launched_capabilities(rehome: CheckoutRehomeCapability, tmp_path: Path) -> list[str]:
    """What an agent whose harness declares ``rehome`` is granted by a bridge launch
    with attention attached (the agent asks ``clanker_context`` itself)."""
    project = tmp_path / "project"
    project.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(project)], check=True)
    registry = Registry.from_plugins({"fake-agent": after_turn_plugin(rehome)}, environ={})
    assert registry.get_provider("fake-agent").checkout_rehome is rehome
    with override_registry(registry):
        result = CliRunner().invoke(cli, ["launch", "fake-agent", "--bridge", "--cwd",
                                          str(project)])
    assert result.exit_code == 0, result.output
    record = json.loads((tmp_path / "record.json").read_text())
    assert record["code"] == 0, record["stderr"]
    return list(json.loads(record["context"])["capabilities"])


@pytest.mark.usefixtures("home", "fake_bin")
def test_an_after_turn_harness_is_granted_the_checkout_tools(tmp_path: Path) -> None:
    rehome = CodexRehome()
    provider = Registry.from_plugins(
        {"fake-agent": after_turn_plugin(rehome)}, environ={}).get_provider("fake-agent")
    assert movable(provider) and not hot_replaced(provider)
    granted = launched_capabilities(rehome, tmp_path)
    assert "clanker_context" in granted
    assert set(CHECKOUT_NAMES) <= set(granted)


# -- the real CLI, when it is installed ---------------------------------------------------

FIXTURE_SESSIONS = (Path(__file__).parents[2] / "fixtures" / "codex" / "sessions"
                    / "codex-home" / "sessions")
FIXTURE_ID = "01a22bbd-9b3a-7f73-ae36-75a8131c0999"


def _end_processes_under(directory: Path) -> None:
    """End what this test's codex left running (its app-server daemon lives in its own
    session under the throwaway ``CODEX_HOME``): only processes whose command names it."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if str(directory).encode() in command:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(entry.name), signal.SIGKILL)


@pytest.mark.real_cli
@pytest.mark.skipif(shutil.which("codex") is None, reason="codex is not installed")
@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="reads /proc")
def test_real_codex_resumes_elsewhere_once_the_first_is_retired(tmp_path: Path) -> None:
    """What an after-turn move does, with the installed codex and clanker's PTY code:
    ``resume <id> --cd A`` proven, retired with its process group, then ``resume <id>
    --cd B`` proven and recorded in B; an unknown id is refused within Codex's declared
    window. A throwaway ``CODEX_HOME`` with the fixture rollouts and a provider at a
    refused loopback port: no account, no model call (run it in ``cli-sandbox``)."""
    from clanker.checkouts.capability import observation_window_of
    from clanker.launch.replacement import (
        Proof,
        ReplacementRefused,
        Why,
        retire_group,
        start_proven,
    )
    from clanker.registry import get_registry

    codex_home = tmp_path / "codex-home"
    shutil.copytree(FIXTURE_SESSIONS, codex_home / "sessions")
    (codex_home / "config.toml").write_text(
        'model_provider = "probe"\n[model_providers.probe]\nname = "probe"\n'
        'base_url = "http://127.0.0.1:9/v1"\nenv_key = "PROBE_KEY"\nwire_api = "responses"\n')
    places = {name: tmp_path / "w" / f"target-{name}" for name in ("a", "b", "elsewhere")}
    for place in places.values():
        place.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CODEX_", "OPENAI_", "CLANKER_"))}
    env.update(CODEX_HOME=str(codex_home), PROBE_KEY="dummy-not-a-key",
               TERM="xterm-256color")
    rehome = CodexRehome()
    window = observation_window_of(rehome)
    assert window is not None
    proof = Proof(first_output_within=60.0, survives=window)
    provider = get_registry().get_provider("codex")

    def resume(session: str, where: Path) -> tuple[list[str], dict[str, str]]:
        plan = plan_launch(provider, rehome_request(rehome, SessionTarget(native_id=session),
                                                    str(where)))
        return list(plan.argv), dict(plan.env)

    try:
        argv, extra = resume(FIXTURE_ID, places["a"])
        assert argv[-2:] == ["--cd", str(places["a"])]
        first, held = start_proven(tuple(argv), {**env, **extra}, str(places["elsewhere"]),
                                   (45, 160), proof)
        assert b"target-a" in held  # it names the target (its header, its window title)
        assert retire_group(first) != 0  # retired, its whole group proven gone
        argv, extra = resume(FIXTURE_ID, places["b"])
        second, held = start_proven(tuple(argv), {**env, **extra}, str(places["elsewhere"]),
                                    (45, 160), proof)
        screen = held
        while select.select([second.master], [], [], 2.0)[0]:  # the rest of the screen
            chunk = second.read()
            if not chunk:
                break
            screen += chunk
        retire_group(second)
        assert b"target-b" in screen and b"target-a" not in screen
        rollout = next((codex_home / "sessions").rglob(f"*{FIXTURE_ID}.jsonl"))
        recorded = re.findall(r'"cwd":"([^"]+)"', rollout.read_text())
        assert recorded[-1] == str(places["b"])  # the move took effect
        argv, extra = resume("00000000-0000-4000-8000-000000000000", places["b"])
        with pytest.raises(ReplacementRefused) as refused:
            start_proven(tuple(argv), {**env, **extra}, str(places["elsewhere"]),
                         (45, 160), proof)
        assert refused.value.why is Why.EXITED
        assert "No saved session found" in refused.value.output
    finally:
        _end_processes_under(codex_home)
