"""From a launch request to the exact command, through the provider that owns it.

This is the canonical boundary that enforces operation and transport support,
so no caller can ask a provider for something its descriptor does not declare.
"""

from __future__ import annotations

from attrs import evolve

from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.launch.request import LaunchPlan, LaunchRequest
from clanker.registry import HarnessProvider

__all__ = ["InvalidSessionIdError", "plan_launch"]


class InvalidSessionIdError(ValueError):
    """A session id that does not have the harness's id syntax."""


def plan_launch(provider: HarnessProvider, request: LaunchRequest) -> LaunchPlan:
    """Return the provider's command for ``request``.

    Raises ``unsupported`` when the harness cannot launch, resume or fork (over
    that transport), and :class:`InvalidSessionIdError` for a malformed id.
    """
    harness = provider.id
    launch = provider.launch
    if launch is None:
        raise HarnessCapabilityError(ErrorKind.UNSUPPORTED, "launch", harness=harness)
    operation = request.operation.session_operation
    if operation is not None:
        support = provider.descriptor.operation(operation)
        if support is None:
            raise HarnessCapabilityError(ErrorKind.UNSUPPORTED, operation.value, harness=harness)
        if request.transport not in support.transports:
            raise HarnessCapabilityError(
                ErrorKind.UNSUPPORTED,
                f"{operation.value} over {request.transport.value}",
                harness=harness,
            )
        assert request.session is not None
        try:
            native_id = launch.validate_session_id(request.session.native_id)
        except ValueError as exc:
            raise InvalidSessionIdError(f"{harness}: {exc}") from exc
        # The provider may normalize the id (case, say); build with its form.
        request = evolve(request, session=evolve(request.session, native_id=native_id))
    plan = launch.build(request)
    if plan.argv[0] != provider.descriptor.executable:
        # A provider bug, caught before anything runs.
        raise HarnessCapabilityError(
            ErrorKind.COMMAND_FAILED, "launch plan names another executable", harness=harness
        )
    return plan
