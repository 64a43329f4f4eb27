"""The part of a launch capability that is a harness's facts, not its logic.

Every harness checks session ids against one pattern, asks its binary for
``--version`` and reads the version out of one line; only the pattern, the
wording and the binary differ. A provider subclasses :class:`HarnessLaunch`,
states those facts as class attributes and writes ``session_args`` (how its
harness names the session to resume or fork, the one part that is each
harness's own)::

    class ZedLaunch(HarnessLaunch):
        executable = "zed"
        session_id = LOWERCASE_UUID
        session_id_problem = "a Zed session id is a lowercase UUID"
        version = re.compile(r"^zed (\\d+\\.\\d+\\.\\d+)$", re.MULTILINE)

        def session_args(self, request: LaunchRequest, session: SessionTarget) -> list[str]:
            fork = request.operation is LaunchOperation.FORK
            return ["--fork" if fork else "--resume", session.native_id]

The inherited ``build`` lays the command out as ``executable BASE_ARGS
[MODEL_FLAG MODEL] SESSION_ARGS USER_FLAGS``; a harness whose command line
has another shape writes ``build`` itself instead.
"""

from __future__ import annotations

import re
from typing import ClassVar

from clanker.execution import CommandRequest, CommandResult
from clanker.launch.request import LaunchPlan, LaunchRequest, SessionTarget
from clanker.launch.session_ids import checked_session_id
from clanker.launch.version import parse_version_output

__all__ = ["HarnessLaunch"]


class HarnessLaunch:
    """A launch capability's session-id check and version probe, from class attributes."""

    executable: ClassVar[str]
    """The bare command (``--version`` runs it, and the provider's argv starts with it)."""
    session_id: ClassVar[re.Pattern[str]]
    """What all of a resumable session id matches."""
    session_id_problem: ClassVar[str]
    """The message of a refused id (it says what an id looks like)."""
    version: ClassVar[re.Pattern[str]]
    """Group 1 of its first match in ``--version``'s output is the version."""
    version_timeout: ClassVar[float | None] = None
    """Seconds ``--version`` may take, where the default is too short for the harness."""
    version_on_stderr: ClassVar[bool] = False
    """Whether the version may be printed on stderr (stdout is searched first)."""
    base_args: ClassVar[tuple[str, ...]] = ()
    """What the inherited ``build`` puts after the executable on every command line."""
    model_flag: ClassVar[str] = "--model"
    """The option the inherited ``build`` names the model with."""
    model_bound: ClassVar[bool] = False
    """Whether that option and the model are one ``FLAG=MODEL`` token rather than two."""

    def build(self, request: LaunchRequest) -> LaunchPlan:
        """Return ``executable BASE_ARGS [MODEL_FLAG MODEL] SESSION_ARGS USER_FLAGS``
        (``MODEL_FLAG=MODEL`` when ``model_bound``).

        clanker's options come first and the user's flags last, verbatim and in
        order: an unknown or variadic user flag can then only take another user
        token as its value. ``session_args`` is asked only for a resume or fork.
        """
        argv = [self.executable, *self.base_args]
        if request.model is not None and self.model_bound:
            argv.append(f"{self.model_flag}={request.model}")
        elif request.model is not None:
            argv += [self.model_flag, request.model]
        if request.session is not None:
            argv += self.session_args(request, request.session)
        argv += request.user_flags
        return LaunchPlan(argv=tuple(argv))

    def session_args(self, request: LaunchRequest, session: SessionTarget) -> list[str]:
        """Return the arguments that resume or fork ``session`` (``request.operation`` says which).

        Only the inherited ``build`` calls it: a subclass that uses that
        ``build`` writes this method, one that writes its own ``build`` need not.
        """
        raise NotImplementedError(f"{type(self).__name__} names no session arguments")

    def validate_session_id(self, raw: str) -> str:
        return checked_session_id(raw, self.session_id, self.session_id_problem)

    def version_request(self) -> CommandRequest:
        if self.version_timeout is None:
            return CommandRequest(command=self.executable, args=("--version",))
        return CommandRequest(command=self.executable, args=("--version",),
                              timeout=self.version_timeout)

    def parse_version(self, result: CommandResult) -> str:
        return parse_version_output(result, self.version, harness=self.executable,
                                    include_stderr=self.version_on_stderr)
