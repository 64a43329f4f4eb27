"""The contract every harness plugin's test suite runs.

Subclass it in a plugin's tests and set the class attributes; tests of a
capability the plugin does not implement are skipped::

    import clanker_zed
    from clanker.testing import HarnessProviderContract

    class TestZedContract(HarnessProviderContract):
        plugin = clanker_zed
        harness_id = "zed"
        valid_session_ids = ("01a22b67-715d-7c93-9673-72980ac5d741",)
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
from datetime import timedelta
from typing import ClassVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clanker.capabilities import Capability
from clanker.descriptor import SessionOperation, Transport
from clanker.environment.local import LocalFiles, host_environ
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import CommandRequest, CommandResult
from clanker.ids import HarnessId
from clanker.launch.planning import InvalidSessionIdError, plan_launch
from clanker.launch.request import LaunchOperation, LaunchRequest, SessionTarget
from clanker.models.capability import ModelsContext
from clanker.models.types import Model
from clanker.registry import HarnessProvider, Registry
from clanker.testing.doubles import (
    FailingExecutor,
    ScriptedExecutor,
    ScriptedSession,
    ScriptedSessionExecutor,
)
from clanker.testing.strategies import json_values, junk_text, model_ids, user_flags
from clanker.usage.capability import UsageContext
from clanker.usage.policy import RefreshPolicy
from clanker.usage.types import UsageSnapshot

__all__ = ["HarnessProviderContract"]

# Each plugin's subclass runs these property tests on its own instance;
# hypothesis would otherwise flag the shared test functions as run by
# differing executors when several contract suites share a session.
_PROPERTY = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.differing_executors],
)
_CWD = "/tmp/clanker-contract"


def _contains_run(haystack: tuple[str, ...], needle: tuple[str, ...]) -> bool:
    """Say whether ``needle`` occurs in ``haystack`` contiguously, in order."""
    if not needle:
        return True
    width = len(needle)
    return any(haystack[i : i + width] == needle for i in range(len(haystack) - width + 1))


class HarnessProviderContract:
    """Behaviour every provider must have, whatever its harness."""

    plugin: ClassVar[object]
    harness_id: ClassVar[str]
    valid_session_ids: ClassVar[tuple[str, ...]] = ()
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

    # -- helpers ---------------------------------------------------------------

    @classmethod
    @functools.cache
    def _registry(cls) -> Registry:
        return Registry.from_plugins({cls.harness_id: cls.plugin}, environ={})

    def provider(self) -> HarnessProvider:
        registry = self._registry()
        assert not registry.problems, registry.problems
        return registry.get_provider(HarnessId(self.harness_id))

    def _require(self, capability: Capability) -> HarnessProvider:
        provider = self.provider()
        if provider.capability(capability) is None:
            pytest.skip(f"{self.harness_id} has no {capability.value} capability")
        return provider

    def _operations(self, provider: HarnessProvider) -> list[LaunchOperation]:
        ops = [LaunchOperation.FRESH]
        for op in (LaunchOperation.RESUME, LaunchOperation.FORK):
            support = provider.descriptor.operation(SessionOperation(op.value))
            if support is not None and Transport.LOCAL in support.transports:
                ops.append(op)
        return ops

    def _request(self, operation: LaunchOperation, **fields: object) -> LaunchRequest:
        session = None
        if operation is not LaunchOperation.FRESH:
            if not self.valid_session_ids:
                pytest.fail("set valid_session_ids to test resume/fork")
            session = SessionTarget(native_id=self.valid_session_ids[0])
        return LaunchRequest(operation=operation, session=session, cwd=_CWD, **fields)  # type: ignore[arg-type]

    # -- registration ------------------------------------------------------------

    def test_registers_without_problems(self) -> None:
        registry = self._registry()
        assert registry.problems == ()
        assert registry.ids() == (self.harness_id,)

    def test_descriptor_names_this_harness(self) -> None:
        descriptor = self.provider().descriptor
        assert descriptor.id == self.harness_id
        assert descriptor.display_name.strip()

    # -- launch ----------------------------------------------------------------------

    def test_fresh_launch_starts_with_the_executable(self) -> None:
        provider = self._require(Capability.LAUNCH)
        plan = plan_launch(provider, self._request(LaunchOperation.FRESH))
        assert plan.argv[0] == provider.descriptor.executable

    @_PROPERTY
    @given(flags=user_flags(), model=st.none() | model_ids(), data=st.data())
    def test_user_flags_stay_verbatim_contiguous_and_in_order(
        self, flags: tuple[str, ...], model: str | None, data: st.DataObject
    ) -> None:
        provider = self._require(Capability.LAUNCH)
        operation = data.draw(st.sampled_from(self._operations(provider)))
        plan = plan_launch(provider, self._request(operation, model=model, user_flags=flags))
        assert _contains_run(plan.argv[1:], flags)

    @_PROPERTY
    @given(model=model_ids())
    def test_the_model_reaches_the_argv_and_only_when_asked(self, model: str) -> None:
        provider = self._require(Capability.LAUNCH)
        with_model = plan_launch(provider, self._request(LaunchOperation.FRESH, model=model))
        without = plan_launch(provider, self._request(LaunchOperation.FRESH))
        assert any(arg == model or arg.endswith("=" + model) for arg in with_model.argv)
        assert not any(arg == model or arg.endswith("=" + model) for arg in without.argv)

    def test_undeclared_operations_are_typed_unsupported(self) -> None:
        provider = self._require(Capability.LAUNCH)
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
        provider = self._require(Capability.LAUNCH)
        for op in self._operations(provider)[1:]:
            for session_id in self.valid_session_ids:
                request = LaunchRequest(
                    operation=op, cwd=_CWD, session=SessionTarget(native_id=session_id)
                )
                plan = plan_launch(provider, request)
                assert any(session_id in arg for arg in plan.argv[1:])

    def test_malformed_session_ids_are_refused_before_anything_runs(self) -> None:
        provider = self._require(Capability.LAUNCH)
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
        provider = self._require(Capability.LAUNCH)
        secret = "clanker-contract-secret-0123456789abcdef"
        monkeypatch.setenv("CLANKER_ATTENTION_TOKEN", secret)
        monkeypatch.setenv("CLANKER_MCP_TOKEN", secret)
        for op in self._operations(provider):
            plan = plan_launch(provider, self._request(op, model="m", user_flags=("--x",)))
            assert not any(secret in arg for arg in plan.argv)
            assert not any(secret in value for value in plan.env.values())

    def test_version_request_runs_the_executable_bounded(self) -> None:
        provider = self._require(Capability.LAUNCH)
        assert provider.launch is not None
        request = provider.launch.version_request()
        assert isinstance(request, CommandRequest)
        assert request.command == provider.descriptor.executable
        assert request.stdin is None

    @_PROPERTY
    @given(stdout=junk_text(), stderr=junk_text(), exit_code=st.integers(-15, 255))
    def test_version_parsing_fails_typed_never_crashes(
        self, stdout: str, stderr: str, exit_code: int
    ) -> None:
        provider = self._require(Capability.LAUNCH)
        assert provider.launch is not None
        try:
            version = provider.launch.parse_version(CommandResult(stdout, stderr, exit_code))
        except HarnessCapabilityError as exc:
            assert exc.kind in (ErrorKind.PARSE_FAILURE, ErrorKind.COMMAND_FAILED)
        else:
            assert version.strip() and "\n" not in version

    def test_empty_version_output_is_a_parse_failure(self) -> None:
        provider = self._require(Capability.LAUNCH)
        assert provider.launch is not None
        with pytest.raises(HarnessCapabilityError):
            provider.launch.parse_version(CommandResult("", "", 0))

    # -- commit ------------------------------------------------------------------------

    @_PROPERTY
    @given(model=st.none() | model_ids(), prompt=st.text(max_size=200))
    def test_commit_invocations_are_bounded_inference_with_the_prompt_on_stdin(
        self, model: str | None, prompt: str
    ) -> None:
        provider = self._require(Capability.COMMIT)
        assert provider.commit is not None
        request = provider.commit.build_invocation(model, prompt)
        assert request.command == provider.descriptor.executable
        assert request.inference
        assert request.stdin is not None
        # The prompt rides on stdin as text, or inside a JSON message (escaped).
        forms = {prompt, prompt.strip(), json.dumps(prompt)[1:-1],
                 json.dumps(prompt, ensure_ascii=False)[1:-1]}
        assert any(form.encode() in request.stdin for form in forms)
        if model is not None:
            assert any(model == arg or arg.endswith("=" + model) for arg in request.args)

    @_PROPERTY
    @given(stdout=junk_text(), stderr=junk_text(), exit_code=st.integers(-15, 255))
    def test_commit_output_parsing_fails_typed_never_crashes(
        self, stdout: str, stderr: str, exit_code: int
    ) -> None:
        provider = self._require(Capability.COMMIT)
        assert provider.commit is not None
        try:
            answer = provider.commit.parse_output(CommandResult(stdout, stderr, exit_code))
        except HarnessCapabilityError:
            return
        assert isinstance(answer, str)

    # -- usage -------------------------------------------------------------------------

    def test_usage_policy_keeps_a_failure_backoff(self) -> None:
        provider = self._require(Capability.USAGE)
        assert provider.usage is not None
        policy = provider.usage.policy
        assert isinstance(policy, RefreshPolicy)
        assert policy.failure_backoff > timedelta(0)
        assert policy.cache_ttl > timedelta(0)

    @pytest.mark.parametrize("kind", [ErrorKind.BINARY_UNAVAILABLE, ErrorKind.TIMEOUT])
    def test_usage_execution_failures_stay_typed(self, kind: ErrorKind) -> None:
        provider = self._require(Capability.USAGE)
        assert provider.usage is not None
        failing = FailingExecutor(HarnessCapabilityError(kind))
        context = UsageContext(files=LocalFiles(),
                               environ=host_environ(os.environ), executor=failing,
                               session_executor=failing)
        with pytest.raises(HarnessCapabilityError) as caught:
            asyncio.run(provider.usage.probe(context))
        assert caught.value.kind is kind

    @_PROPERTY
    @given(output=junk_text() | json_values().map(json.dumps), exit_code=st.integers(0, 2))
    def test_garbage_usage_output_fails_typed_never_crashes(
        self, output: str, exit_code: int
    ) -> None:
        provider = self._require(Capability.USAGE)
        assert provider.usage is not None
        executor = ScriptedExecutor.returning(output, exit_code=exit_code)
        sessions = ScriptedSessionExecutor(
            lambda _: ScriptedSession(output.splitlines(), exit_code=exit_code)
        )
        context = UsageContext(files=LocalFiles(),
                               environ=host_environ(os.environ), executor=executor,
                               session_executor=sessions)
        try:
            snapshot = asyncio.run(provider.usage.probe(context))
        except HarnessCapabilityError:
            return
        assert isinstance(snapshot, UsageSnapshot)

    # -- models ------------------------------------------------------------------------

    def test_model_policy_is_sane(self) -> None:
        provider = self._require(Capability.MODELS)
        models = provider.models
        assert models is not None
        assert models.cache_ttl > 0
        assert all(isinstance(m, Model) for m in models.fallback)
        ids = [m.id for m in models.fallback]
        assert len(ids) == len(set(ids))

    @pytest.mark.parametrize("kind", [ErrorKind.BINARY_UNAVAILABLE, ErrorKind.TIMEOUT])
    def test_execution_failures_stay_typed(self, kind: ErrorKind) -> None:
        provider = self._require(Capability.MODELS)
        assert provider.models is not None
        failing = FailingExecutor(HarnessCapabilityError(kind))
        context = ModelsContext(files=LocalFiles(),
                                environ=host_environ(os.environ), executor=failing,
                                session_executor=failing)
        with pytest.raises(HarnessCapabilityError) as caught:
            asyncio.run(provider.models.discover(context))
        assert caught.value.kind is kind

    @_PROPERTY
    @given(output=junk_text(), exit_code=st.integers(0, 2))
    def test_garbage_listing_output_fails_typed_never_crashes(
        self, output: str, exit_code: int
    ) -> None:
        provider = self._require(Capability.MODELS)
        assert provider.models is not None
        executor = ScriptedExecutor.returning(output, exit_code=exit_code)
        sessions = ScriptedSessionExecutor(
            lambda _: ScriptedSession(output.splitlines(), exit_code=exit_code)
        )
        context = ModelsContext(files=LocalFiles(),
                                environ=host_environ(os.environ), executor=executor,
                                session_executor=sessions)
        try:
            models = asyncio.run(provider.models.discover(context))
        except HarnessCapabilityError:
            return
        assert all(isinstance(m, Model) for m in models)
