"""The capabilities clanker ships: ``clanker_context``, ``clanker_agents``, ``clanker_notify``.

Each is written against the :class:`~clanker.bridge.declaration.BridgeHost`
port its caller carries, so none of them holds grid, terminal or process code.
Their results are display-safe facts about the caller's own launch and its
workspace: names and relative paths, never a terminal id, a token or an
absolute path.

* ``clanker_context`` (read-only, idempotent): the caller's workspace folder
  name, environment (``local``), harness, checkout (``repository`` for a
  repository's main working tree, ``worktree`` for a linked one, ``none``
  outside git, ``unknown`` when git is not installed) and branch (``null``
  when detached or not a checkout), the launch directory relative to the
  checkout root (or the workspace), and the names it was granted. Git runs
  through the environment's executor: one bounded command (5 s, 16 KiB), two
  on a branch without commits. Its answer is kept (for :data:`CHECKOUTS`
  launch directories) with what vouches for it: the content of the
  checkout's ``HEAD`` (where the branch is), of a linked worktree's ``.git``
  file and of the repository's ``config`` files, and the identity (device,
  inode, type) of the launch directory and of ``.git`` in it and in each of
  its parents up to the root. A later call reads those (a few small reads and
  ``stat`` calls, through the host's files, off the event loop) and asks git
  again only when any of them differs: switching or detaching a branch
  rewrites ``HEAD``; a new, removed or moved repository or worktree changes a
  ``.git``. An answer that the files did not confirm at the time it was read
  (``HEAD`` naming another branch than git said, a ``.git`` appearing while
  git ran) is not kept.
* ``clanker_agents`` (read-only, idempotent): the other live agents in the
  caller's workspace: harness, attention, since when, and where they work
  relative to the workspace (``null`` when elsewhere); at most
  :data:`MAX_AGENTS`, with how many were left out.
* ``clanker_notify``: a one-line message (1 to 200 characters) shown to the
  person by every ``clanker watch --notify`` (a notification event, the bell,
  and the desktop notifier when watch has one); answers how many watchers got
  it. Rate-limited per credential: :data:`NOTIFY_BURST` at once, then one
  every :data:`NOTIFY_EVERY` seconds.
"""

from __future__ import annotations

import asyncio
import os
import re
import stat
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Final

from attrs import frozen

from clanker.bridge.complete import CLANKER_COMPLETE_ISOLATED_CHECKOUT
from clanker.bridge.declaration import (
    Annotations,
    Caller,
    CapabilityRefused,
    HostCapability,
    RateLimit,
    Signal,
    define_capability,
)
from clanker.bridge.input import Arguments, Input, Text
from clanker.bridge.isolated import CLANKER_CREATE_ISOLATED_CHECKOUT
from clanker.checkouts.git import GIT_ENV
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import CommandRequest

if TYPE_CHECKING:
    from clanker.environment import HostFiles

__all__ = [
    "CHECKOUTS",
    "CLANKER_AGENTS",
    "CLANKER_CONTEXT",
    "CLANKER_NOTIFY",
    "MAX_AGENTS",
    "NOTIFY_BURST",
    "NOTIFY_EVERY",
    "OFFERED",
    "SHIPPED",
    "SHIPPED_NAMES",
]

