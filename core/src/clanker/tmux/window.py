"""What a clanker tmux window runs: the hand-off file's launch, in the foreground.

``python -m clanker.tmux.window FILE``. The file is read and deleted first;
the process then takes the launching process's environment (tmux's own
``TMUX`` and ``TMUX_PANE`` kept, so the grid records this pane) and runs the
launch exactly as ``clanker launch`` does, exiting with the harness's status.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

from clanker.errors import EXIT_USAGE

_OWN: tuple[str, ...] = ("TMUX", "TMUX_PANE")


def main(argv: list[str]) -> int:
    from clanker.tmux.handoff import read_handoff

    if len(argv) != 1:
        print("usage: python -m clanker.tmux.window FILE", file=sys.stderr)
        return EXIT_USAGE
    try:
        harness, request, options, environ = read_handoff(Path(argv[0]))
    except (OSError, ValueError) as exc:
        print(f"clanker: {exc}", file=sys.stderr)
        return EXIT_USAGE
    own = {name: os.environ[name] for name in _OWN if name in os.environ}
    os.environ.clear()
    os.environ.update({**environ, **own})
    from clanker.api import Clanker

    try:
        return Clanker().launch(harness, request, options, report=_report, notify=_notice)
    except Exception as exc:
        # The window would close at once and take the reason with it: keep it readable.
        message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
        print(f"clanker: {message}", file=sys.stderr)
        with contextlib.suppress(EOFError, KeyboardInterrupt):
            input("clanker: press Enter to close this window ")
        return int(getattr(exc, "exit_code", 1))


def _notice(notice: str) -> None:
    print(f"clanker: {notice}", file=sys.stderr)


def _report(step: str, phase: str) -> None:
    print(f"clanker: {step} is unavailable for this launch ({phase} failed)", file=sys.stderr)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
