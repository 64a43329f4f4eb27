"""The one lifecycle for resources a launch acquires (attention, bridge, guidance...).

Steps run in order; each sees the argv and environment so far and may return a
prepared attachment: a complete new argv (so it can insert before a resume
subcommand), environment additions (later steps win), and a disposer.

* A required step that fails rolls back every earlier attachment, in reverse,
  and the original error propagates.
* An optional step that fails is reported by name and phase only and the launch
  proceeds without it, so no optional step can break an ordinary launch.
* Disposal runs in reverse order, is idempotent, never raises, and one failing
  disposer does not stop the others.

Only the disposers are retained, never an attachment's argv or environment:
those may carry a credential and should be collectable once composed. For the
same reason reports never include exception text.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Protocol, runtime_checkable

from attrs import field, frozen

from clanker._logging import get_logger
from clanker.envvars import ENV_NAME_PATTERN

__all__ = [
    "AttachmentStep",
    "Attachments",
    "LaunchState",
    "PreparedAttachment",
    "Report",
    "prepare_attachments",
]

log = get_logger(__name__)

Disposer = Callable[[], None]
Report = Callable[[str, str], None]
"""Called with (step name, phase) when an optional step or a disposer fails."""


def _strings(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(values)


def _freeze(value: Mapping[str, str] | None) -> Mapping[str, str]:
    return MappingProxyType(dict(value or {}))


def _check_env(_: object, __: object, value: Mapping[str, str]) -> None:
    for name, val in value.items():
        if ENV_NAME_PATTERN.fullmatch(name) is None or "\0" in val:
            raise ValueError("attachment env: invalid variable name or value")


@frozen(kw_only=True, hash=False)
class LaunchState:
    """The argv and complete child environment as composed so far."""

    argv: tuple[str, ...] = field(converter=_strings)
    env: Mapping[str, str] = field(converter=_freeze)


@frozen(kw_only=True, hash=False)
class PreparedAttachment:
    """What one step added. ``argv`` replaces the argv it was handed (or keeps it if None)."""

    dispose: Disposer
    argv: tuple[str, ...] | None = field(default=None)
    env: Mapping[str, str] = field(default=None, converter=_freeze, validator=_check_env)
    notice: str | None = None
    """One safe sentence for the person: what this step had to leave out, or a
    step the harness asks of them."""

    @argv.validator
    def _check_argv(self, _: object, value: tuple[str, ...] | None) -> None:
        if value is not None and (
            not isinstance(value, tuple) or not value or any("\0" in a for a in value)
        ):
            raise ValueError("attachment argv: must be a non-empty tuple without NUL")


@runtime_checkable
class AttachmentStep(Protocol):
    """One resource a launch may acquire."""

    name: str
    optional: bool

    def prepare(self, state: LaunchState) -> PreparedAttachment | None:
        """Acquire the resource, or return ``None`` to skip (e.g. the user owns it).

        If this raises, it must first release whatever it acquired itself.
        """
        ...


def _default_report(step: str, phase: str) -> None:
    log.warning("launch attachment %r failed during %s", step, phase)


class Attachments:
    """The composed launch state plus the disposers, released in reverse order."""

    def __init__(
        self,
        state: LaunchState,
        disposers: Sequence[tuple[str, Disposer]],
        skipped: tuple[str, ...],
        report: Report,
        notices: tuple[str, ...] = (),
    ) -> None:
        self.state = state
        self.failed_optional = skipped
        self.notices = notices
        self._disposers = list(disposers)
        self._report = report

    def dispose(self) -> None:
        """Release every attachment, last first. Idempotent; never raises."""
        while self._disposers:
            name, disposer = self._disposers.pop()
            try:
                disposer()
            except Exception:
                _safe_report(self._report, name, "dispose")


def _safe_report(report: Report, name: str, phase: str) -> None:
    try:
        report(name, phase)
    except Exception:  # a broken reporter must not break disposal
        log.debug("attachment reporter failed")


def prepare_attachments(
    base: LaunchState, steps: Sequence[AttachmentStep], *, report: Report = _default_report
) -> Attachments:
    """Run ``steps`` over ``base`` and return the composed state and disposers."""
    state = base
    disposers: list[tuple[str, Disposer]] = []
    skipped: list[str] = []
    notices: list[str] = []
    for step in steps:
        try:
            prepared = step.prepare(state)
            if prepared is None:
                continue
            if not isinstance(prepared, PreparedAttachment):
                raise TypeError(f"step {step.name!r} returned {type(prepared).__name__}")
        except Exception:
            if step.optional:
                _safe_report(report, step.name, "prepare")
                skipped.append(step.name)
                continue
            Attachments(state, disposers, (), report).dispose()
            raise
        disposers.append((step.name, prepared.dispose))
        if prepared.notice:
            notices.append(f"{step.name}: {prepared.notice}")
        state = LaunchState(
            argv=prepared.argv if prepared.argv is not None else state.argv,
            env={**state.env, **prepared.env},
        )
    return Attachments(state, disposers, tuple(skipped), report, tuple(notices))
