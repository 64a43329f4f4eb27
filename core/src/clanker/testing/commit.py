"""End-to-end scaffolding for a commit capability's tests.

A test builds a repository with every kind of change (:func:`change_repository`),
puts a double of the harness on ``PATH`` that replays output captured from the
real CLI (:func:`install_replay_double`, and
:func:`~clanker.testing.doubles.prepend_to_path`), asks the real
:class:`~clanker.commit.service.CommitService` for a message (:func:`propose`)
and checks what the double was given and that the repository did not change
(:func:`repository_state`)::

    @pytest.fixture
    def zed_double(tmp_path, monkeypatch):
        double = install_replay_double(tmp_path / "bin", "zed")
        prepend_to_path(monkeypatch, double.path.parent)
        return double

    def test_end_to_end(tmp_path, zed_double, monkeypatch):
        repo = change_repository(tmp_path)
        zed_double.replay(monkeypatch, FIXTURES / "success.jsonl")
        before = repository_state(repo)
        proposal = propose(installed_provider("zed"), repo, tmp_path / "locks", "m1")
        assert repository_state(repo) == before
        assert zed_double.call()["argv"][-1] == "--model=m1"
        assert "return retry(fetch)" in zed_double.stdin().decode()

The double's protocol: it reads its stdin to EOF, records it and how it was run,
writes the file named by :data:`STREAM_VARIABLE` to stdout byte for byte (nothing
when it is unset) and exits with :data:`EXIT_VARIABLE` (default 0).

:class:`CommitContract`, the commit part of the provider contract, runs exactly
that for every output a plugin lists in :attr:`CommitContract.commit_successes`
and :attr:`CommitContract.commit_failures`.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, cast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clanker.capabilities import Capability
from clanker.commit.capability import CommitCapability
from clanker.commit.message import Style, normalize_message
from clanker.commit.service import CommitProposal, CommitService
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import INFERENCE_TIMEOUT, CommandResult, LocalTransport
from clanker.ids import HarnessId
from clanker.registry import HarnessProvider, Registry
from clanker.testing.base import PROPERTY, ContractBase
from clanker.testing.doubles import prepend_to_path, write_script
from clanker.testing.strategies import json_values, junk_text, model_ids, prefixes

__all__ = [
    "EXIT_VARIABLE",
    "GIT",
    "MARKER",
    "STREAM_VARIABLE",
    "CommitContract",
    "ReplayDouble",
    "answer_or_typed_failure",
    "change_repository",
    "check_kept_nowhere",
    "check_prompt_shows_the_change",
    "check_typed_failure",
    "commit_failure",
    "git",
    "install_replay_double",
    "installed_provider",
    "json_lines",
    "propose",
    "refused_real_run",
    "repository_state",
]

GIT = ["git", "-c", "user.name=Dev", "-c", "user.email=dev@example.com",
       "-c", "commit.gpgsign=false"]
"""git with a fixed identity and no signing, whatever the machine's configuration."""

STREAM_VARIABLE = "REPLAY_DOUBLE_STREAM"
"""The file a replay double writes to stdout (a captured or built output)."""

EXIT_VARIABLE = "REPLAY_DOUBLE_EXIT"
"""The status a replay double exits with (default 0)."""

STAGED = "def sync():\n    return retry(fetch)\n"
UNTRACKED = "def retry(f):\n    return f()\n"


