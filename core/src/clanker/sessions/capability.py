"""The sessions contract: what a provider implements to find its harness's
history, and what a discovery hands it (bounds, scope, the host's files and
executor, its caches).

A plugin imports its sessions types from here, and what it needs to say where
its store is (:class:`StoreDirectory`, :func:`home_directory`), which the
listing over empty stores (:mod:`clanker.sessions.empty`) asks of every
provider; the shared store readers it scans with are in :mod:`clanker.stores`.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final, Protocol, TypeVar, runtime_checkable

from attrs import field, frozen

from clanker.environment import HostFiles
from clanker.environment.witness import Witness
from clanker.execution import CommandExecutor
from clanker.ids import HarnessId
from clanker.sessions.answers import AnswerCache, FileState, look, settled
from clanker.sessions.cache import SummaryCache
from clanker.sessions.scope import canonical, in_scope
from clanker.sessions.types import HarnessSession, SessionScan
from clanker.sessions.witness import ScanMemo

if TYPE_CHECKING:
    from concurrent.futures import Executor

__all__ = [
    "DEFAULT_STORE_LIMIT",
    "AnswerCache",
    "HarnessSession",
    "NeedsEventLoop",
    "SessionScan",
    "SessionsCapability",
    "SessionsContext",
    "StoreDirectory",
    "home_directory",
    "resumable_id",
]

_T = TypeVar("_T")

DEFAULT_STORE_LIMIT: Final = 512


class NeedsEventLoop(BaseException):
    """Raised through a ``discover`` driven without an event loop (an
    :attr:`SessionsContext.inline` one) where only a loop could go on: a command to
    run, a file to wait for. Whoever drove it lists with the event loop instead. A
    ``BaseException``, so that a provider's own ``except Exception`` cannot take it for
    a failure of its store; a provider never raises or catches it."""


@frozen(kw_only=True)
class SessionsContext:
    """One discovery request, as a provider sees it.

    ``files`` and ``executor`` are the environment's: the only way to read the
    store or run the harness. ``environ`` is the host's environment (``HOME``
    set whenever the host knows it), from which a provider finds its store.

    ``scopes`` are the workspace's canonical directory and its git worktrees
    (plus the path as the caller spelled it), or empty for "everything". A
    provider may use them to skip whole project directories cheaply; the
    service still matches every session's canonical cwd itself, so a scope is
    never authority. ``native_id`` narrows discovery to one session when
    clanker re-finds a selection before launching it; then ``scopes`` only say
    where the caller is (for a harness that lists one project at a time) and
    must not filter. ``limit`` bounds how many sessions one store contributes
    (the newest first). ``memo`` keeps earlier answers for :meth:`remember`.
    ``answers`` keeps a provider's answers across processes, for a harness
    whose history only its own (slow) command can list (see
    :mod:`clanker.sessions.answers`); ``None`` when the caller keeps none.
    """

    harness: HarnessId
    executor: CommandExecutor
    files: HostFiles
    environ: Mapping[str, str]
    cache: SummaryCache
    scopes: tuple[str, ...] = ()
    native_id: str | None = None
    limit: int = field(default=DEFAULT_STORE_LIMIT)
    scan_executor: Executor | None = field(default=None, repr=False, eq=False)
    memo: ScanMemo | None = field(default=None, repr=False, eq=False)
    answers: AnswerCache | None = field(default=None, repr=False, eq=False)
    inline: bool = field(default=False, repr=False, eq=False)
    """Run offloaded work at once on the caller's thread: ``discover`` is driven
    without an event loop (:meth:`~clanker.sessions.service.SessionService.discover_now`,
    :mod:`clanker.sessions.empty`), and whatever needs one raises
    :class:`NeedsEventLoop`. A provider starts no task in such a context
    (``asyncio.ensure_future`` would make a loop of its own and leave the task on it
    unrun): it awaits one command at a time."""
    _canonical: dict[str, str] = field(factory=dict, init=False, repr=False, eq=False)

    async def offload(self, work: Callable[[], _T]) -> _T:
        """Run blocking file or database work off the event loop.

        The service hands every provider the same small pool: scans are
        Python-bound, so more threads than cores only add lock contention.
        """
        if self.inline:
            return work()
        import asyncio  # here: an empty listing answered without a scan never loads it

        return await asyncio.get_running_loop().run_in_executor(self.scan_executor, work)

    def remember(self, inputs: Hashable, scan: Callable[[Witness], SessionScan]) -> SessionScan:
        """Answer from an earlier scan of the same request if its store is unchanged.

        ``inputs`` are whatever the provider resolved before scanning (its
        roots, say) and ``scan`` must record in the witness everything else it
        reads: every walk (:func:`~clanker.environment.files.find_files`
        records itself) and any other file. Blocking: call it from offloaded work.
        """
        key = (inputs, self.scopes, self.native_id, self.limit)
        if self.memo is None:
            return scan(Witness())
        kept = self.memo.recall(key)
        if kept is not None:
            return kept
        witness = self.memo.witness()
        answer = scan(witness)
        self.memo.keep(key, witness, answer)
        return answer

    async def settled_states(self, paths: Sequence[str]) -> tuple[FileState, ...] | None:
        """The states of ``paths`` (through :attr:`files`) once they can prove an answer
        made before this call, or ``None`` when they changed while settling.

        Take them *after* the command whose answer they prove: what it wrote
        itself is then part of them. A file changed within one timestamp tick
        of now is waited for (a tenth of a second, two seconds where times are
        whole seconds) and looked at again.
        """
        states = await self.offload(lambda: look(self.files, paths))
        wait = settled(states)
        if not wait:
            return states
        if self.inline:
            raise NeedsEventLoop
        import asyncio

        await asyncio.sleep(wait / 1e9)
        again = await self.offload(lambda: look(self.files, paths))
        return again if again == states else None

    def wants(self, cwd: str | None) -> bool:
        """Say whether a session recorded in ``cwd`` belongs to this request.

        The service's own matching rule, for a provider that must apply it
        before its bound (so the newest sessions *of the workspace* are kept):
        everything when there is no workspace or clanker is re-finding one
        session; a session without a directory everywhere; otherwise its
        canonical directory within a scope.
        """
        if not self.scopes or self.native_id is not None or cwd is None:
            return True
        resolved = self._canonical.get(cwd)
        if resolved is None:
            resolved = self._canonical[cwd] = canonical(cwd)
        return in_scope(resolved, self.scopes)

    @limit.validator
    def _positive(self, _: object, value: int) -> None:
        if value < 1:
            raise ValueError("limit: must be at least 1")


@runtime_checkable
class SessionsCapability(Protocol):
    """Finds a harness's past conversations in its own store, bounded."""

    resumes_without_original_directory: bool
    """Whether the harness continues a session whose recorded directory is gone
    (verified per version; ``False`` unless proven)."""

    def store_roots(self, environ: Mapping[str, str], files: HostFiles) -> tuple[Path, ...]:
        """Return the directories the store's files live under (for confinement checks),
        as found from the host's ``environ`` (and, where the harness reads a
        setting for it, its ``files``).

        Empty for a harness whose history is only reachable through its own command.
        """
        ...

    async def discover(self, context: SessionsContext) -> SessionScan:
        """Summarize the store's sessions within ``context``'s bounds.

        A missing store is an empty scan. Malformed files are counted skips;
        an unreadable store or a changed schema raises a typed error.
        """
        ...