MAX_AGENTS: Final = 100
NOTIFY_BURST: Final = 3
NOTIFY_EVERY: Final = 10.0
MAX_MESSAGE: Final = 200
_GIT_TIMEOUT: Final = 5.0
_GIT_OUTPUT: Final = 16 * 1024
CHECKOUTS: Final = 256
"""How many launch directories' checkout facts are kept."""
_WITNESS_BYTES: Final = 65_536
_UNSHOWN: Final = re.compile(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_MAX_SHOWN: Final = 255


def _safe(text: str) -> str:
    """``text`` as a person may see it: controls and bidi overrides become U+FFFD."""
    return _UNSHOWN.sub("\ufffd", text)[:_MAX_SHOWN]


def _folder(path: str) -> str:
    return _safe(os.path.basename(path.rstrip("/")) or "/")


def _relative(path: str, base: str) -> str | None:
    """``path`` relative to ``base`` (``.`` when equal), ``None`` when it lies elsewhere."""
    relative = os.path.relpath(os.path.normpath(path), os.path.normpath(base))
    if relative == ".." or relative.startswith("../") or os.path.isabs(relative):
        return None
    return _safe(relative)


async def _git(caller: Caller, *args: str) -> tuple[int, str]:
    # core.fsmonitor off: reading where HEAD points must never start a monitor hook.
    result = await caller.host.run_command(CommandRequest(
        command="git", args=("-c", "core.fsmonitor=false", "-C", caller.launch_dir, *args),
        env=GIT_ENV, timeout=_GIT_TIMEOUT, max_output_bytes=_GIT_OUTPUT,
    ))
    return result.exit_code, result.stdout


async def _ask_git(caller: Caller
                   ) -> tuple[str, str | None, str | None, tuple[str, str] | None]:
    """(kind, branch, checkout root, (git directory, common directory)) of the caller's
    launch directory: one git command, and a second only on a branch without commits."""
    try:
        code, out = await _git(caller, "rev-parse", "--show-toplevel", "--git-dir",
                               "--git-common-dir", "--symbolic-full-name", "HEAD")
        lines = out.splitlines()
        if len(lines) < 3 or not all(lines[:3]):
            return "none", None, None, None
        top = lines[0]
        git_dir, common = (os.path.realpath(os.path.join(caller.launch_dir, p))
                           for p in lines[1:3])
        kind = "repository" if git_dir == common else "worktree"
        head = lines[3] if len(lines) == 4 else ""
        if code != 0:  # HEAD names a branch that has no commit yet
            code, out = await _git(caller, "symbolic-ref", "--quiet", "HEAD")
            head = out.strip() if code == 0 else ""
    except HarnessCapabilityError as exc:
        if exc.kind is ErrorKind.BINARY_UNAVAILABLE:
            return "unknown", None, None, None
        if exc.kind is ErrorKind.TIMEOUT:
            raise CapabilityRefused("git did not answer in time") from None
        raise CapabilityRefused("git could not be asked about the checkout") from None
    branch = head.removeprefix("refs/heads/") if head.startswith("refs/heads/") else None
    return kind, branch or None, top, (git_dir, common)


@frozen
class _Probe:
    """One thing that vouches for a kept answer: a path's identity, or a small file's bytes."""

    path: str
    read: bool = False
    follow: bool = False


def _identity(info: os.stat_result | None) -> tuple[int, int, int] | None:
    return None if info is None else (info.st_dev, info.st_ino, stat.S_IFMT(info.st_mode))


def _look(files: HostFiles, probes: tuple[_Probe, ...]) -> tuple[object, ...]:
    return tuple(files.read_small(p.path, _WITNESS_BYTES) if p.read
                 else _identity(files.stat(p.path, follow=p.follow)) for p in probes)


def _around(files: HostFiles, launch_dir: str) -> tuple[str, tuple[_Probe, ...]]:
    """The launch directory, resolved, and what vouches for where its repository is: the
    directory itself, and ``.git`` in it and in each of its parents."""
    real = files.realpath(launch_dir)
    probes = [_Probe(launch_dir, follow=True)]
    here = real
    while True:
        probes.append(_Probe(os.path.join(here, ".git")))
        parent = os.path.dirname(here)
        if parent == here:
            return real, tuple(probes)
        here = parent


def _head_branch(head: object) -> str | bool | None:
    """The branch a ``HEAD`` file names (``None``: detached), or ``False`` when it is
    not one git writes."""
    if not isinstance(head, bytes):
        return False
    text = head.decode("utf-8", "replace").rstrip("\n")
    if text.startswith("ref: "):
        ref = text[len("ref: "):]
        if ref.startswith("refs/heads/") and len(ref) > len("refs/heads/"):
            return ref.removeprefix("refs/heads/")
        return None
    return None if re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", text) else False


@frozen
class _Kept:
    probes: tuple[_Probe, ...]
    seen: tuple[object, ...]
    answer: tuple[str, str | None, str | None, str]


class _Checkouts:
    """Each launch directory's checkout facts, with what vouches for them (bounded)."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._kept: OrderedDict[tuple[str, str], _Kept] = OrderedDict()

    async def facts(self, caller: Caller) -> tuple[str, str | None, str | None, str]:
        """(kind, branch, checkout root, the launch directory resolved)."""
        files = caller.host.files
        key = (caller.environment, caller.launch_dir)
        kept = self._kept.get(key)
        if kept is not None:
            if await asyncio.to_thread(_look, files, kept.probes) == kept.seen:
                self._kept.move_to_end(key)
                return kept.answer
            del self._kept[key]
        real, around = await asyncio.to_thread(_around, files, caller.launch_dir)
        before = await asyncio.to_thread(_look, files, around)
        kind, branch, top, dirs = await _ask_git(caller)
        answer = (kind, branch, top, real)
        if kind == "unknown":
            return answer
        probes = around
        if top is not None and dirs is not None:
            git_dir, common = dirs
            probes += (_Probe(os.path.join(git_dir, "HEAD"), read=True),
                       _Probe(os.path.join(top, ".git"), read=True),
                       _Probe(os.path.join(common, "config"), read=True),
                       _Probe(os.path.join(git_dir, "config.worktree"), read=True),
                       _Probe(os.path.join(git_dir, "commondir"), read=True))
        seen = await asyncio.to_thread(_look, files, probes)
        if seen[:len(around)] != before:
            return answer  # something moved while git ran
        if top is not None and _head_branch(seen[len(around)]) != branch:
            return answer  # HEAD says otherwise now, or git keeps it some other way
        self._kept[key] = _Kept(probes=probes, seen=seen, answer=answer)
        while len(self._kept) > self._size:
            self._kept.popitem(last=False)
        return answer


_CHECKOUTS: Final = _Checkouts(CHECKOUTS)


async def _context(arguments: Arguments, caller: Caller, signal: Signal) -> dict[str, Any]:
    kind, branch, top, real = await _CHECKOUTS.facts(caller)
    workspace = caller.workspace or caller.launch_dir
    here = _relative(real, top) if top is not None else _relative(caller.launch_dir, workspace)
    return {
        "workspace": _folder(workspace),
        "environment": caller.environment,
        "harness": caller.harness,
        "checkout": {"kind": kind, "branch": None if branch is None else _safe(branch)},
        "launchDirectory": here,
        "capabilities": list(caller.granted),
    }


async def _agents(arguments: Arguments, caller: Caller, signal: Signal) -> dict[str, Any]:
    peers = caller.host.peers()
    shown = peers[:MAX_AGENTS]
    base = caller.workspace or caller.launch_dir
    return {
        "agents": [{
            "harness": peer.harness,
            "attention": peer.attention,
            "since": peer.since.isoformat(),
            "location": _relative(peer.location, base),
        } for peer in shown],
        "omitted": len(peers) - len(shown),
    }


async def _notify(arguments: Arguments, caller: Caller, signal: Signal) -> dict[str, Any]:
    message = _safe(str(arguments["message"]))
    return {"delivered": caller.host.notify(message)}


CLANKER_CONTEXT: Final = define_capability(
    name="clanker_context",
    description=(
        "Your own launch, as clanker knows it. The workspace folder, the environment, your "
        "harness, the checkout (repository, worktree or none) and its branch, the directory "
        "you were launched in relative to the checkout root, and the capabilities you may "
        "ask clanker for. Takes no arguments."
    ),
    input=Input(),
    annotations=Annotations(read_only=True, idempotent=True),
    run=_context,
)

CLANKER_AGENTS: Final = define_capability(
    name="clanker_agents",
    description=(
        "The other agents in your workspace, and what each needs. For each: its harness, "
        "attention state (working, needs-input, done, ...), since when, and where it works "
        "relative to the workspace. Takes no arguments."
    ),
    input=Input(),
    annotations=Annotations(read_only=True, idempotent=True),
    run=_agents,
)

CLANKER_NOTIFY: Final = define_capability(
    name="clanker_notify",
    description=(
        "Show the person a short message. One line of at most 200 characters, through "
        "`clanker watch --notify` and the desktop notifier: use it when you need them, not "
        f"for progress. At most {NOTIFY_BURST} messages at once, then one every "
        f"{NOTIFY_EVERY:g} s. Answers how many watchers got it (0: nobody is watching)."
    ),
    input=Input(message=Text("What to tell the person, on one line.", max_length=MAX_MESSAGE)),
    annotations=Annotations(read_only=False, destructive=False, idempotent=False),
    rate_limit=RateLimit(burst=NOTIFY_BURST, per_seconds=NOTIFY_EVERY),
    guidance=("Use clanker_notify when you need the person (a question only they can "
              "answer, a finished task), not to report progress."),
    run=_notify,
)

SHIPPED: Final[tuple[HostCapability, ...]] = (CLANKER_AGENTS, CLANKER_CONTEXT, CLANKER_NOTIFY)
"""What every bridge launch may be granted."""
SHIPPED_NAMES: Final = tuple(capability.name for capability in SHIPPED)
"""What ``clanker launch --bridge`` grants."""
OFFERED: Final[tuple[HostCapability, ...]] = (*SHIPPED, CLANKER_CREATE_ISOLATED_CHECKOUT,
                                               CLANKER_COMPLETE_ISOLATED_CHECKOUT)
"""What a grid offers unless it is given another set: the shipped capabilities and
those granted only to launches that can use them
(:data:`clanker.bridge.isolated.CHECKOUT_NAMES`)."""
