"""Writing a commit message through a harness: one request per repository at a time."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path

from attrs import evolve, frozen

from clanker.commit.gitcontext import ChangeContext, collect_changes
from clanker.commit.message import CommitMessage, Style, normalize_message
from clanker.commit.prompt import build_prompt
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import INFERENCE_TIMEOUT, MAX_OUTPUT, CommandExecutor
from clanker.locking import LockTimeoutError, UnsafeLockError, exclusive
from clanker.models.types import model_text
from clanker.registry import HarnessProvider

__all__ = [
    "CommitProposal",
    "CommitService",
    "InvalidModelError",
    "RepositoryBusyError",
    "StagingError",
    "commit_change",
]


class RepositoryBusyError(Exception):
    """Another commit-message request for this repository is still running."""


class StagingError(Exception):
    """``git add`` failed, so nothing was committed; ``status`` is its exit status."""

    def __init__(self, status: int) -> None:
        super().__init__("staging the change failed; nothing was committed")
        self.status = status


class InvalidModelError(ValueError):
    """A model name no harness could take (empty, padded, control characters)."""


@frozen(kw_only=True)
class CommitProposal:
    harness: str
    model: str | None
    message: CommitMessage
    change: ChangeContext


class CommitService:
    """Builds the context, asks the harness, checks the answer."""

    def __init__(self, *, executor: CommandExecutor, lock_dir: Path) -> None:
        self._executor = executor
        self._lock_dir = lock_dir

    async def propose(
        self, provider: HarnessProvider, cwd: str, *, model: str | None, style: Style
    ) -> CommitProposal:
        """Return a checked commit message for the change in ``cwd``'s repository.

        Raises ``unsupported`` without a commit capability, the git context
        errors, :class:`RepositoryBusyError`, and the harness's typed failures.
        """
        if model is not None and model_text(model) is None:
            raise InvalidModelError("a model name is text without surrounding spaces or "
                                    "control characters")
        capability = provider.commit
        if capability is None:
            raise HarnessCapabilityError(ErrorKind.UNSUPPORTED, "commit messages",
                                         harness=provider.id)
        change = await collect_changes(self._executor, cwd)
        with self._exclusive(change.root):
            request = capability.build_invocation(model, build_prompt(change, style))
            # The service, not the provider, decides where and how long: the
            # repository root, the inference ceiling, the 1 MiB stream cap.
            request = evolve(
                request, cwd=change.root, inference=True,
                timeout=min(request.timeout, INFERENCE_TIMEOUT) if request.inference
                else INFERENCE_TIMEOUT,
                max_output_bytes=MAX_OUTPUT,
            )
            result = await self._executor.run(request)
            try:
                text = capability.parse_output(result)
            except HarnessCapabilityError as exc:
                raise exc.with_harness(provider.id) from exc
        message = normalize_message(text, style, harness=provider.id)
        return CommitProposal(harness=provider.id, model=model, message=message, change=change)

    @contextlib.contextmanager
    def _exclusive(self, root: str) -> Iterator[None]:
        """Hold this repository's lock (one try); the kernel drops it if the process dies."""
        name = hashlib.sha256(os.path.realpath(root).encode()).hexdigest()[:32]
        path = self._lock_dir / f"commit-{name}.lock"
        with contextlib.ExitStack() as stack:
            try:
                stack.enter_context(exclusive(path, timeout=0))
            except UnsafeLockError as exc:
                raise RepositoryBusyError(f"the lock file {exc}") from exc
            except LockTimeoutError:
                raise RepositoryBusyError(
                    f"a commit message for {root} is already being written"
                ) from None
            yield


def commit_change(root: str, message: str, environ: Mapping[str, str]) -> int:
    """Stage everything the message describes, then commit; a failed stage commits nothing.

    Returns ``git commit``'s exit status; raises :class:`StagingError`. Runs in the
    foreground without a time bound: the user's own commit hooks may take
    their time and print to the terminal.
    """
    git = shutil.which("git", path=environ.get("PATH", os.defpath))
    if git is None:
        raise HarnessCapabilityError(ErrorKind.BINARY_UNAVAILABLE, "git")
    env = dict(environ)
    staged = subprocess.run([git, "-C", root, "add", "--all"], check=False, env=env)
    if staged.returncode != 0:
        raise StagingError(staged.returncode)
    done = subprocess.run(
        [git, "-C", root, "commit", "--file", "-"], input=message.encode(), check=False, env=env
    )
    return done.returncode
