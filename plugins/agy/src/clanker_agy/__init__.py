"""clanker plugin for the Antigravity CLI (``agy``).

Written from the spec and public material, never run here (agy is not on npm
or PyPI): see docs/harnesses/agy.md.
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
        id=HarnessId("agy"),
        display_name="Antigravity CLI",
        executable="agy",
        # `--conversation=ID` resumes wherever agy keeps the conversation. agy
        # has no fork on the command line (only /fork inside the TUI); as in
        # the spec, a local fork continues the conversation itself, and over
        # SSH there is none.
        resume=OperationSupport(Support.NATIVE, {Transport.LOCAL, Transport.SSH}),
        fork=OperationSupport(Support.EMULATED, {Transport.LOCAL}),
        install_hint="curl -fsSL https://antigravity.google/cli/install.sh | bash",
        homepage="https://antigravity.google",
    ),
    package=__name__,
)
