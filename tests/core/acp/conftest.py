"""Coder tests drive the fake ACP agent (``fake_agent.py``) as a real subprocess."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from clanker.api import Clanker
from clanker.environment.local import LocalEnvironment
from clanker.paths import ClankerPaths

FAKE_AGENT = str(Path(__file__).with_name("fake_agent.py"))


def python3_on_path(root: Path) -> dict[str, str]:
    """This process's environment with ``python3`` meaning this interpreter (a
    script, not a link: the virtual environment stays this one)."""
    bin_dir = root / "bin"
    bin_dir.mkdir(exist_ok=True)
    wrapper = bin_dir / "python3"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    wrapper.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}


class Coder:
    """A library object whose agents find this interpreter as ``python3``."""

    def __init__(self, root: Path) -> None:
        self.environ = python3_on_path(root)
        self.workspace = root / "work"
        self.workspace.mkdir()
        self.paths = ClankerPaths(config=root / "config", cache=root / "cache",
                                  state=root / "state", runtime=root / "run")
        self.clanker = Clanker(environment=LocalEnvironment(self.environ), paths=self.paths)
        self.events: list[dict[str, Any]] = []

    def session(self, *flags: str, **kwargs: Any) -> Any:
        return self.clanker.coder(agent_command=("python3", FAKE_AGENT, *flags),
                                  cwd=self.workspace, on_event=self.events.append, **kwargs)

    def agent_text(self) -> str:
        return "".join(e.get("text", "") for e in self.events
                       if e.get("event") == "update" and e.get("kind") == "agent_message_chunk")


@pytest.fixture
def coder(tmp_path: Path) -> Coder:
    return Coder(tmp_path)
