"""clanker plugin for Pi (``pi``, npm ``@mariozechner/pi-coding-agent``).

Verified against pi 0.73.1: see docs/harnesses/pi.md.
"""

from __future__ import annotations

from clanker.plugin import (
    HarnessDescriptor,
    HarnessId,
    OperationSupport,
    Support,
    Transport,
    define_harness,
)

__all__ = ["plugin"]

plugin = define_harness(
    HarnessDescriptor(
        id=HarnessId("pi"),
        display_name="Pi",
        executable="pi",
        # `--session` and `--fork` are native root flags; the spec resumes and
        # forks Pi sessions over SSH as well. Verified locally.
        resume=OperationSupport(Support.NATIVE, {Transport.LOCAL, Transport.SSH}),
        fork=OperationSupport(Support.NATIVE, {Transport.LOCAL, Transport.SSH}),
        install_hint="npm install -g @mariozechner/pi-coding-agent",
        homepage="https://www.npmjs.com/package/@mariozechner/pi-coding-agent",
    ),
    package=__name__,
)
