"""Reusable tests for harness plugins: the provider contract, strategies, doubles,
and the scaffolding of a commit capability's end-to-end tests.

A plugin's tests subclass :class:`HarnessProviderContract` and supply fixtures
(``docs/hooks.md``, "Testing a plugin"); the parts it is made of
(:class:`LaunchContract`, :class:`ModelsContract`, :class:`SessionsContract`,
:class:`AttentionContract`, :class:`UsageContract`, :class:`CommitContract`,
:class:`MessageStreamContract`, :class:`BridgingContract`) can
also be subclassed one by one.

Needs the ``testing`` extra (pytest and hypothesis): ``pip install clanker[testing]``.
"""

from __future__ import annotations

from clanker.capabilities import Capability
from clanker.testing.attending import AttentionContract
from clanker.testing.base import launch_argv, registered
from clanker.testing.bridging import BridgingContract
from clanker.testing.commit import (
    CommitContract,
    ReplayDouble,
    change_repository,
    git,
    install_replay_double,
    installed_provider,
    propose,
    repository_state,
)
from clanker.testing.contract import (
    HarnessProviderContract,
    LaunchContract,
    ModelsContract,
    UsageContract,
)
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
from clanker.testing.message_stream import MessageStreamContract
from clanker.testing.sessions import SessionsContract

__all__ = [
    "AttentionContract",
    "BridgingContract",
    "Capability",
    "CommitContract",
    "EnvironmentDouble",
    "FailingExecutor",
    "HarnessProviderContract",
    "LaunchContract",
    "MessageStreamContract",
    "ModelsContract",
    "ReplayDouble",
    "ScriptedExecutor",
    "ScriptedSession",
    "ScriptedSessionExecutor",
    "SessionsContract",
    "UsageContract",
    "attachment_context",
    "change_repository",
    "git",
    "install_replay_double",
    "installed_provider",
    "launch_argv",
    "prepend_to_path",
    "propose",
    "registered",
    "repository_state",
    "run_locally",
    "write_script",
]
