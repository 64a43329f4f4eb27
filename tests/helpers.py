"""Builders shared by the core tests: a configurable fake harness plugin, and
executable scripts on a private PATH for real-process tests."""

from __future__ import annotations

import os
import stat
import sys
import textwrap
from pathlib import Path

from clanker import hookimpl
from clanker.capabilities import ModelsContext
from clanker.descriptor import (
    Capability,
    HarnessDescriptor,
    OperationSupport,
    Support,
    Transport,
)
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import CommandRequest, CommandResult
from clanker.ids import HarnessId
from clanker.launch.request import LaunchPlan, LaunchRequest
from clanker.models.types import Model


class FakeLaunch:
    """A launch capability for a fictional harness ``fake-agent``.

    argv: ``fake-agent [--model M] [resume ID | --fork ID] USER_FLAGS...``
    """

    def __init__(self, executable: str = "fake-agent") -> None:
        self.executable = executable

    def build(self, request: LaunchRequest) -> LaunchPlan:
        argv = [self.executable]
        if request.model:
            argv += ["--model", request.model]
        if request.session is not None:
            if request.operation.value == "resume":
                argv += ["resume", request.session.native_id]
            else:
                argv += ["--fork", request.session.native_id]
        argv += request.user_flags
        return LaunchPlan(argv=tuple(argv), env={"FAKE_AGENT_HOME": "/tmp/fake"})

    def validate_session_id(self, raw: str) -> str:
        if not raw.isalnum():
            raise ValueError("a fake session id is alphanumeric")
        return raw

    def version_request(self) -> CommandRequest:
        return CommandRequest(command=self.executable, args=("--version",))

    def parse_version(self, result: CommandResult) -> str:
        text = result.stdout.strip()
        if result.exit_code != 0 or not text.startswith("fake-agent "):
            raise HarnessCapabilityError(ErrorKind.PARSE_FAILURE, "version")
        version = text.removeprefix("fake-agent ").strip()
        if not version or "\n" in version:
            raise HarnessCapabilityError(ErrorKind.PARSE_FAILURE, "version")
        return version


class FakeModels:
    """Lists models by running ``fake-agent models``: one ``id<TAB>label`` per line."""

    cache_ttl = 3600.0
    fallback = (Model(id="fallback-1"),)

    def __init__(self, executable: str = "fake-agent") -> None:
        self.executable = executable

    async def discover(self, context: ModelsContext) -> tuple[Model, ...]:
        result = await context.executor.run(
            CommandRequest(command=self.executable, args=("models",))
        )
        result.require_success()
        models = []
        for line in result.stdout.splitlines():
            model_id, sep, label = line.partition("\t")
            if not sep or not model_id.strip() or "\0" in line:
                raise HarnessCapabilityError(ErrorKind.PARSE_FAILURE, "models")
            models.append(Model(id=model_id, label=label or None))
        return tuple(models)


LOCAL_NATIVE = OperationSupport(Support.NATIVE, {Transport.LOCAL})


def make_plugin(
    harness: str = "fake-agent",
    *,
    capabilities: tuple[Capability, ...] = (Capability.LAUNCH, Capability.MODELS),
    implement: tuple[Capability, ...] | None = None,
    executable: str = "fake-agent",
    fork: OperationSupport | None = LOCAL_NATIVE,
) -> object:
    """Return a plugin object declaring ``capabilities`` and implementing ``implement``."""
    implement = capabilities if implement is None else implement

    class Plugin:
        @hookimpl
        def clanker_descriptor(self) -> HarnessDescriptor:
            return HarnessDescriptor(
                id=HarnessId(harness),
                display_name="Fake Agent",
                executable=executable,
                capabilities=frozenset(capabilities),
                resume=OperationSupport(Support.NATIVE)
                if Capability.LAUNCH in capabilities else None,
                fork=fork if Capability.LAUNCH in capabilities else None,
                install_hint="pip install fake-agent",
            )

    if Capability.LAUNCH in implement:
        Plugin.clanker_launch = hookimpl(lambda self: FakeLaunch(executable))  # type: ignore[attr-defined]
    if Capability.MODELS in implement:
        Plugin.clanker_models = hookimpl(lambda self: FakeModels(executable))  # type: ignore[attr-defined]
    return Plugin()


def write_script(directory: Path, name: str, body: str) -> Path:
    """Write an executable Python script ``name`` into ``directory``."""
    path = directory / name
    path.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body))
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def path_with(directory: Path) -> dict[str, str]:
    """An environment whose PATH finds ``directory`` first."""
    env = dict(os.environ)
    env["PATH"] = f"{directory}{os.pathsep}{env.get('PATH', '')}"
    return env