def git(repo: Path, *args: str) -> str:
    """Run ``git -C repo args...`` (see :data:`GIT`); its stdout, raising when it fails."""
    return subprocess.run([*GIT, "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout


def change_repository(tmp_path: Path, *, staged: str = STAGED, untracked: str = UNTRACKED) -> Path:
    """Make ``tmp_path/repo``: one commit, then every kind of change a message describes.

    The commit holds ``sync.py`` (``return fetch()``) and ``notes.txt``
    (``first``). Then ``sync.py`` becomes ``staged`` (by default it returns
    ``retry(fetch)``) and is staged; ``notes.txt`` gains an unstaged
    ``second`` line; ``retry.py`` (``untracked``, by default ``def retry(f):``)
    is untracked; ``blob.bin`` is binary; ``link.txt`` is a link to
    ``tmp_path/outside.txt``, outside the repository, which holds
    ``outside-secret``: a prompt may name the link, never show that text.
    """
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    (root / "sync.py").write_text("def sync():\n    return fetch()\n")
    (root / "notes.txt").write_text("first\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "Add the sync client")
    (root / "sync.py").write_text(staged)
    git(root, "add", "sync.py")  # staged
    (root / "notes.txt").write_text("first\nsecond\n")  # unstaged
    (root / "retry.py").write_text(untracked)  # untracked
    (root / "blob.bin").write_bytes(b"\0\1\2\3" * 64)  # binary
    (tmp_path / "outside.txt").write_text("outside-secret")
    (root / "link.txt").symlink_to(tmp_path / "outside.txt")  # a link out of the repository
    return root


def repository_state(repo: Path) -> tuple[bytes, str, str]:
    """The index (byte for byte), ``HEAD`` and ``git status``: equal before and after
    a run means the run changed nothing git keeps."""
    return ((repo / ".git" / "index").read_bytes(), git(repo, "rev-parse", "HEAD"),
            git(repo, "status", "--porcelain"))


# The double itself. CONFIG (a JSON text) is prepended when it is installed.
_REPLAY = """
import json, os, sys
config = json.loads(CONFIG)
stdin = sys.stdin.buffer.read()
with open(config["stdin"], "wb") as f:
    f.write(stdin)
env = {}
for name in config["env"]:
    if name.endswith("*"):
        env.update((n, v) for n, v in os.environ.items() if n.startswith(name[:-1]))
    else:
        env[name] = os.environ.get(name)
with open(config["call"], "w") as f:
    json.dump({"argv": sys.argv[1:], "cwd": os.getcwd(), "env": env}, f)
if config["check"]:
    exec(config["check"], {"stdin": stdin, "json": json, "os": os, "sys": sys})
stream = os.environ.get(config["stream_variable"])
if stream:
    with open(stream, "rb") as f:
        sys.stdout.buffer.write(f.read())
sys.stdout.flush()
sys.stderr.write(config["stderr"])
sys.exit(int(os.environ.get(config["exit_variable"], "0")))
"""


@dataclass(frozen=True)
class ReplayDouble:
    """A replay double installed by :func:`install_replay_double`."""

    path: Path
    """The executable script."""

    def call(self) -> dict[str, Any]:
        """How the last run was made: ``argv`` (without the executable), ``cwd``, and
        ``env``, the variables asked for at install."""
        recorded: dict[str, Any] = json.loads(self._record(".call.json").read_text())
        return recorded

    def stdin(self) -> bytes:
        """What the last run read on stdin, byte for byte."""
        return self._record(".stdin").read_bytes()

    def replay(
        self, monkeypatch: pytest.MonkeyPatch, stream: Path, exit_code: int = 0
    ) -> None:
        """Have the next runs print ``stream`` and exit with ``exit_code``."""
        monkeypatch.setenv(STREAM_VARIABLE, str(stream))
        monkeypatch.setenv(EXIT_VARIABLE, str(exit_code))

    def _record(self, suffix: str) -> Path:
        return self.path.with_name(self.path.name + suffix)


def install_replay_double(
    bin_dir: Path,
    executable: str,
    *,
    record_env: Sequence[str] = (),
    stderr: str = "",
    stdin_check: str = "",
) -> ReplayDouble:
    """Write ``bin_dir/executable``, a double of a harness that replays an output.

    Each run reads stdin to EOF (as a harness reading its prompt does) and
    records it, with its argv, working directory and the variables named in
    ``record_env`` (the value, or ``None`` when unset; a name ending in ``*``
    stands for every set variable it begins). It then runs ``stdin_check``, if
    any: Python source seeing ``stdin`` (bytes), ``json``, ``os`` and ``sys``,
    which may print and ``sys.exit`` the way the harness refuses input it would
    not take. Last it writes the file named by :data:`STREAM_VARIABLE` to stdout,
    ``stderr`` to stderr, and exits with :data:`EXIT_VARIABLE` (default 0).
    """
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / executable
    config = {
        "stdin": f"{path}.stdin",
        "call": f"{path}.call.json",
        "env": list(record_env),
        "check": stdin_check,
        "stderr": stderr,
        "stream_variable": STREAM_VARIABLE,
        "exit_variable": EXIT_VARIABLE,
    }
    write_script(bin_dir, executable, f"CONFIG = {json.dumps(config)!r}\n" + _REPLAY)
    return ReplayDouble(path)


def installed_provider(harness: str) -> HarnessProvider:
    """The provider of the installed plugin for ``harness``, loaded through its entry
    point alone, as clanker loads it; the load must report no problem."""
    registry = Registry.from_entry_points({"CLANKER_LOAD_PLUGINS": harness})
    assert registry.problems == ()
    return registry.get_provider(HarnessId(harness))


def propose(
    provider: HarnessProvider,
    repo: Path,
    lock_dir: Path,
    model: str | None,
    style: Style = Style.CONVENTIONAL,
) -> CommitProposal:
    """Ask the real commit service, running local processes, for a message for ``repo``."""
    service = CommitService(executor=LocalTransport(), lock_dir=lock_dir)
    return asyncio.run(service.propose(provider, str(repo), model=model, style=style))


# -- parsing what a harness printed -------------------------------------------------------


def json_lines(*items: object) -> str:
    """``items`` as JSON lines, each ending in a newline: a built stream."""
    return "".join(json.dumps(item) + "\n" for item in items)


def commit_failure(
    commit: CommitCapability, harness: str, stdout: str, exit_code: int = 0, stderr: str = ""
) -> HarnessCapabilityError:
    """The error ``commit.parse_output`` raises for this result, which it must raise,
    naming ``harness``."""
    with pytest.raises(HarnessCapabilityError) as caught:
        commit.parse_output(CommandResult(stdout=stdout, stderr=stderr, exit_code=exit_code))
    assert caught.value.harness == harness
    return caught.value


def answer_or_typed_failure(
    commit: CommitCapability,
    harness: str,
    stdout: str,
    exit_code: int = 0,
    *,
    kinds: Collection[ErrorKind] = (ErrorKind.PARSE_FAILURE, ErrorKind.COMMAND_FAILED,
                                    ErrorKind.UNAUTHENTICATED),
) -> str | None:
    """The answer ``commit.parse_output`` finds in this result (a string), or ``None``
    when it fails as it may: typed, with one of ``kinds``, naming ``harness``. Anything
    else fails the test: what a property test asks of any output."""
    try:
        answer = commit.parse_output(CommandResult(stdout=stdout, stderr="", exit_code=exit_code))
    except HarnessCapabilityError as exc:
        assert exc.kind in kinds
        assert exc.harness == harness
        return None
    assert isinstance(answer, str)
    return answer


def check_prompt_shows_the_change(
    prompt: str, *, staged: str = "return retry(fetch)", untracked: str = "def retry(f):"
) -> None:
    """Assert that a prompt built from :func:`change_repository` shows every kind of
    change (``staged`` and ``untracked`` as that repository was made with) and names
    the binary file and the link, never the text the link points to."""
    assert staged in prompt  # staged
    assert "+second" in prompt  # unstaged
    assert untracked in prompt  # untracked
    assert "blob.bin" in prompt and "link.txt" in prompt
    assert "outside-secret" not in prompt


def check_typed_failure(
    harness: str, repo: Path, locks: Path, kind: ErrorKind,
    provider: HarnessProvider | None = None,
) -> None:
    """Assert that asking ``harness`` (the installed plugin's, or ``provider``) for a
    message fails with ``kind``, naming the harness, and that the repository is as it
    was."""
    before = repository_state(repo)
    with pytest.raises(HarnessCapabilityError) as caught:
        propose(provider or installed_provider(harness), repo, locks, None)
    assert caught.value.kind is kind
    assert caught.value.harness == harness
    assert repository_state(repo) == before


MARKER = "clanker-commit-marker-7f3a"
"""A word a real run's prompt carries (:func:`refused_real_run`) and no file it leaves
may hold (:func:`check_kept_nowhere`)."""


def refused_real_run(
    harness: str, repo: Path, locks: Path, model: str | None, *, marker: str = MARKER
) -> HarnessCapabilityError:
    """Put ``marker`` in the change (an untracked ``retry.py``), ask the installed
    plugin for ``harness`` for a message, which must fail, and check the repository is
    as it was: the failure."""
    (repo / "retry.py").write_text(f"# {marker}\ndef retry(f):\n    return f()\n")
    before = repository_state(repo)
    with pytest.raises(HarnessCapabilityError) as caught:
        propose(installed_provider(harness), repo, locks, model)
    assert repository_state(repo) == before
    return caught.value


def check_kept_nowhere(root: Path, *words: str, outside: Path | None = None) -> None:
    """Assert that no file under ``root`` (but for those under ``outside``) holds any of
    ``words`` (by default :data:`MARKER`)."""
    for path in root.rglob("*"):
        if path.is_file() and not (outside is not None and path.is_relative_to(outside)):
            data = path.read_bytes()
            for word in words or (MARKER,):
                assert word.encode() not in data, (path, word)


# -- the commit part of the provider contract -----------------------------------------------


class CommitContract(ContractBase):
    """Commit: bounded, tool-free inference with the prompt on stdin; any output is an
    answer or a typed failure; and end to end, through the real commit service and a
    double of the harness replaying captured outputs, the message comes out and the
    repository stays as it was.

    A plugin lists its captured outputs in :attr:`commit_successes` and
    :attr:`commit_failures` and, where its double must record or refuse something,
    overrides :meth:`commit_double` and the ``check_commit_*`` methods.
    """

    commit_fixtures: ClassVar[Path | None] = None
    """The directory of the captured outputs, when the attributes below name them."""
    commit_successes: ClassVar[Sequence[tuple[Path | str, str]]] = ()
    """Outputs of the harness's commit mode (captured or built: a path, or a name in
    :attr:`commit_fixtures`) and the message the service proposes from each:
    ``"subject"`` or ``"subject\\n\\nbody"``."""
    commit_failures: ClassVar[Sequence[tuple[Path | str, int, ErrorKind]]] = ()
    """Outputs with the exit status they came with, and how asking fails for each."""
    commit_outputs: ClassVar[Sequence[Path | str] | str] = ()
    """Every captured or built output of the commit mode, or a glob pattern in
    :attr:`commit_fixtures` (by default those of :attr:`commit_successes` and
    :attr:`commit_failures`): the contract cuts them short and adds junk and events."""
    commit_events: ClassVar[st.SearchStrategy[object]] = json_values(max_leaves=20,
                                                                     floats=st.floats())
    """Events near the harness's output format, added after a captured output and alone;
    by default any JSON value (NaN and the infinities too)."""
    commit_failure_kinds: ClassVar[tuple[ErrorKind, ...]] = (
        ErrorKind.PARSE_FAILURE, ErrorKind.COMMAND_FAILED, ErrorKind.UNAUTHENTICATED)
    """How parsing any output may fail (``unauthenticated`` where the output itself
    says the harness is signed out)."""
    commit_decorated: ClassVar[Path | str | None] = None
    """An output whose answer wraps the message in prose and a code fence: the parser
    passes it through as it is, and the commit service's normalizer refuses it."""
    commit_start_up_errors: ClassVar[Sequence[Path | str]] = ()
    """Standard error the harness printed when it failed before writing anything on
    stdout (captured; a path, or a name in :attr:`commit_fixtures`)."""
    commit_model: ClassVar[str] = "contract-model"
    """The model asked for in the end-to-end run (the harness must accept its syntax)."""
    commit_args: ClassVar[Sequence[str] | None] = None
    """The commit invocation's arguments without a model, exactly; the invocation's
    exact-shape tests run only when it is set."""
    commit_env: ClassVar[Mapping[str, str]] = {}
    """The variables the commit invocation sets, exactly (none by default)."""
    commit_models: ClassVar[Sequence[str]] = ("contract-model", "--tricky", "org/x y")
    """Models the invocation must pass on exactly as given, after :attr:`commit_args`
    (as :meth:`commit_model_args` spells them)."""
    commit_answers: ClassVar[Sequence[tuple[Path | str, str]]] = ()
    """Outputs of runs that exited 0 and the answer parsing returns for each, exactly
    (before the commit service's normalizer)."""
    commit_refusals: ClassVar[Sequence[tuple[Path | str, int, ErrorKind, str]]] = ()
    """Outputs without an answer, with the exit status they came with, how parsing fails
    for each and a phrase its detail carries."""
    commit_refusal_stderr: ClassVar[Path | str | None] = None
    """Captured standard error given with each of :attr:`commit_refusals`: none of its
    lines may reach a message."""
    commit_unsaid: ClassVar[Sequence[str]] = ()
    """Words of the harness's or a provider's in :attr:`commit_refusals` that no
    message may carry."""
    commit_empty_detail: ClassVar[str] = "no output"
    """A phrase of the parse failure's detail for a run that printed nothing."""

    def commit_model_args(self, model: str) -> Sequence[str]:
        """How the invocation asks for ``model``: by default ``--model`` and the model."""
        return ("--model", model)

    def commit_stdin(self, prompt: str) -> bytes:
        """What the invocation writes on stdin for ``prompt``: by default its UTF-8."""
        return prompt.encode()

    def commit_double(self, bin_dir: Path, monkeypatch: pytest.MonkeyPatch) -> ReplayDouble:
        """Install the harness's double in ``bin_dir`` (put on ``PATH`` by the contract).
        By default a plain :func:`install_replay_double` of the executable."""
        return install_replay_double(bin_dir, self.provider().descriptor.executable)

    def commit_repository(self, tmp_path: Path) -> Path:
        """The repository the end-to-end run describes: :func:`change_repository`."""
        return change_repository(tmp_path)

    def check_commit_prompt(self, stdin: bytes) -> None:
        """Assert that what the double read on stdin carries the change of
        :meth:`commit_repository` (by default a prompt in plain text)."""
        check_prompt_shows_the_change(stdin.decode())

    def check_commit_call(self, call: dict[str, Any], repo: Path) -> None:
        """Assert more of how the double was run (:meth:`ReplayDouble.call`: its argv,
        cwd and the variables it recorded). Nothing by default."""

    def commit_output_answering(self, answer: str) -> str | None:
        """The stdout of a run (exit 0) whose answer is exactly ``answer``, built in the
        harness's format; ``None`` (the default) skips the tests that need one."""
        return None

    def _commit(self) -> CommitCapability:
        return cast(CommitCapability, self._implementation(Capability.COMMIT))

    def _answer(self, stdout: str, exit_code: int = 0) -> str | None:
        """The answer in ``stdout``, or ``None`` for a typed failure naming the harness."""
        answer = answer_or_typed_failure(self._commit(), self.harness_id, stdout, exit_code,
                                         kinds=self.commit_failure_kinds)
        assert answer is None or answer.strip(), "an answer is never blank"
        return answer

    def _fixture(self, name: Path | str) -> Path:
        if isinstance(name, Path):
            return name
        assert self.commit_fixtures is not None, "set commit_fixtures to name outputs"
        return self.commit_fixtures / name

    def _outputs(self) -> list[str]:
        self._commit()
        if isinstance(self.commit_outputs, str):
            assert self.commit_fixtures is not None, "set commit_fixtures to glob outputs"
            paths = sorted(self.commit_fixtures.glob(self.commit_outputs))
        else:
            paths = sorted({self._fixture(name) for name in self.commit_outputs or (
                *(name for name, _ in self.commit_successes),
                *(name for name, _, _ in self.commit_failures))})
        return [path.read_text() for path in self._unless(paths or None, "commit_outputs")]

    def _check_cut(self, full: str, cut: str) -> None:
        answer = self._answer(cut)
        if answer is not None:
            # Only a cut right after a whole line of the output can answer, and then as
            # the whole does (when it does).
            assert cut.rstrip("\n").rsplit("\n", 1)[-1] in full.split("\n")
            whole = self._answer(full)
            assert whole is None or answer == whole
        assert self._answer(cut, exit_code=1) is None, "a failed run gave an answer"

    def _args(self) -> tuple[str, ...]:
        self._commit()
        return tuple(self._unless(self.commit_args, "commit_args"))

    def test_commit_invocation_without_a_model_is_exactly_the_plugins(self) -> None:
        args = self._args()
        prompt = "Write a commit message.\n\nDiff: é\n"
        request = self._commit().build_invocation(None, prompt)
        assert request.command == self.provider().descriptor.executable
        assert request.args == args
        assert request.stdin == self.commit_stdin(prompt)
        assert request.timeout == INFERENCE_TIMEOUT == 90  # the bound of an inference
        assert request.inference is True
        assert dict(request.env) == dict(self.commit_env)
        assert request.cwd is None  # the service sets the repository root

    def test_commit_model_comes_last_exactly_as_given(self) -> None:
        args = self._args()
        for model in self.commit_models:
            request = self._commit().build_invocation(model, "p")
            assert request.args == (*args, *self.commit_model_args(model)), model
            assert request.stdin == self.commit_stdin("p"), model
            assert dict(request.env) == dict(self.commit_env), model
            assert request.timeout == INFERENCE_TIMEOUT and request.inference, model

    def test_commit_outputs_with_an_answer_give_it_exactly(self) -> None:
        commit = self._commit()
        answers = self._unless(self.commit_answers or None, "commit_answers")
        for name, answer in answers:
            stdout = self._fixture(name).read_text()
            result = CommandResult(stdout=stdout, stderr="ignored", exit_code=0)
            assert commit.parse_output(result) == answer, name

    def test_commit_outputs_without_an_answer_fail_typed_in_the_plugins_words(self) -> None:
        commit = self._commit()
        refusals = self._unless(self.commit_refusals or None, "commit_refusals")
        stderr = ("" if self.commit_refusal_stderr is None
                  else self._fixture(self.commit_refusal_stderr).read_text())
        for name, exit_code, kind, detail in refusals:
            stdout = self._fixture(name).read_text()
            error = commit_failure(commit, self.harness_id, stdout, exit_code, stderr)
            assert error.kind is kind, name
            assert detail in (error.detail or ""), (name, error.detail)
            for word in self.commit_unsaid:
                assert word not in error.message, (name, word)
            for line in stderr.splitlines():
                assert not line.strip() or line.strip() not in error.message, (name, line)

    def test_commit_nothing_at_all_is_a_parse_failure(self) -> None:
        commit = self._commit()
        for stdout in ("", "\n", "\n \n", "  \n\n"):
            error = commit_failure(commit, self.harness_id, stdout)
            assert error.kind is ErrorKind.PARSE_FAILURE, repr(stdout)
            assert self.commit_empty_detail in (error.detail or ""), repr(stdout)

    @pytest.mark.parametrize("exit_code", [1, 2, 3, 124, 143, -9, -15])
    def test_commit_a_complete_answer_from_a_failed_process_is_command_failed(
        self, exit_code: int
    ) -> None:
        commit = self._commit()
        answers = self._unless(self.commit_answers or None, "commit_answers")
        stdout = self._fixture(answers[0][0]).read_text()
        error = commit_failure(commit, self.harness_id, stdout, exit_code)
        assert error.kind is ErrorKind.COMMAND_FAILED
        assert error.detail == f"exit status {exit_code}"

    def test_an_answer_is_returned_as_given_not_trimmed(self) -> None:
        # The commit service's normalizer owns what surrounds the message.
        answer = "\n  Fix it  \n"
        stdout = self._unless(self.commit_output_answering(answer), "commit_output_answering")
        result = CommandResult(stdout=stdout, stderr="", exit_code=0)
        assert self._commit().parse_output(result) == answer

    def test_a_line_separator_inside_an_answer_does_not_split_its_line(self) -> None:
        answer = "Fix it\u2028 now\x85"
        self._commit()
        stdout = self._unless(self.commit_output_answering(answer), "commit_output_answering")
        # As built (JSON escapes them), and written raw, as another encoder may.
        raw = stdout.replace("\\u2028", "\u2028").replace("\\u0085", "\x85")
        for text in (stdout, raw):
            result = CommandResult(stdout=text, stderr="", exit_code=0)
            assert self._commit().parse_output(result) == answer

    def test_a_decorated_answer_is_passed_through_then_refused_by_the_normalizer(
        self,
    ) -> None:
        commit = self._commit()
        if self.commit_decorated is None:
            pytest.skip("the plugin's contract supplies no commit_decorated")
        stdout = self._fixture(self.commit_decorated).read_text()
        answer = commit.parse_output(CommandResult(stdout=stdout, stderr="", exit_code=0))
        assert "```" in answer and not answer.startswith("```")  # prose, then a fence
        for style in Style:
            with pytest.raises(HarnessCapabilityError) as caught:
                normalize_message(answer, style, harness=self.harness_id)
            assert caught.value.kind is ErrorKind.PARSE_FAILURE

    def test_a_cut_commit_output_at_any_line_is_a_whole_answer_or_a_typed_failure(
        self,
    ) -> None:
        for full in self._outputs():
            ends = [i for i, c in enumerate(full) if c == "\n"]
            for end in ends:
                for cut in (end - 1, end, end + 1):
                    self._check_cut(full, full[:max(cut, 0)])

    @PROPERTY
    @given(data=st.data())
    def test_a_truncated_commit_output_is_a_whole_answer_or_a_typed_failure(
        self, data: st.DataObject
    ) -> None:
        full = data.draw(st.sampled_from(self._outputs()))
        self._check_cut(full, data.draw(prefixes([full])))

    @PROPERTY
    @given(data=st.data(), junk=junk_text(), exit_code=st.integers(-15, 255))
    def test_junk_commit_output_is_a_typed_failure(
        self, data: st.DataObject, junk: str, exit_code: int
    ) -> None:
        assert self._answer(junk, exit_code) is None
        full = data.draw(st.sampled_from(self._outputs()))
        self._answer(full.split("\n", 1)[0] + "\n" + junk)
        self._answer(full + junk)

    @PROPERTY
    @given(data=st.data())
    def test_any_events_after_or_instead_of_an_output_are_an_answer_or_a_typed_failure(
        self, data: st.DataObject
    ) -> None:
        full = data.draw(st.sampled_from(self._outputs()))
        events = json_lines(*data.draw(st.lists(self.commit_events, max_size=8)))
        self._answer(full + events)
        self._answer(full.split("\n", 1)[0] + "\n" + events)
        self._answer(events)

    @PROPERTY
    @given(model=st.none() | model_ids(), prompt=st.text(max_size=200))
    def test_commit_invocations_are_bounded_inference_with_the_prompt_on_stdin(
        self, model: str | None, prompt: str
    ) -> None:
        request = self._commit().build_invocation(model, prompt)
        assert request.command == self.provider().descriptor.executable
        assert request.inference
        assert request.stdin is not None
        # The prompt rides on stdin as text, or inside a JSON message (escaped).
        forms = {prompt, prompt.strip(), json.dumps(prompt)[1:-1],
                 json.dumps(prompt, ensure_ascii=False)[1:-1]}
        assert any(form.encode() in request.stdin for form in forms)
        if model is not None:
            assert any(model == arg or arg.endswith("=" + model) for arg in request.args)

    @PROPERTY
    @given(stdout=junk_text(), stderr=junk_text(), exit_code=st.integers(-15, 255))
    def test_commit_output_parsing_fails_typed_never_crashes(
        self, stdout: str, stderr: str, exit_code: int
    ) -> None:
        try:
            answer = self._commit().parse_output(CommandResult(stdout, stderr, exit_code))
        except HarnessCapabilityError:
            return
        assert isinstance(answer, str)

    @pytest.mark.parametrize("exit_code", [1, 2, 124, 143])
    def test_empty_commit_output_with_a_failed_exit_is_command_failed_and_stderr_stays_out(
        self, exit_code: int
    ) -> None:
        commit = self._commit()
        names = self._unless(self.commit_start_up_errors or None, "commit_start_up_errors")
        for name in names:
            stderr = self._fixture(name).read_text()
            error = commit_failure(commit, self.harness_id, "", exit_code, stderr)
            assert error.kind is ErrorKind.COMMAND_FAILED, name
            assert error.detail == f"exit status {exit_code}", name
            for line in stderr.splitlines():
                assert not line.strip() or line.strip() not in error.message, (name, line)

    def _replaying(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> tuple[HarnessProvider, ReplayDouble, Path]:
        self._commit()
        double = self.commit_double(tmp_path / "bin", monkeypatch)
        prepend_to_path(monkeypatch, double.path.parent)
        return self.provider(), double, self.commit_repository(tmp_path)

    def test_commit_end_to_end_through_the_service(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        commit = self._commit()
        successes = self._unless(self.commit_successes or None, "commit_successes")
        provider, double, repo = self._replaying(tmp_path, monkeypatch)
        before = repository_state(repo)
        for name, message in successes:
            double.replay(monkeypatch, self._fixture(name))
            proposal = propose(provider, repo, tmp_path / "locks", self.commit_model)
            assert proposal.message.text == message, name
            assert (proposal.harness, proposal.model) == (self.harness_id, self.commit_model)
            assert repository_state(repo) == before
            call = double.call()
            assert call["argv"] == list(commit.build_invocation(self.commit_model, "").args)
            assert call["cwd"] == str(repo)
            self.check_commit_call(call, repo)
            self.check_commit_prompt(double.stdin())
        # Without a model the harness's own default is asked.
        double.replay(monkeypatch, self._fixture(successes[0][0]))
        proposal = propose(provider, repo, tmp_path / "locks", None)
        assert proposal.message.text == successes[0][1]
        assert double.call()["argv"] == list(commit.build_invocation(None, "").args)
        assert repository_state(repo) == before

    def test_commit_end_to_end_failures_are_typed_and_change_nothing(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        self._commit()
        failures = self._unless(self.commit_failures or None, "commit_failures")
        provider, double, repo = self._replaying(tmp_path, monkeypatch)
        for name, exit_code, kind in failures:
            double.replay(monkeypatch, self._fixture(name), exit_code)
            check_typed_failure(self.harness_id, repo, tmp_path / "locks", kind, provider)
