"""The contract every harness plugin's test suite runs.

Subclass :class:`HarnessProviderContract` in a plugin's tests, set the class
attributes and override the methods that supply what only the plugin knows (a
store layout, captured outputs, sample hook payloads); the tests themselves live
here. Tests of a capability the plugin does not implement are skipped, and so are
tests whose fixtures the plugin does not supply::

    import clanker_zed
    from clanker.capabilities import Capability
    from clanker.testing import HarnessProviderContract

    class TestZedContract(HarnessProviderContract):
        plugin = clanker_zed.plugin
        harness_id = "zed"
        capabilities = frozenset({Capability.LAUNCH})
        valid_session_ids = ("01a22b67-715d-7c93-9673-72980ac5d741",)

One part per capability, each usable alone: :class:`LaunchContract`,
:class:`ModelsContract`, :class:`UsageContract` (here),
:class:`~clanker.testing.sessions.SessionsContract`,
:class:`~clanker.testing.attending.AttentionContract`,
:class:`~clanker.testing.commit.CommitContract`,
:class:`~clanker.testing.bridging.BridgingContract` and
:class:`~clanker.testing.rehome.RehomeContract`. ``docs/hooks.md`` lists what
each one asks a plugin to supply.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable, Coroutine, Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any, ClassVar, TypeVar, cast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clanker.capabilities import Capability
from clanker.descriptor import SessionOperation, Transport
from clanker.environment.local import LocalFiles, host_environ
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import CommandExecutor, CommandRequest, CommandResult, SessionExecutor
from clanker.launch.capability import LaunchCapability
from clanker.launch.planning import InvalidSessionIdError, plan_launch
from clanker.launch.request import LaunchOperation, LaunchRequest, SessionTarget
from clanker.models.capability import ModelsCapability, ModelsContext
from clanker.models.types import Model
from clanker.registry import HarnessProvider
from clanker.testing.attending import AttentionContract
from clanker.testing.base import PROPERTY, ContractBase, contains_run
from clanker.testing.bridging import BridgingContract
from clanker.testing.commit import CommitContract
from clanker.testing.doubles import (
    FailingExecutor,
    ScriptedExecutor,
    ScriptedSession,
    ScriptedSessionExecutor,
    probe_usage,
)
from clanker.testing.message_stream import MessageStreamContract
from clanker.testing.rehome import RehomeContract
from clanker.testing.sessions import SessionsContract
from clanker.testing.strategies import (
    documents_with_values_replaced,
    json_values,
    junk_text,
    model_ids,
    prefixes,
    user_flags,
)
from clanker.usage.capability import UsageCapability, UsageContext
from clanker.usage.policy import RefreshPolicy
from clanker.usage.types import UsageSnapshot

__all__ = [
    "HarnessProviderContract",
    "LaunchContract",
    "ModelsContract",
    "UsageContract",
    "contains_run",
]

_CWD = "/tmp/clanker-contract"
_Context = TypeVar("_Context", ModelsContext, UsageContext)


class LaunchContract(ContractBase):
    """Launch: exact argv, opaque user flags, typed refusals, the installed version."""

    valid_session_ids: ClassVar[tuple[str, ...]] = ()
    """Session ids of this harness's syntax, for resume and fork."""
    invalid_session_ids: ClassVar[tuple[str, ...]] = (
        "",
        " ",
        "../../etc/passwd",
        "id with spaces",
        "--help",
        "-x",
        "\x1b[2J",
        "a\nb",
    )
    """Strings that are no session id of this harness (extend the tuple, keep these)."""
    version_args: ClassVar[Sequence[str]] = ("--version",)
    """The arguments of the version probe, exactly."""
    version_outputs: ClassVar[Sequence[tuple[CommandResult, str]]] = ()
    """Results of the version probe (captured, or as documented) and the version each
    gives."""

    def _launch(self) -> tuple[HarnessProvider, LaunchCapability]:
        provider = self._require(Capability.LAUNCH)
        assert provider.launch is not None
        return provider, provider.launch

    def _operations(self, provider: HarnessProvider) -> list[LaunchOperation]:
        ops = [LaunchOperation.FRESH]
        for op in (LaunchOperation.RESUME, LaunchOperation.FORK):
            support = provider.descriptor.operation(SessionOperation(op.value))
            if support is not None and Transport.LOCAL in support.transports:
                ops.append(op)
        return ops

    def _request(self, operation: LaunchOperation, **fields: Any) -> LaunchRequest:
        session = None
        if operation is not LaunchOperation.FRESH:
            if not self.valid_session_ids:
                pytest.fail("set valid_session_ids to test resume/fork")
            session = SessionTarget(native_id=self.valid_session_ids[0])
        return LaunchRequest(operation=operation, session=session, cwd=_CWD, **fields)

    def test_fresh_launch_starts_with_the_executable(self) -> None:
        provider, _ = self._launch()
        plan = plan_launch(provider, self._request(LaunchOperation.FRESH))
        assert plan.argv[0] == provider.descriptor.executable

    @PROPERTY
    @given(flags=user_flags(), model=st.none() | model_ids(), data=st.data())
    def test_user_flags_stay_verbatim_contiguous_and_in_order(
        self, flags: tuple[str, ...], model: str | None, data: st.DataObject
    ) -> None:
        provider, _ = self._launch()
        operation = data.draw(st.sampled_from(self._operations(provider)))
        plan = plan_launch(provider, self._request(operation, model=model, user_flags=flags))
        assert contains_run(plan.argv[1:], flags)

    @PROPERTY
    @given(model=model_ids())
    def test_the_model_reaches_the_argv_and_only_when_asked(self, model: str) -> None:
        provider, _ = self._launch()
        with_model = plan_launch(provider, self._request(LaunchOperation.FRESH, model=model))
        without = plan_launch(provider, self._request(LaunchOperation.FRESH))
        # Counted, not just looked for: a generated id may equal a word the command
        # always has (its executable, a subcommand), which asking must still add to.
        def hits(argv: tuple[str, ...]) -> int:
            return sum(arg == model or arg.endswith("=" + model) for arg in argv)

        assert hits(with_model.argv) > hits(without.argv)

    def test_undeclared_operations_are_typed_unsupported(self) -> None:
        provider, _ = self._launch()
        for op in (LaunchOperation.RESUME, LaunchOperation.FORK):
            support = provider.descriptor.operation(SessionOperation(op.value))
            for transport in Transport:
                if support is not None and transport in support.transports:
                    continue
                request = LaunchRequest(
                    operation=op, transport=transport, cwd=_CWD,
                    session=SessionTarget(native_id=(self.valid_session_ids or ("x",))[0]),
                )
                with pytest.raises(HarnessCapabilityError) as caught:
                    plan_launch(provider, request)
                assert caught.value.kind is ErrorKind.UNSUPPORTED

    def test_resume_and_fork_name_the_session(self) -> None:
        provider, _ = self._launch()
        for op in self._operations(provider)[1:]:
            for session_id in self.valid_session_ids:
                request = LaunchRequest(
                    operation=op, cwd=_CWD, session=SessionTarget(native_id=session_id)
                )
                plan = plan_launch(provider, request)
                assert any(session_id in arg for arg in plan.argv[1:])

    def test_an_operation_declared_over_ssh_builds_the_same_command_there(self) -> None:
        provider, _ = self._launch()
        for op in self._operations(provider):
            if op is not LaunchOperation.FRESH:
                support = provider.descriptor.operation(SessionOperation(op.value))
                if support is None or Transport.SSH not in support.transports:
                    continue
            local = plan_launch(provider, self._request(op))
            assert plan_launch(provider, self._request(op, transport=Transport.SSH)).argv == (
                local.argv), op

    def test_malformed_session_ids_are_refused_before_anything_runs(self) -> None:
        provider, _ = self._launch()
        operations = self._operations(provider)[1:]
        if not operations:
            pytest.skip(f"{self.harness_id} has neither resume nor fork")
        for raw in self.invalid_session_ids:
            with pytest.raises((InvalidSessionIdError, ValueError)):
                plan_launch(provider, LaunchRequest(
                    operation=operations[0], cwd=_CWD, session=SessionTarget(native_id=raw)
                ))

    def test_no_inherited_credential_reaches_the_plan(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        provider, _ = self._launch()
        secret = "clanker-contract-secret-0123456789abcdef"
        monkeypatch.setenv("CLANKER_ATTENTION_TOKEN", secret)
        monkeypatch.setenv("CLANKER_MCP_TOKEN", secret)
        for op in self._operations(provider):
            plan = plan_launch(provider, self._request(op, model="m", user_flags=("--x",)))
            assert not any(secret in arg for arg in plan.argv)
            assert not any(secret in value for value in plan.env.values())

    def test_version_request_runs_the_executable_bounded(self) -> None:
        provider, launch = self._launch()
        request = launch.version_request()
        assert isinstance(request, CommandRequest)
        assert request.argv == (provider.descriptor.executable, *self.version_args)
        assert request.timeout <= 30.0
        assert request.stdin is None

    def test_each_version_output_gives_its_version(self) -> None:
        _, launch = self._launch()
        outputs = self._unless(self.version_outputs or None, "version_outputs")
        for result, version in outputs:
            assert launch.parse_version(result) == version, result

    @PROPERTY
    @given(stdout=junk_text(), stderr=junk_text(), exit_code=st.integers(-15, 255))
    def test_version_parsing_fails_typed_never_crashes(
        self, stdout: str, stderr: str, exit_code: int
    ) -> None:
        _, launch = self._launch()
        try:
            version = launch.parse_version(CommandResult(stdout, stderr, exit_code))
        except HarnessCapabilityError as exc:
            assert exc.kind in (ErrorKind.PARSE_FAILURE, ErrorKind.COMMAND_FAILED)
        else:
            assert version.strip() and "\n" not in version

    def test_empty_version_output_is_a_parse_failure(self) -> None:
        _, launch = self._launch()
        with pytest.raises(HarnessCapabilityError):
            launch.parse_version(CommandResult("", "", 0))


def _check_failure_stays_typed(
    kind: ErrorKind, context_type: Callable[..., _Context],
    run: Callable[[_Context], Coroutine[Any, Any, object]],
) -> None:
    """``run`` on a host whose every command fails with ``kind`` raises that very kind."""
    failing = FailingExecutor(HarnessCapabilityError(kind))
    context = context_type(files=LocalFiles(), environ=host_environ(os.environ),
                           executor=failing, session_executor=failing)
    with pytest.raises(HarnessCapabilityError) as caught:
        asyncio.run(run(context))
    assert caught.value.kind is kind


def _answering(
    output: str, exit_code: int, stderr: str = ""
) -> tuple[CommandExecutor, SessionExecutor]:
    """Both execution forms, answering every request with ``output`` (and ``stderr``)."""
    return (ScriptedExecutor.returning(output, stderr, exit_code=exit_code),
            ScriptedSessionExecutor(lambda _: ScriptedSession(
                output.splitlines(), exit_code=exit_code, stderr=stderr)))


class ModelsContract(ContractBase):
    """Models: a sane policy, typed failures, never a crash on what a listing prints."""

    def _models(self) -> ModelsCapability:
        return cast(ModelsCapability, self._implementation(Capability.MODELS))

    models_environ: ClassVar[Mapping[str, str]] = {}
    """The host environment the listing tests run with (where the harness's own
    interpreter is, say); empty by default."""

    def models_executor(self, exit_code: int) -> CommandExecutor | None:
        """A double of the harness answering its listing command as captured, exiting
        with ``exit_code``; ``None`` (the default) skips the tests that need one."""
        return None

    def models_session_executor(self, exit_code: int) -> SessionExecutor | None:
        """For a listing that holds a session with the harness (a control protocol, an
        app server): a double answering it as captured, then exiting with
        ``exit_code``; ``None`` (the default): the listing runs one command
        (:meth:`models_executor`), and the session tests skip."""
        return None

    def _listed(self, exit_code: int) -> tuple[Model, ...]:
        models = self._models()
        sessions = self.models_session_executor(exit_code)
        if sessions is None:
            executor = self._unless(
                self.models_executor(exit_code), "models_executor (or models_session_executor)"
            )
        else:
            # A listing over a session runs no one-shot command: one that did fails here.
            executor = FailingExecutor(HarnessCapabilityError(ErrorKind.BINARY_UNAVAILABLE))
        context = ModelsContext(files=LocalFiles(), environ=self.models_environ,
                                executor=executor, session_executor=sessions)
        try:
            return asyncio.run(models.discover(context))
        finally:
            if isinstance(sessions, ScriptedSessionExecutor):
                assert all(session.disposed for session in sessions.sessions)

    def test_a_captured_listing_lists_models(self) -> None:
        listed = self._listed(0)
        assert listed and all(isinstance(m, Model) for m in listed)

    def test_a_failed_exit_with_a_captured_listing_is_still_a_failure(self) -> None:
        with pytest.raises(HarnessCapabilityError) as caught:
            self._listed(1)
        assert caught.value.kind is ErrorKind.COMMAND_FAILED
        assert caught.value.harness == self.harness_id

    def test_a_listing_holding_a_session_is_unsupported_without_a_session_executor(
        self,
    ) -> None:
        models = self._models()
        self._unless(self.models_session_executor(0), "models_session_executor")
        failing = FailingExecutor(HarnessCapabilityError(ErrorKind.TIMEOUT))
        context = ModelsContext(files=LocalFiles(), environ=self.models_environ,
                                executor=failing, session_executor=None)
        with pytest.raises(HarnessCapabilityError) as caught:
            asyncio.run(models.discover(context))
        assert caught.value.kind is ErrorKind.UNSUPPORTED

    def test_model_policy_is_sane(self) -> None:
        models = self._models()
        assert models.cache_ttl > 0
        assert all(isinstance(m, Model) for m in models.fallback)
        ids = [m.id for m in models.fallback]
        assert len(ids) == len(set(ids))

    @pytest.mark.parametrize("kind", [ErrorKind.BINARY_UNAVAILABLE, ErrorKind.TIMEOUT])
    def test_execution_failures_stay_typed(self, kind: ErrorKind) -> None:
        _check_failure_stays_typed(kind, ModelsContext, self._models().discover)

    @PROPERTY
    @given(output=junk_text(), exit_code=st.integers(0, 2))
    def test_garbage_listing_output_fails_typed_never_crashes(
        self, output: str, exit_code: int
    ) -> None:
        models = self._models()
        executor, sessions = _answering(output, exit_code)
        context = ModelsContext(files=LocalFiles(),
                                environ=host_environ(os.environ), executor=executor,
                                session_executor=sessions)
        try:
            listed = asyncio.run(models.discover(context))
        except HarnessCapabilityError:
            return
        assert all(isinstance(m, Model) for m in listed)


def _json_documents(text: str) -> tuple[list[object], list[str | int]]:
    """The JSON documents in ``text`` (the whole, or one a line) and a template that
    puts them back: a line that is no JSON stays as it was, an index stands for a
    document."""
    try:
        return [json.loads(text)], [0]
    except ValueError:
        pass
    documents: list[object] = []
    template: list[str | int] = []
    for line in text.split("\n"):
        try:
            documents.append(json.loads(line))
        except ValueError:
            template.append(line)
        else:
            template.append(len(documents) - 1)
    return documents, template


def _with_documents(template: Sequence[str | int], documents: Sequence[object]) -> str:
    return "\n".join(part if isinstance(part, str) else json.dumps(documents[part])
                     for part in template)


class UsageContract(ContractBase):
    """Usage: a policy with a backoff, typed failures, never a crash on what a probe reads.

    Supply :attr:`usage_outputs` (what the harness printed, captured) and, when the
    probe runs more than one command, :meth:`usage_doubles`.
    """

    usage_policy: ClassVar[tuple[float, float, float] | None] = None
    """The refresh policy the harness's spec sets, in seconds: cache TTL, hard minimum
    interval between probes, failure backoff."""
    usage_fixtures: ClassVar[Path | None] = None
    """The directory of the captured outputs, when :attr:`usage_outputs` names them."""
    usage_outputs: ClassVar[Sequence[Path | str]] = ()
    """Captured outputs of the probe's command (a reading, signed out, ...; a path, or a
    name in :attr:`usage_fixtures`): the contract cuts them short, adds junk and
    replaces their values, and checks every answer is a snapshot or a typed failure."""

    def usage_doubles(
        self, output: str, exit_code: int, stderr: str
    ) -> tuple[CommandExecutor, SessionExecutor | None]:
        """Doubles of the harness that answer the probe with ``output`` on stdout,
        ``stderr`` and ``exit_code``; by default both execution forms answer any request
        so. Override when the probe first asks something else (a version, say)."""
        return _answering(output, exit_code, stderr)

    def usage_process_double(self, directory: Path, behaviour: str) -> CommandExecutor | None:
        """A real transport (``LocalTransport``) whose harness executable, written into
        ``directory``, is a double speaking the probe's captured protocol, for probes that
        hold a session with the harness; ``None`` (the default): the plugin has none, and
        the tests that need one skip. ``behaviour``: ``signed-out`` replays a signed-out
        capture; ``eof-before-answer`` exits 0 without answering the usage request;
        ``failed-exit`` answers, then exits non-zero; ``flood`` prints large frames
        forever; ``garbage`` answers with a line that is not JSON; ``silent`` never
        answers."""
        return None

    def usage_with_timeout(self, seconds: float) -> UsageCapability | None:
        """The plugin's usage capability with its probe bounded to ``seconds`` (for the
        double that never answers); ``None`` (the default): the test skips."""
        return None

    @pytest.mark.parametrize(("behaviour", "kind"), [
        ("signed-out", ErrorKind.UNAUTHENTICATED),
        ("eof-before-answer", ErrorKind.COMMAND_FAILED),
        ("failed-exit", ErrorKind.COMMAND_FAILED),
        ("flood", ErrorKind.OUTPUT_LIMIT),
        ("garbage", ErrorKind.PARSE_FAILURE),
    ])
    def test_usage_through_a_misbehaving_process_fails_typed(
        self, tmp_path: Path, behaviour: str, kind: ErrorKind
    ) -> None:
        usage = self._usage()
        transport = self._unless(self.usage_process_double(tmp_path, behaviour),
                                 "usage_process_double")
        with pytest.raises(HarnessCapabilityError) as caught:
            probe_usage(usage, transport, transport)
        assert caught.value.kind is kind

    def test_usage_through_a_process_that_never_answers_times_out(self, tmp_path: Path) -> None:
        self._usage()
        transport = self._unless(self.usage_process_double(tmp_path, "silent"),
                                 "usage_process_double")
        usage = self._unless(self.usage_with_timeout(1.5), "usage_with_timeout")
        with pytest.raises(HarnessCapabilityError) as caught:
            probe_usage(usage, transport, transport)
        assert caught.value.kind is ErrorKind.TIMEOUT

    def test_a_probe_holding_a_session_is_unsupported_without_a_session_executor(
        self, tmp_path: Path
    ) -> None:
        usage = self._usage()
        self._unless(self.usage_process_double(tmp_path, "silent"), "usage_process_double")
        failing = FailingExecutor(HarnessCapabilityError(ErrorKind.TIMEOUT))
        context = UsageContext(files=LocalFiles(), environ={}, executor=failing,
                               session_executor=None)
        with pytest.raises(HarnessCapabilityError) as caught:
            asyncio.run(usage.probe(context))
        assert caught.value.kind is ErrorKind.UNSUPPORTED

    def _usage(self) -> UsageCapability:
        return cast(UsageCapability, self._implementation(Capability.USAGE))

    def _probe(
        self, output: str, exit_code: int = 0, stderr: str = ""
    ) -> UsageSnapshot | None:
        """The snapshot the probe reads from ``output``, or ``None`` for a typed failure."""
        usage = self._usage()
        executor, sessions = self.usage_doubles(output, exit_code, stderr)
        context = UsageContext(files=LocalFiles(), environ=host_environ(os.environ),
                               executor=executor, session_executor=sessions)
        try:
            snapshot = asyncio.run(usage.probe(context))
        except HarnessCapabilityError:
            return None
        assert isinstance(snapshot, UsageSnapshot)
        return snapshot

    def _outputs(self) -> list[str]:
        self._usage()
        names = self._unless(self.usage_outputs or None, "usage_outputs")
        paths = [name if isinstance(name, Path) else (self.usage_fixtures or Path()) / name
                 for name in names]
        return [path.read_text() for path in paths]

    def test_usage_policy_keeps_a_failure_backoff(self) -> None:
        policy = self._usage().policy
        assert isinstance(policy, RefreshPolicy)
        assert policy.failure_backoff > timedelta(0)
        assert policy.cache_ttl > timedelta(0)
        if self.usage_policy is not None:
            assert (policy.cache_ttl, policy.minimum_interval, policy.failure_backoff) == tuple(
                timedelta(seconds=s) for s in self.usage_policy)

    @pytest.mark.parametrize("kind", [ErrorKind.BINARY_UNAVAILABLE, ErrorKind.TIMEOUT,
                                      ErrorKind.OUTPUT_LIMIT, ErrorKind.TRANSPORT_FAILURE])
    def test_usage_execution_failures_stay_typed(self, kind: ErrorKind) -> None:
        _check_failure_stays_typed(kind, UsageContext, self._usage().probe)

    @PROPERTY
    @given(output=junk_text() | json_values().map(json.dumps), stderr=junk_text(),
           exit_code=st.integers(-15, 255))
    def test_garbage_usage_output_fails_typed_never_crashes(
        self, output: str, stderr: str, exit_code: int
    ) -> None:
        self._probe(output, exit_code)
        self._probe(output, exit_code, stderr)

    @PROPERTY
    @given(data=st.data(), exit_code=st.sampled_from([0, 1, 2]))
    def test_truncated_usage_output_fails_typed_never_crashes(
        self, data: st.DataObject, exit_code: int
    ) -> None:
        cut = data.draw(prefixes(self._outputs()))
        self._probe(cut, exit_code)
        self._probe("", exit_code or 2, cut)  # what a failed run printed on stderr

    @PROPERTY
    @given(data=st.data(), junk=junk_text())
    def test_usage_output_with_junk_after_it_fails_typed_never_crashes(
        self, data: st.DataObject, junk: str
    ) -> None:
        self._probe(data.draw(st.sampled_from(self._outputs())) + junk)

    @PROPERTY
    @given(data=st.data())
    def test_usage_output_with_any_value_replaced_fails_typed_never_crashes(
        self, data: st.DataObject
    ) -> None:
        shapes = [_json_documents(text) for text in self._outputs()]
        documents, template = data.draw(st.sampled_from(
            self._unless([s for s in shapes if s[0]] or None, "usage output holding JSON")))
        replaced: Any = data.draw(documents_with_values_replaced(
            documents, json_values(max_leaves=8, floats=st.floats())))
        self._probe(_with_documents(template, replaced))


class HarnessProviderContract(
    LaunchContract,
    ModelsContract,
    SessionsContract,
    AttentionContract,
    UsageContract,
    CommitContract,
    MessageStreamContract,
    BridgingContract,
    RehomeContract,
):
    """Behaviour every provider must have, whatever its harness: every part at once."""
