"""The ``clanker`` script (and ``python -m clanker``).

``clanker cmd ...`` goes straight to :mod:`clanker.bridge.cmd`, a
standard-library client: agents call it in loops, and it must start within a
few multiples of a bare interpreter, which importing click alone would not
allow. Everything else is the click group of :mod:`clanker.cli`.

``clanker coder ...`` starts the agent, and writes its ``initialize``, before
the CLI is imported (:mod:`clanker.acp.early`): the CLI then parses the same
arguments and takes that process over, or stops it when the run does not
come to start it.
"""

from __future__ import annotations

import gc
import sys
from typing import Any

__all__ = ["main"]


def main() -> Any:
    """Run ``clanker`` with this process's arguments; the process exits next."""
    try:
        return _run()
    finally:
        # The interpreter's shutdown would run the cyclic collector over every
        # object the imports made: about 13 ms of an 85 ms listing of empty stores
        # (benchmarks/RESULTS.md). Frozen objects are left to the exit; what
        # reference counting frees is still finalized, and atexit still runs.
        gc.freeze()


def _run() -> Any:
    if sys.argv[1:2] == ["cmd"]:
        from clanker.bridge.cmd import main as cmd

        return cmd(sys.argv[2:])
    if sys.argv[1:2] != ["coder"]:
        from clanker.cli import main as cli

        return cli()
    from clanker.acp import early

    try:
        early.start(sys.argv[2:], harness=_start_harness)
        from clanker.cli import main as cli

        return cli()
    finally:
        early.discard()


def _start_harness(harness: str, account: str | None) -> bool:
    """Start ``harness``'s ACP server early, through the library (the registry and
    the launch path build its argv and environment)."""
    import os

    from clanker.api import Clanker

    return Clanker().start_coder_early(harness, cwd=os.getcwd(), account=account)


if __name__ == "__main__":
    sys.exit(main())
