"""The resume a move composes from a provider's rehome declaration: the ordinary
resume of the same session, in the target, with the flags the provider gives."""

from __future__ import annotations

import pytest
from hypothesis import given

from clanker.checkouts.capability import CheckoutRehomeCapability, RehomeStrategy
from clanker.checkouts.rehome import rehome_request
from clanker.launch.request import LaunchOperation, SessionTarget
from clanker.testing.base import PROPERTY
from clanker.testing.strategies import user_flags

TARGET = "/srv/repo-worktrees/feature-0a1b2c3d"
SESSION = SessionTarget(native_id="2bd84788-1866-4763-ad83-f2741628502f")


class TargetOption:
    """A declaration with a target option (as Codex's ``--cd`` would be): the
    person's own option is replaced, everything else kept in order."""

    strategy = RehomeStrategy.AFTER_TURN

    def resume_flags(self, target: str, user_flags: tuple[str, ...]) -> tuple[str, ...]:
        kept: list[str] = []
        skip = False
        for flag in user_flags:
            if skip:
                skip = False
            elif flag == "--cd":
                skip = True
            else:
                kept.append(flag)
        return (*kept, "--cd", target)

    def is_transient_contention(self, output: str) -> bool:
        return False


def test_the_declaration_satisfies_the_protocol() -> None:
    assert isinstance(TargetOption(), CheckoutRehomeCapability)


@PROPERTY
@given(flags=user_flags())
def test_the_request_resumes_the_session_in_the_target(flags: tuple[str, ...]) -> None:
    request = rehome_request(TargetOption(), SESSION, TARGET, flags)
    assert request.operation is LaunchOperation.RESUME
    assert request.session == SESSION
    assert request.cwd == TARGET
    assert request.user_flags == TargetOption().resume_flags(TARGET, flags)


def test_the_persons_target_option_is_replaced() -> None:
    request = rehome_request(TargetOption(), SESSION, TARGET, ("--cd", "/elsewhere", "-m", "x"))
    assert request.user_flags == ("-m", "x", "--cd", TARGET)


@pytest.mark.parametrize("target", ["relative/path", "", "."])
def test_a_relative_target_is_refused(target: str) -> None:
    with pytest.raises(ValueError, match="absolute"):
        rehome_request(TargetOption(), SESSION, target)
