"""The resume that continues a conversation in another checkout, composed from
what the provider's rehome capability declares."""

from __future__ import annotations

import os

from clanker.checkouts.capability import CheckoutRehomeCapability
from clanker.launch.request import LaunchOperation, LaunchRequest, SessionTarget

__all__ = ["rehome_request"]


def rehome_request(
    rehome: CheckoutRehomeCapability, session: SessionTarget, target: str,
    user_flags: tuple[str, ...] = (),
) -> LaunchRequest:
    """The launch request that resumes ``session`` in ``target`` (absolute)."""
    if not os.path.isabs(target):
        raise ValueError("target: must be an absolute path")
    return LaunchRequest(operation=LaunchOperation.RESUME, session=session,
                         user_flags=rehome.resume_flags(target, tuple(user_flags)), cwd=target)
