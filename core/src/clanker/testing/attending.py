"""The attention part of the provider contract.

:class:`AttentionContract` checks an attention capability the way the launch and
the hook bridge use it: ``prepare`` over a real launch's argv and environment,
whatever the user's flags, and a hook interpreter loaded by path as the bridge
loads it (:func:`~clanker.testing.attention.load_interpreter`), whose every answer
must keep the bridge's contract
(:func:`~clanker.testing.attention.check_interpretation`) and forward no text a
person typed or a tool printed.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar, Final, cast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clanker.attachment import AttachmentContext, Declined
from clanker.attention.capability import AttachmentPlan, AttentionCapability
from clanker.attention.hook import MAX_STATE
from clanker.capabilities import Capability
from clanker.environment.local import LocalFiles
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import CommandRequest, CommandResult
from clanker.launch.planning import plan_launch
from clanker.launch.request import LaunchRequest
from clanker.testing.attention import check_interpretation, load_interpreter
from clanker.testing.base import PROPERTY, ContractBase, contains_run
from clanker.testing.strategies import documents_with_values_replaced, json_values, user_flags

__all__ = ["PRIVATE_MARKER", "AttentionContract", "run_interpreter"]

PRIVATE_MARKER: Final = "clanker-contract-private-text-5d1e"
"""What :class:`AttentionContract` puts in place of a payload's private values; it
must never reach an envelope or the state."""

_TOKEN: Final = "ab" * 32

Interpret = Callable[[object, dict[str, object]], tuple[object, object]]

# Run in a child under `python -I -S`, as the hook bridge runs: the interpreter sees the
# standard library alone. It answers every payload on stdin (one JSON list) from fresh state.
_STANDALONE = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("interpreter", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
answers = [module.interpret(payload, {}) for payload in json.load(sys.stdin)]
json.dump(answers, sys.stdout)
"""


def run_interpreter(
    interpret: Callable[..., object], payloads: Iterable[object],
    state: dict[str, Any] | None = None, *, max_state: int = MAX_STATE,
) -> tuple[list[list[dict[str, Any]]], dict[str, Any]]:
    """Feed ``payloads`` to ``interpret(payload, state)`` in order, threading the state as
    the hook bridge does, each answer checked by
    :func:`~clanker.testing.attention.check_interpretation`: the envelopes of every
    answer, and the last state."""
    state = {} if state is None else state
    batches: list[list[dict[str, Any]]] = []
    for payload in payloads:
        answer = interpret(copy.deepcopy(payload), state)
        assert isinstance(answer, tuple) and len(answer) == 2
        envelopes, state = check_interpretation(answer, max_state=max_state)
        batches.append(envelopes)
    return batches, state


def _refuse(request: CommandRequest) -> CommandResult:
    raise HarnessCapabilityError(ErrorKind.BINARY_UNAVAILABLE,
                                 f"the contract runs no {request.command}")


def _replace_keys(value: object, keys: frozenset[str]) -> object:
    """``value`` with the value of every key in ``keys``, at any depth, the marker."""
    if isinstance(value, dict):
        return {k: PRIVATE_MARKER if k in keys else _replace_keys(v, keys)
                for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_keys(item, keys) for item in value]
    return value


