"""The typed failures a commit parser raises, with its harness named once."""

from __future__ import annotations

from attrs import frozen

from clanker.errors import ErrorKind, HarnessCapabilityError

__all__ = ["CommitFailures", "http_status"]


@frozen
class CommitFailures:
    """One harness's commit failures: ``fail`` of any kind, ``parse`` for output that
    is not an answer (``parse-failure``)."""

    harness: str

    def fail(self, kind: ErrorKind, detail: str) -> HarnessCapabilityError:
        return HarnessCapabilityError(kind, detail, harness=self.harness)

    def parse(self, detail: str) -> HarnessCapabilityError:
        return self.fail(ErrorKind.PARSE_FAILURE, detail)


def http_status(value: object) -> int | None:
    """``value`` when it is an HTTP status code (an int from 100 to 599), else ``None``.

    A status is the one part of a provider's failure that is safe to show: its
    message and body are the provider's text and can quote the request.
    """
    if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599:
        return value
    return None
