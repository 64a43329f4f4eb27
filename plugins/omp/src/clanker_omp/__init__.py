"""clanker plugin for Oh My Pi (``omp``, npm ``@oh-my-pi/pi-coding-agent``).

Verified against omp 18.2.3: see docs/harnesses/omp.md.
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
        id=HarnessId("omp"),
        display_name="Oh My Pi",
        executable="omp",
        # `--resume` and `--fork` are native (`--fork` is missing from --help
        # but parsed); the spec resumes and forks OMP sessions over SSH as
        # well. Verified locally.
        resume=OperationSupport(Support.NATIVE, {Transport.LOCAL, Transport.SSH}),
        fork=OperationSupport(Support.NATIVE, {Transport.LOCAL, Transport.SSH}),
        install_hint="npm install -g @oh-my-pi/pi-coding-agent (it runs on bun >= 1.3.14)",
        homepage="https://omp.sh",
    ),
    package=__name__,
)
