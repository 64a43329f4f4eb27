"""The transport-neutral description of one bounded command, and its result.

Providers build :class:`CommandRequest` values; an environment decides where and
how they run. Everything is validated here, once, for every transport.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Final

from attrs import field, frozen

from clanker.envvars import ENV_NAME_PATTERN, is_credential_variable
from clanker.errors import ErrorKind, HarnessCapabilityError

__all__ = [
    "ATTENDED_TIMEOUT",
    "DEFAULT_MAX_OUTPUT",
    "DEFAULT_TIMEOUT",
    "INFERENCE_TIMEOUT",
    "MAX_OUTPUT",
    "MAX_SESSION_INPUT",
    "MAX_STDIN",
    "MAX_TIMEOUT",
    "CommandRequest",
    "CommandResult",
]

DEFAULT_TIMEOUT: Final = 10.0
MAX_TIMEOUT: Final = 30.0
INFERENCE_TIMEOUT: Final = 90.0
ATTENDED_TIMEOUT: Final = 300.0
"""The ceiling of a command that waits for the person (a sign-in in their browser)."""
DEFAULT_MAX_OUTPUT: Final = 256 * 1024
MAX_OUTPUT: Final = 1024 * 1024
MAX_SESSION_INPUT: Final = 64 * 1024
MAX_STDIN: Final = 1024 * 1024

# A bare command name: never a path, never an option, nothing a shell would read.
_COMMAND: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,127}")


def _strings(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(values)


def _check_command(_: object, __: object, value: str) -> None:
    if not isinstance(value, str) or _COMMAND.fullmatch(value) is None:
        raise ValueError("command: must be a bare executable name, not a path")


def _check_args(_: object, __: object, value: tuple[str, ...]) -> None:
    for index, arg in enumerate(value):
        if not isinstance(arg, str):
            raise TypeError(f"args[{index}]: must be a string")
        if "\0" in arg:
            raise ValueError(f"args[{index}]: contains a NUL byte")


def _check_env(_: object, __: object, value: Mapping[str, str]) -> None:
    for name, val in value.items():
        if not isinstance(name, str) or ENV_NAME_PATTERN.fullmatch(name) is None:
            raise ValueError(f"env: {name!r} is not a valid variable name")
        if is_credential_variable(name):
            raise ValueError(f"env: {name} is a clanker credential and cannot be passed")
        if not isinstance(val, str) or "\0" in val:
            raise ValueError(f"env[{name}]: must be a string without NUL bytes")


def _check_cwd(_: object, __: object, value: str | None) -> None:
    if value is not None and (not os.path.isabs(value) or "\0" in value):
        raise ValueError("cwd: must be an absolute path")


def _freeze_env(value: Mapping[str, str] | None) -> Mapping[str, str]:
    return MappingProxyType(dict(value or {}))


@frozen(kw_only=True, eq=True, hash=False)
class CommandRequest:
    """One bounded, shell-free command.

    ``env`` is added to the environment the transport provides (which never
    carries clanker credentials). ``timeout`` bounds the whole run, or the
    whole lifetime of a stdio session; ``inference`` raises its ceiling from
    30 s to 90 s for model calls, ``attended`` to 300 s for a command that waits
    for the person (a sign-in in their browser). ``max_output_bytes`` caps
    stdout and stderr each, cumulatively.
    """

    command: str = field(validator=_check_command)
    args: tuple[str, ...] = field(default=(), converter=_strings, validator=_check_args)
    cwd: str | None = field(default=None, validator=_check_cwd)
    env: Mapping[str, str] = field(default=None, converter=_freeze_env, validator=_check_env)
    stdin: bytes | None = field(default=None)
    timeout: float = field(default=DEFAULT_TIMEOUT)
    inference: bool = False
    attended: bool = False
    max_output_bytes: int = field(default=DEFAULT_MAX_OUTPUT)

    @stdin.validator
    def _check_stdin(self, _: object, value: bytes | None) -> None:
        if value is not None and (not isinstance(value, bytes) or len(value) > MAX_STDIN):
            raise ValueError(f"stdin: must be bytes of at most {MAX_STDIN} bytes")

    @timeout.validator
    def _check_timeout(self, _: object, value: float) -> None:
        ceiling = (ATTENDED_TIMEOUT if self.attended
                   else INFERENCE_TIMEOUT if self.inference else MAX_TIMEOUT)
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if not number or not 0 < value <= ceiling:
            raise ValueError(f"timeout: must be more than 0 and at most {ceiling:g} seconds")

    @max_output_bytes.validator
    def _check_output(self, _: object, value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_OUTPUT:
            raise ValueError(f"max_output_bytes: must be between 1 and {MAX_OUTPUT}")

    @property
    def argv(self) -> tuple[str, ...]:
        return (self.command, *self.args)


@frozen
class CommandResult:
    """What a finished command printed and how it exited.

    A non-zero exit is a result, not an error: the provider decides what it
    means. Output is decoded as UTF-8 with replacement, so garbage bytes can
    never crash a parser.
    """

    stdout: str
    stderr: str
    exit_code: int

    def require_success(self, harness: str | None = None) -> CommandResult:
        """Return ``self`` if the command exited 0, else raise ``command-failed``."""
        if self.exit_code != 0:
            raise HarnessCapabilityError(
                ErrorKind.COMMAND_FAILED, f"exit status {self.exit_code}", harness=harness
            )
        return self
