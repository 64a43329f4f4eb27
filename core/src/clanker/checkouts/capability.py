"""The checkout re-homing contract: how a provider lets a live conversation
continue in another checkout of the same repository.

The provider declares *when* the move may happen (:class:`RehomeStrategy`) and
*how* its resume is pointed at the target (:meth:`CheckoutRehomeCapability.resume_flags`);
shared code builds the ordinary resume request its launch capability already
answers (:func:`clanker.checkouts.rehome.rehome_request`), started in the
target directory, and never asks which harness it is talking to.
"""

from __future__ import annotations

import enum
import json
from typing import Any, Protocol, runtime_checkable

from attrs import field, frozen

__all__ = ["NO_RETRY", "CheckoutRehomeCapability", "ContentionRetry", "RehomeStrategy",
           "RelocationRequest", "contention_retry_of", "first_output_within_of",
           "observation_window_of",
           "relocation_of"]


class RehomeStrategy(enum.StrEnum):
    """How a harness continues the same conversation in another directory."""

    HOT_REPLACE = "hot-replace"
    """A second process resumes the conversation in the target while the first
    still runs; the first is retired only once the second is proven."""
    AFTER_TURN = "after-turn"
    """The move waits for the current root turn to end, the first process is
    retired, then the conversation is resumed in the target."""


def _positive(instance: object, attribute: object, value: int) -> None:
    if value < 1:
        raise ValueError("attempts: must be at least 1")


def _not_negative(instance: object, attribute: object, value: float) -> None:
    if not 0 <= value <= 10:
        raise ValueError("interval: must be between 0 and 10 seconds")


@frozen(kw_only=True)
class ContentionRetry:
    """How often a resume that failed with a transient contention
    (:meth:`CheckoutRehomeCapability.is_transient_contention`) is tried in all."""

    attempts: int = field(validator=_positive)
    """Attempts in all, the first included (1: never retried)."""
    interval: float = field(validator=_not_negative)
    """Seconds between two attempts."""


NO_RETRY = ContentionRetry(attempts=1, interval=0.0)


def contention_retry_of(rehome: CheckoutRehomeCapability) -> ContentionRetry:
    """The retry ``rehome`` declares in its optional ``contention_retry`` attribute
    (a :class:`ContentionRetry`); :data:`NO_RETRY` when it declares none."""
    declared = getattr(rehome, "contention_retry", NO_RETRY)
    if not isinstance(declared, ContentionRetry):
        raise TypeError("contention_retry: must be a ContentionRetry")
    return declared


def _seconds(rehome: CheckoutRehomeCapability, name: str, most: float) -> float | None:
    declared = getattr(rehome, name, None)
    if declared is None:
        return None
    if isinstance(declared, bool) or not isinstance(declared, int | float) \
            or not 0 < declared <= most:
        raise ValueError(f"{name}: must be seconds between 0 and {most:g}")
    return float(declared)


def observation_window_of(rehome: CheckoutRehomeCapability) -> float | None:
    """How long a resume must keep running after its first output before it counts as
    proven, as ``rehome`` declares in its optional ``observation_window`` attribute
    (seconds, at most 30); ``None`` when it declares none (clanker's default holds).

    A harness whose failed resume takes a while to give up (it draws first, then
    prints its error and exits) declares a window longer than that."""
    return _seconds(rehome, "observation_window", 30)


def first_output_within_of(rehome: CheckoutRehomeCapability) -> float | None:
    """How long a resume may take to print anything at all, as ``rehome`` declares in
    its optional ``first_output_within`` attribute (seconds, at most 60); ``None``
    when it declares none (clanker's default holds). For a harness slow to start."""
    return _seconds(rehome, "first_output_within", 60)


def _argv(instance: object, attribute: object, value: tuple[str, ...]) -> None:
    if not value or not all(isinstance(a, str) and a for a in value):
        raise ValueError("argv: must be non-empty strings, the executable first")


def _path(instance: object, attribute: Any, value: str) -> None:
    if not value.startswith("/") or any(c in value for c in "\r\n "):
        raise ValueError(f"{attribute.name}: must be an absolute request path")


def _body(instance: object, attribute: object, value: str) -> None:
    try:
        json.loads(value)
    except ValueError as error:
        raise ValueError("body: must be JSON text") from error


def _statuses(instance: object, attribute: object, value: frozenset[int]) -> None:
    if not value or not all(200 <= s < 300 for s in value):
        raise ValueError("success: must be 2xx statuses")


@frozen(kw_only=True)
class RelocationRequest:
    """What a harness's native relocation needs: a transient local server that
    clanker starts, asks once and stops (:func:`clanker.checkouts.relocation.relocate`).

    clanker adds the loopback host and a free port (``host_flag 127.0.0.1
    port_flag <port>``) and a fresh random password in ``password_variable``,
    answered with HTTP Basic as ``username``; it waits until ``GET ready_path``
    answers 2xx, sends ``POST path`` with ``body`` (JSON) once, and counts a
    status in ``success`` as moved.
    """

    argv: tuple[str, ...] = field(validator=_argv)
    host_flag: str
    port_flag: str
    password_variable: str
    username: str
    env: tuple[tuple[str, str], ...] = ()
    """Variables the server gets besides the inherited ones (each a pair)."""
    ready_path: str = field(validator=_path)
    path: str = field(validator=_path)
    body: str = field(validator=_body)
    success: frozenset[int] = field(default=frozenset({200, 204}),
                                    validator=_statuses)


def relocation_of(rehome: CheckoutRehomeCapability, native_id: str,
                  target: str) -> RelocationRequest | None:
    """The native relocation of conversation ``native_id`` to ``target`` that
    ``rehome`` declares through its optional ``relocation(native_id, target)``
    method; ``None`` when it declares none (its resume alone runs in the target)."""
    relocation = getattr(rehome, "relocation", None)
    if relocation is None:
        return None
    request = relocation(native_id, target)
    if not isinstance(request, RelocationRequest):
        raise TypeError("relocation: must return a RelocationRequest")
    return request


@runtime_checkable
class CheckoutRehomeCapability(Protocol):
    """What one harness declares so clanker can move its conversation."""

    strategy: RehomeStrategy

    def resume_flags(self, target: str, user_flags: tuple[str, ...]) -> tuple[str, ...]:
        """Return the flags the resume in ``target`` runs with.

        ``target`` is an absolute directory clanker owns (never model input)
        and is always the resume's working directory. A harness whose launch
        directory decides returns ``user_flags`` unchanged; one with a target
        option replaces any the person passed with one naming ``target``.
        """
        ...

    def is_transient_contention(self, output: str) -> bool:
        """Say whether a failed resume's ``output`` is a brief writer-lock
        contention worth retrying (a bounded, provider-named set of messages);
        ``False`` for everything else. How often and how far apart is the
        capability's optional ``contention_retry`` (:func:`contention_retry_of`)."""
        ...