class AttentionContract(ContractBase):
    """Attention: ``prepare`` answers a plan or a reason to decline for any user flags and keeps
    them in order; a hook interpreter runs on the standard library alone, never
    raises, keeps a bounded state and never forwards private text.

    A plugin supplies :meth:`attention_payloads` (what its harness hands a hook, for
    an interpreter), :attr:`attention_private_texts` and
    :attr:`attention_private_keys` (what must never be forwarded) and, where its
    ``prepare`` needs more than a home directory, :meth:`attention_environ`.
    """

    attention_by_hook_command: ClassVar[bool | None] = None
    """Whether the harness reports through hook commands and an interpreter (``True``)
    or from inside its own process, a plugin or extension (``False``)."""
    attention_resume_keeps_the_id: ClassVar[bool | None] = None
    """What ``resume_preserves_session_id`` must be, as verified against the harness."""
    attention_max_state: ClassVar[int] = MAX_STATE
    """The bound on the interpreter's state, as JSON (at most the bridge's own)."""
    attention_private_texts: ClassVar[Sequence[str]] = ()
    """Texts in :meth:`attention_payloads` that no envelope and no state may hold
    (prompts, commands, tool output, file names)."""
    attention_private_keys: ClassVar[Sequence[str]] = ()
    """Payload keys whose values, at any depth, are what a person typed or a tool
    printed: the contract replaces them by :data:`PRIVATE_MARKER` and looks for it."""

    attention_payload_shapes: ClassVar[st.SearchStrategy[object] | None] = None
    """Payloads near the harness's shape (its event names, its ids), besides the samples,
    the samples with values replaced, and any JSON."""
    attention_state_shapes: ClassVar[st.SearchStrategy[object] | None] = None
    """States near the interpreter's own shape, besides any JSON object."""

    # -- what a plugin supplies ----------------------------------------------------------

    def attention_payloads(self) -> Sequence[object]:
        """What the harness hands its hook (as the interpreter receives it), captured or
        built from the harness's schema, in the order of a real run."""
        return ()

    def attention_environ(self, home: Path) -> dict[str, str]:
        """The launch environment ``prepare`` sees besides clanker's own
        ``CLANKER_ATTENTION_*`` variables: by default ``HOME`` (an empty directory)."""
        return {"HOME": str(home)}

    # -- helpers ---------------------------------------------------------------------------

    def _attention(self) -> AttentionCapability:
        return cast(AttentionCapability, self._implementation(Capability.ATTENTION))

    def _interpreter(self) -> ModuleType:
        path = self._attention().interpreter
        if path is None:
            pytest.skip(f"{self.harness_id} reports from inside the harness (no interpreter)")
        return load_interpreter(path)

    def _interpret(self) -> Interpret:
        return cast(Interpret, self._interpreter().interpret)

    def _attention_samples(self) -> list[object]:
        self._interpreter()
        return list(self._unless(list(self.attention_payloads()) or None,
                                 "attention_payloads"))

    def _run(self, payloads: Iterable[object]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Feed ``payloads`` in order, threading the state as the bridge does; every
        envelope, and the last state."""
        batches, state = run_interpreter(self._interpret(), payloads,
                                         max_state=self.attention_max_state)
        return [envelope for batch in batches for envelope in batch], state

    def _states(self) -> st.SearchStrategy[object]:
        states: st.SearchStrategy[object] = st.dictionaries(
            st.text(max_size=8), json_values(), max_size=6)
        extra = self.attention_state_shapes
        return states if extra is None else states | extra

    def _payloads(self, samples: Sequence[object]) -> st.SearchStrategy[object]:
        payloads = st.sampled_from(samples) | json_values(max_leaves=20)
        replaceable = [p for p in samples if isinstance(p, dict | list) and p]
        if replaceable:
            payloads |= st.sampled_from(replaceable).flatmap(documents_with_values_replaced)
        extra = self.attention_payload_shapes
        return payloads if extra is None else payloads | extra

    def _check_private(self, envelopes: object, state: object) -> None:
        text = json.dumps(envelopes) + json.dumps(state)
        for private in (PRIVATE_MARKER, *self.attention_private_texts):
            assert private not in text, f"{private!r} was forwarded"

    # -- the capability --------------------------------------------------------------------

    def test_attention_is_wired(self) -> None:
        attention = self._attention()
        assert isinstance(attention.resume_preserves_session_id, bool)
        if self.attention_resume_keeps_the_id is not None:
            assert attention.resume_preserves_session_id is self.attention_resume_keeps_the_id
        if self.attention_by_hook_command is not None:
            assert (attention.interpreter is not None) is self.attention_by_hook_command
        if attention.interpreter is not None:
            assert attention.interpreter.is_absolute() and attention.interpreter.is_file()
            assert callable(load_interpreter(attention.interpreter).interpret)

    @PROPERTY
    @given(flags=user_flags())
    def test_prepare_answers_a_plan_or_a_reason_for_any_user_flags(
        self, flags: tuple[str, ...]
    ) -> None:
        attention = self._attention()
        provider = self._require(Capability.LAUNCH)
        with tempfile.TemporaryDirectory() as raw:
            base = Path(raw)
            (base / "home").mkdir()
            (base / "work").mkdir()
            private = base / "launch"
            private.mkdir(mode=0o700)
            (private / "state").mkdir(mode=0o700)
            hook = private / "hook"
            hook.write_text("#!/bin/sh\nexit 0\n")
            hook.chmod(0o700)
            launch = plan_launch(provider, LaunchRequest(cwd=str(base / "work"),
                                                         user_flags=flags))
            env = {**launch.env, **self.attention_environ(base / "home"),
                   "CLANKER_ATTENTION_COMMAND": str(hook),
                   "CLANKER_ATTENTION_SOCKET": str(base / "grid.sock"),
                   "CLANKER_ATTENTION_TERMINAL": "t-contract",
                   "CLANKER_ATTENTION_TOKEN": _TOKEN,
                   "CLANKER_ATTENTION_STATE": str(private / "state")}
            if attention.interpreter is not None:
                env["CLANKER_ATTENTION_INTERPRETER"] = str(attention.interpreter)
            plan = attention.prepare(AttachmentContext(
                argv=launch.argv, env=env, cwd=str(base / "work"), private_dir=private,
                user_flags=flags, files=LocalFiles(), run=_refuse))
            if isinstance(plan, Declined):
                assert plan.reason.strip() and "\n" not in plan.reason
                assert _TOKEN not in plan.reason, "a credential in the reason"
                return
            assert isinstance(plan, AttachmentPlan)
            assert all(isinstance(k, str) and isinstance(v, str) for k, v in plan.env.items())
            if plan.argv is not None:
                assert plan.argv[0] == launch.argv[0]
                assert contains_run(plan.argv[1:], flags)
                assert not any(_TOKEN in arg for arg in plan.argv), "a credential in argv"

    # -- the interpreter -------------------------------------------------------------------

    def test_the_interpreter_runs_on_the_standard_library_alone(self) -> None:
        samples = self._attention_samples()
        path = self._attention().interpreter
        assert path is not None
        done = subprocess.run([sys.executable, "-I", "-S", "-c", _STANDALONE, str(path)],
                              input=json.dumps(samples), capture_output=True, text=True,
                              check=True, timeout=60)
        interpret = self._interpret()
        alone = [[e["event"] for e in envelopes] for envelopes, _ in json.loads(done.stdout)]
        assert alone == [[e["event"] for e in check_interpretation(
            interpret(copy.deepcopy(payload), {}), max_state=self.attention_max_state)[0]]
            for payload in samples]

    def test_a_captured_run_keeps_the_contract_and_forwards_nothing_private(self) -> None:
        samples = self._attention_samples()
        keys = frozenset(self.attention_private_keys)
        for payloads in (samples, [_replace_keys(p, keys) for p in samples]):
            envelopes, state = self._run(payloads)
            self._check_private(envelopes, state)
            for payload in payloads:  # each alone, from fresh state
                self._check_private(*self._run([payload]))

    @PROPERTY
    @given(data=st.data())
    def test_any_payload_and_state_never_raise(self, data: st.DataObject) -> None:
        payload = data.draw(self._payloads(self._attention_samples()))
        state = data.draw(self._states())
        check_interpretation(self._interpret()(payload, cast(dict[str, object], state)),
                             max_state=self.attention_max_state)

    @PROPERTY
    @given(data=st.data())
    def test_any_sequence_keeps_a_small_valid_state_and_nothing_private(
        self, data: st.DataObject
    ) -> None:
        samples = self._attention_samples()
        keys = frozenset(self.attention_private_keys)
        sequence = data.draw(st.lists(self._payloads(samples), max_size=30))
        envelopes, state = self._run(_replace_keys(p, keys) for p in sequence)
        # Only the marker: drawn text may be an id, and ids are forwarded.
        assert PRIVATE_MARKER not in json.dumps(envelopes) + json.dumps(state)
