"""Starting a command's process, with the standard library alone.

Two callers start processes this one way: the execution layer's ``spawn``
(:mod:`clanker.execution.process`, which then watches the process on asyncio)
and ``clanker coder``'s early start (:mod:`clanker.acp.early`), which runs
before asyncio, attrs or click are imported. So this module imports none of
them; it lives outside :mod:`clanker.execution`, whose package imports attrs.

What is shared: the child's environment (inherited clanker credentials
stripped, ``PWD`` set as a shell would), the lookup on the child's ``PATH``,
the reaper's command line (Linux), and the start itself: a new session, piped
output, the reaper's report pipe.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import Final

from clanker.envvars import strip_credentials

__all__ = ["GRACE_SECONDS", "child_env", "compose_env", "find_executable", "reaper_prefix",
           "start", "write_first"]

GRACE_SECONDS: Final = 1.0
"""How long a stopped command's tree gets between SIGTERM and SIGKILL."""


def compose_env(base: Mapping[str, str], additions: Mapping[str, str]) -> dict[str, str]:
    """Return the child environment: ``base`` without credentials, then ``additions``."""
    env = strip_credentials(base)
    env.update(additions)
    return env


def child_env(base: Mapping[str, str], additions: Mapping[str, str],
              cwd: str | None) -> dict[str, str]:
    """:func:`compose_env`, and ``PWD`` set to ``cwd`` unless ``additions`` set it: as
    a shell would (Node and Bun CLIs take ``$PWD``, not ``getcwd()``, as their directory)."""
    env = compose_env(base, additions)
    if cwd is not None and "PWD" not in additions:
        env["PWD"] = cwd
    return env


def find_executable(command: str, env: Mapping[str, str]) -> str | None:
    """``command`` found on the child's ``PATH``, or ``None``."""
    import shutil  # deferred: the early start pays for it only once it has a command

    return shutil.which(command, path=env.get("PATH", os.defpath))


@functools.cache
def reaper_prefix() -> tuple[str, ...] | None:
    """The argv that starts the reaper (``execution/_reaper.py``), or ``None`` where
    it cannot run."""
    if not sys.platform.startswith("linux"):
        return None
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "execution",
                          "_reaper.py")
    python = sys.executable
    if not python or not os.access(python, os.X_OK) or not os.path.isfile(script):
        return None
    # Isolated and without site: nothing in the harness's environment (PYTHONPATH,
    # a sitecustomize) can change what runs between clanker and the command.
    return (python, "-I", "-S", script)


def start(argv: Sequence[str], env: Mapping[str, str], cwd: str | None, *,
          stdin_pipe: bool) -> tuple[subprocess.Popen[bytes], int]:
    """Start ``argv`` (its executable already resolved) with piped output, in a new
    session, under the reaper where it runs.

    Returns the process and the read end of the reaper's report pipe (``-1``
    without a reaper; the caller reads and closes it). Raises :class:`OSError`
    when it cannot be started."""
    prefix = reaper_prefix()
    report_read = report_write = -1
    command = list(argv)
    if prefix is not None:
        report_read, report_write = os.pipe()
        command = [*prefix, str(report_write), str(os.getpid()), repr(GRACE_SECONDS), *command]
    try:
        process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE if stdin_pipe else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=env,
            start_new_session=True,
            pass_fds=(report_write,) if report_write >= 0 else (),
        )
    except BaseException:
        if report_read >= 0:
            os.close(report_read)
        raise
    finally:
        if report_write >= 0:
            os.close(report_write)
    return process, report_read


def write_first(process: subprocess.Popen[bytes], data: bytes) -> float | None:
    """Write ``data`` to the process's stdin pipe at once (before anything reads it:
    the pipe holds it while the command starts). Returns the wall time it was
    written, or ``None`` when it could not be (the command already closed its
    input; whoever writes next finds out)."""
    import time

    assert process.stdin is not None
    fd = process.stdin.fileno()
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view):]
    except OSError:
        return None
    return time.time()