def home_directory(environ: Mapping[str, str]) -> str | None:
    """The host's home directory: ``HOME`` when it is an absolute path, else ``None``.

    The environment fills ``HOME`` in from the host's password database when
    it is unset (as the harnesses themselves do), so this is the whole rule.
    """
    home = environ.get("HOME")
    if not home or "\x00" in home or not home.startswith("/"):
        return None
    return home


class StoreDirectory:
    """The sessions capability over a store in one directory, less what each harness
    declares: where the directory is (:meth:`directory`, ``None`` where the host has
    none) and how it is read (:meth:`scan`).

    :meth:`discover` runs the scan off the event loop (walking and reading block), with
    the directory found again from the context's environment; no directory is an empty
    scan. :meth:`store_roots` is that one directory.
    """

    resumes_without_original_directory: bool

    def directory(self, environ: Mapping[str, str]) -> Path | None:
        raise NotImplementedError

    def scan(self, context: SessionsContext, directory: Path) -> SessionScan:
        raise NotImplementedError

    def store_roots(self, environ: Mapping[str, str], files: HostFiles) -> tuple[Path, ...]:
        directory = self.directory(environ)
        return () if directory is None else (directory,)

    async def discover(self, context: SessionsContext) -> SessionScan:
        return await context.offload(lambda: self._discover(context))

    def _discover(self, context: SessionsContext) -> SessionScan:
        directory = self.directory(context.environ)
        return SessionScan() if directory is None else self.scan(context, directory)


def resumable_id(value: object, validate: Callable[[str], str]) -> str | None:
    """Return ``value`` when it is a session id ``validate`` takes as it is written.

    ``validate`` is the launch capability's ``validate_session_id``. ``None`` for
    anything else: not text, refused by it (:class:`ValueError`), or normalized by
    it into another spelling (a session listed under that spelling would not be the
    one the store holds).
    """
    if not isinstance(value, str):
        return None
    try:
        return value if validate(value) == value else None
    except ValueError:
        return None
