"""clanker plugin for OpenCode (``opencode``, npm ``opencode-ai``).

Verified against opencode-ai 1.18.33: see docs/harnesses/opencode.md.
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
        id=HarnessId("opencode"),
        display_name="OpenCode",
        executable="opencode",
        # `-s ID` and `-s ID --fork` are native and read opencode's own store on
        # the host it runs on; the spec resumes and forks over SSH as well.
        # Verified locally.
        resume=OperationSupport(Support.NATIVE, {Transport.LOCAL, Transport.SSH}),
        fork=OperationSupport(Support.NATIVE, {Transport.LOCAL, Transport.SSH}),
        install_hint="npm install -g opencode-ai",
        homepage="https://opencode.ai",
    ),
    package=__name__,
)
