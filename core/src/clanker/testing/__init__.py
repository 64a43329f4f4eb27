"""Reusable tests for harness plugins: the provider contract, strategies, doubles,
and the scaffolding of a commit capability's end-to-end tests.

Needs the ``testing`` extra (pytest and hypothesis): ``pip install clanker[testing]``.
"""

from __future__ import annotations

from clanker.testing.commit import (
    ReplayDouble,
    change_repository,
    git,
    install_replay_double,
    installed_provider,
    propose,
    repository_state,
)
from clanker.testing.contract import HarnessProviderContract
from clanker.testing.doubles import (
    EnvironmentDouble,
    FailingExecutor,
    ScriptedExecutor,
    ScriptedSession,
    ScriptedSessionExecutor,
    attachment_context,
    prepend_to_path,
    run_locally,
    write_script,
)

__all__ = [
    "EnvironmentDouble",
    "FailingExecutor",
    "HarnessProviderContract",
    "ReplayDouble",
    "ScriptedExecutor",
    "ScriptedSession",
    "ScriptedSessionExecutor",
    "attachment_context",
    "change_repository",
    "git",
    "install_replay_double",
    "installed_provider",
    "prepend_to_path",
    "propose",
    "repository_state",
    "run_locally",
    "write_script",
]
