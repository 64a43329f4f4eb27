"""The launch attachments coordinator."""

from __future__ import annotations

import gc
import weakref

import pytest
from attrs import define
from hypothesis import given
from hypothesis import strategies as st

from clanker.launch.attachments import LaunchState, PreparedAttachment, prepare_attachments


class StepFailedError(Exception):
    pass


@define
class Step:
    """A test step recording what happens to it."""

    name: str
    optional: bool = False
    outcome: str = "ok"  # ok | skip | raise
    dispose_raises: bool = False
    log: list[str] | None = None

    def prepare(self, state: LaunchState) -> PreparedAttachment | None:
        assert self.log is not None
        self.log.append(f"prepare {self.name}")
        if self.outcome == "raise":
            raise StepFailedError(f"secret-token-in-{self.name}")
        if self.outcome == "skip":
            return None

        def dispose() -> None:
            assert self.log is not None
            self.log.append(f"dispose {self.name}")
            if self.dispose_raises:
                raise StepFailedError("dispose failed")

        return PreparedAttachment(
            argv=(*state.argv, f"--{self.name}"),
            env={"SHARED": self.name, f"ONLY_{self.name.upper()}": "1"},
            dispose=dispose,
        )


BASE = LaunchState(argv=("agent", "resume", "abc"), env={"PATH": "/bin", "SHARED": "base"})


def test_steps_compose_in_order_and_later_env_wins() -> None:
    log: list[str] = []
    result = prepare_attachments(BASE, [Step("a", log=log), Step("b", log=log)])
    assert result.state.argv == ("agent", "resume", "abc", "--a", "--b")
    assert result.state.env["SHARED"] == "b"
    assert result.state.env["ONLY_A"] == "1"
    assert result.state.env["PATH"] == "/bin"
    result.dispose()
    assert log == ["prepare a", "prepare b", "dispose b", "dispose a"]


def test_a_step_can_rewrite_argv_before_a_subcommand() -> None:
    class Insert:
        name, optional = "insert", False

        def prepare(self, state: LaunchState) -> PreparedAttachment:
            return PreparedAttachment(
                argv=(state.argv[0], "-c", "x=1", *state.argv[1:]), dispose=lambda: None
            )

    assert prepare_attachments(BASE, [Insert()]).state.argv == (
        "agent", "-c", "x=1", "resume", "abc"
    )


def test_required_failure_rolls_back_in_reverse_and_raises_the_original() -> None:
    log: list[str] = []
    steps = [Step("a", log=log), Step("b", log=log), Step("c", log=log, outcome="raise"),
             Step("d", log=log)]
    with pytest.raises(StepFailedError, match="secret-token-in-c"):
        prepare_attachments(BASE, steps)
    assert log == ["prepare a", "prepare b", "prepare c", "dispose b", "dispose a"]


def test_optional_failure_is_reported_by_name_only_and_the_launch_proceeds(
    caplog: pytest.LogCaptureFixture,
) -> None:
    log: list[str] = []
    result = prepare_attachments(
        BASE, [Step("attention", optional=True, outcome="raise", log=log), Step("b", log=log)]
    )
    assert result.failed_optional == ("attention",)
    assert result.state.argv[-1] == "--b"
    assert "attention" in caplog.text
    assert "secret-token" not in caplog.text


def test_dispose_continues_past_failures_never_raises_and_is_idempotent() -> None:
    log: list[str] = []
    reports: list[tuple[str, str]] = []
    result = prepare_attachments(
        BASE,
        [Step("a", log=log), Step("b", log=log, dispose_raises=True), Step("c", log=log)],
        report=lambda name, phase: reports.append((name, phase)),
    )
    result.dispose()
    result.dispose()
    assert log[-3:] == ["dispose c", "dispose b", "dispose a"]
    assert log.count("dispose a") == 1
    assert reports == [("b", "dispose")]


def test_a_broken_reporter_cannot_break_disposal() -> None:
    log: list[str] = []

    def bad_report(name: str, phase: str) -> None:
        raise RuntimeError("reporter broke")

    result = prepare_attachments(
        BASE, [Step("a", log=log), Step("b", log=log, dispose_raises=True)], report=bad_report
    )
    result.dispose()
    assert log[-2:] == ["dispose b", "dispose a"]


def test_a_step_returning_the_wrong_type_is_a_failure() -> None:
    class Wrong:
        name, optional = "wrong", True

        def prepare(self, state: LaunchState) -> object:
            return {"argv": []}

    assert prepare_attachments(BASE, [Wrong()]).failed_optional == ("wrong",)  # type: ignore[list-item]


step_specs = st.lists(
    st.tuples(st.booleans(), st.sampled_from(["ok", "skip", "raise"]), st.booleans()),
    max_size=8,
)


@given(specs=step_specs)
def test_every_acquired_attachment_is_released_exactly_once_in_reverse(
    specs: list[tuple[bool, str, bool]],
) -> None:
    log: list[str] = []
    steps = [
        Step(f"s{i}", optional=opt, outcome=outcome, dispose_raises=bad, log=log)
        for i, (opt, outcome, bad) in enumerate(specs)
    ]
    first_required_failure = next(
        (i for i, s in enumerate(steps) if s.outcome == "raise" and not s.optional), None
    )
    acquired = [
        s.name
        for s in steps[: first_required_failure]
        if s.outcome == "ok"
    ]
    if first_required_failure is not None:
        with pytest.raises(StepFailedError):
            prepare_attachments(BASE, steps, report=lambda *_: None)
    else:
        result = prepare_attachments(BASE, steps, report=lambda *_: None)
        assert result.state.argv == (*BASE.argv, *(f"--{n}" for n in acquired))
        result.dispose()
        result.dispose()
    disposed = [entry.split()[1] for entry in log if entry.startswith("dispose")]
    assert disposed == list(reversed(acquired))


def test_composed_state_is_collectable_after_the_launch() -> None:
    class Holder:
        name, optional = "holder", False

        def prepare(self, state: LaunchState) -> PreparedAttachment:
            return PreparedAttachment(env={"X": "1"}, dispose=lambda: None)

    result = prepare_attachments(BASE, [Holder()])
    state_ref = weakref.ref(result.state)
    result.state = None  # type: ignore[assignment]
    gc.collect()
    assert state_ref() is None
