"""Hermes attention: clanker's observer plugin, loaded for one launch only.

Checked against hermes-agent 0.19.0 (docs/harnesses/hermes.md, "Attention").
Hermes finds plugins in four places (``hermes_cli/plugins.py``): its bundled
directory (``HERMES_BUNDLED_PLUGINS`` when set, else ``<site-packages>/plugins``),
``$HERMES_HOME/plugins``, ``./.hermes/plugins`` (opt-in) and the
``hermes_agent.plugins`` entry points. Only bundled *backend* plugins load
without the user's ``plugins.enabled`` list in ``config.yaml``; every other
source needs that list, i.e. a write to the user's own configuration.

So a launch gets a launch-owned bundled directory: in the attachment's 0700
private directory, one symbolic link per entry of Hermes's real bundled
directory (nothing of Hermes's is hidden) plus ``clanker-attention/`` (a
``plugin.yaml`` of kind ``backend``, the observer as ``__init__.py`` and an empty
file ``__pycache__``, so no bytecode is written beside it), and
``HERMES_BUNDLED_PLUGINS`` pointing there. The user's home, config and plugins
are neither read nor written; the user's ``plugins.disabled`` still wins.
The observer only observes (its callbacks return ``None``) and is inert
without the launch's ``CLANKER_ATTENTION_*`` variables.

Declined (``None``): ``--safe-mode`` or ``HERMES_SAFE_MODE`` (Hermes skips
every plugin), a bundled directory that already has a ``clanker-attention``
entry, or a Hermes installation whose bundled directory cannot be found.

On an SSH host (``CLANKER_ATTENTION_TRANSPORT=tty`` in the context) the same
mirror is built in the staging directory the remote attachment installs on the
host (clanker's private launch directory there, with a manifest that records
each link with its exact target): the host's bundled directory and its entries
are asked of the host's Hermes interpreter in one execution through
``context.run`` (:data:`_LIST`), its links name the host's paths, and the
observer takes the terminal route the attachment sets
(``CLANKER_ATTENTION_TRANSPORT`` and ``CLANKER_ATTENTION_CREDENTIAL``). Nothing
of the host's Hermes home is read or written. The guards are the same, read
from the host's login environment and the user's flags.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import stat
from pathlib import Path, PurePosixPath
from typing import Final

from clanker.attention.capability import (
    TRANSPORT_VARIABLE,
    AttachmentContext,
    AttachmentPlan,
    Declined,
)
from clanker.errors import HarnessCapabilityError
from clanker.execution import CommandRequest
from clanker.stores import HostFiles
from clanker_hermes.models import gateway_interpreter

__all__ = [
    "BUNDLED_ENV",
    "OBSERVER_SOURCE",
    "PLUGIN_NAME",
    "HermesAttention",
    "bundled_plugins_dir",
    "host_bundled_plugins",
]

log = logging.getLogger(__name__)

OBSERVER_SOURCE: Final = Path(__file__).with_name("attention_plugin.py")
"""The observer plugin, standard library only, run inside Hermes's process."""
PLUGIN_NAME: Final = "clanker-attention"
BUNDLED_ENV: Final = "HERMES_BUNDLED_PLUGINS"
MANIFEST: Final = (
    f"name: {PLUGIN_NAME}\n"
    'version: "1"\n'
    "description: clanker attention observer (launch-scoped, observe only)\n"
    "author: clanker\n"
    "kind: backend\n"
    "provides_hooks: [subagent_start, pre_llm_call, post_llm_call, on_session_end,"
    " pre_approval_request, post_approval_response, on_session_finalize, on_session_reset]\n"
)
_NO_BYTECODE: Final = "__pycache__"
_SAFE_MODE_FLAG: Final = "--safe-mode"
_TRUTHY: Final = frozenset({"1", "true", "yes", "on"})
_LOCATE_TIMEOUT_SECONDS: Final = 10.0
# Where Hermes's own get_bundled_plugins_dir() looks without the variable:
# <site-packages>/plugins, beside the hermes_cli package.
_LOCATE: Final = (
    "import importlib.util, os\n"
    "spec = importlib.util.find_spec('hermes_cli')\n"
    "origin = os.path.realpath(spec.origin)\n"
    "print(os.path.join(os.path.dirname(os.path.dirname(origin)), 'plugins'))\n"
)


# On a host: the bundled directory (argv[1] when the user set one, else found as
# above) and its entry names, as JSON; exit 4 when there is none.
_LIST: Final = (
    "import json, os, sys\n"
    "d = sys.argv[1]\n"
    "if not d:\n"
    "    import importlib.util\n"
    "    spec = importlib.util.find_spec('hermes_cli')\n"
    "    if spec is None or spec.origin is None:\n"
    "        sys.exit(4)\n"
    "    origin = os.path.realpath(spec.origin)\n"
    "    d = os.path.join(os.path.dirname(os.path.dirname(origin)), 'plugins')\n"
    "if not (os.path.isabs(d) and os.path.isdir(d)):\n"
    "    sys.exit(4)\n"
    "print(json.dumps({'dir': d, 'entries': sorted(os.listdir(d))[:%d]}))\n"
)
_MAX_ENTRIES: Final = 512
_ENTRY: Final = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}")
"""A bundled entry the host's mirror can carry (clanker's resource names)."""
_MAX_LISTING_BYTES: Final = 128 * 1024


def _directory(path: Path, files: HostFiles) -> Path | None:
    found = files.stat(path) if path.is_absolute() else None
    return path if found is not None and stat.S_ISDIR(found.st_mode) else None


def bundled_plugins_dir(context: AttachmentContext) -> Path | None:
    """Hermes's bundled plugin directory for this launch, or ``None``.

    The user's own ``HERMES_BUNDLED_PLUGINS`` (a packaged install) when set;
    otherwise asked of Hermes's interpreter (found as the models capability
    finds it), without running any of Hermes.
    """
    explicit = context.env.get(BUNDLED_ENV, "").strip()
    if explicit:
        return _directory(Path(explicit), context.files)
    try:
        command, directory = gateway_interpreter(context.env, context.files)
    except HarnessCapabilityError:
        return None
    search = context.env.get("PATH", "/usr/bin:/bin")
    request = CommandRequest(
        command=command, args=("-I", "-c", _LOCATE), timeout=_LOCATE_TIMEOUT_SECONDS,
        env={"PATH": search if directory is None else f"{directory}:{search}"},
    )
    try:
        result = context.run(request)
    except HarnessCapabilityError:
        return None
    lines = result.stdout.strip().splitlines()
    if result.exit_code != 0 or len(lines) != 1:
        return None
    return _directory(Path(lines[0]), context.files)


def host_bundled_plugins(context: AttachmentContext) -> tuple[str, tuple[str, ...]] | str:
    """On an SSH host: Hermes's bundled plugin directory there and its entry names,
    or why they cannot be mirrored. One execution on the host (``context.run``) of
    Hermes's interpreter, found as the models capability finds it through the
    host's files (``python3`` when only the user's ``HERMES_BUNDLED_PLUGINS``
    names the directory)."""
    explicit = context.env.get(BUNDLED_ENV, "").strip()
    if explicit and not explicit.startswith("/"):
        return f"{BUNDLED_ENV} on the host is not an absolute path"
    try:
        command, directory = gateway_interpreter(context.env, context.files)
    except HarnessCapabilityError:
        if not explicit:
            return "Hermes's interpreter was not found on the host"
        command, directory = "python3", None
    search = context.env.get("PATH", "/usr/bin:/bin")
    request = CommandRequest(
        # By its path, through env (a request names a bare command, which the host
        # looks up on its login PATH).
        command="env",
        args=(command if directory is None else f"{directory}/{command}",
              "-I", "-c", _LIST % (_MAX_ENTRIES + 1), explicit),
        timeout=_LOCATE_TIMEOUT_SECONDS, max_output_bytes=_MAX_LISTING_BYTES,
        env={"PATH": search if directory is None else f"{directory}:{search}"},
    )
    try:
        result = context.run(request)
    except HarnessCapabilityError as error:
        return f"Hermes's bundled plugin directory could not be asked on the host ({error.kind})"
    return _listing(result.stdout if result.exit_code == 0 else "")


def _listing(stdout: str) -> tuple[str, tuple[str, ...]] | str:
    """The host program's answer (:data:`_LIST`), checked, or why it is refused."""
    try:
        answer = json.loads(stdout)
    except ValueError:
        answer = None
    found = answer.get("dir") if isinstance(answer, dict) else None
    entries = answer.get("entries") if isinstance(answer, dict) else None
    if not (isinstance(found, str) and found.startswith("/") and isinstance(entries, list)
            and all(isinstance(entry, str) for entry in entries)):
        return "Hermes's bundled plugin directory was not found on the host"
    if len(entries) > _MAX_ENTRIES:
        return f"Hermes's bundled plugin directory on the host has over {_MAX_ENTRIES} entries"
    odd = [entry for entry in entries if not _ENTRY.fullmatch(entry)]
    if odd:
        return (f"an entry of Hermes's bundled plugin directory on the host ({odd[0][:40]!r}) "
                "has a name clanker cannot mirror")
    return found, tuple(entries)


class _Conflict(Exception):
    """The user's setup decides that no plugin may load."""


class HermesAttention:
    """Adds clanker's observer plugin to one Hermes launch, through a launch-owned directory."""

    def __init__(self) -> None:
        self.interpreter: Path | None = None
        # `hermes --resume ID` follows a compression chain to its tip, so the
        # session that runs may not be the id clanker validated: start unbound
        # and let the first root turn bind.
        self.resume_preserves_session_id = False
        # On an SSH host the mirror is built in the staging directory the remote
        # attachment installs there (clanker.launch.attention.SSH_ATTENTION).
        self.runs_over_ssh = True

    def prepare(self, context: AttachmentContext) -> AttachmentPlan | Declined:
        env = dict(context.env)
        try:
            _check(context.user_flags, env)
        except _Conflict as conflict:
            return Declined(reason=str(conflict))
        if context.env.get(TRANSPORT_VARIABLE) == "tty":  # on an SSH host
            listing = host_bundled_plugins(context)
            if isinstance(listing, str):
                return Declined(reason=f"{listing}, so clanker's observer cannot be added")
            source, names = PurePosixPath(listing[0]), listing[1]
        else:
            found = bundled_plugins_dir(context)
            if found is None:
                return Declined(reason="Hermes's bundled plugin directory was not found, so "
                                       "clanker's observer cannot be added")
            source, names = PurePosixPath(found), tuple(e.name for e in found.iterdir())
        if PLUGIN_NAME in names:
            # Something else already carries this name; it is not ours to hide.
            return Declined(reason=f"a plugin named {PLUGIN_NAME} is already in {source}")
        mirror = context.private_dir / "hermes-plugins"
        mirror.mkdir(mode=0o700)
        for name in sorted(names):
            (mirror / name).symlink_to(source / name)
        plugin = mirror / PLUGIN_NAME
        plugin.mkdir(mode=0o700)
        (plugin / "plugin.yaml").write_text(MANIFEST, encoding="utf-8")
        shutil.copyfile(OBSERVER_SOURCE, plugin / "__init__.py")
        # A file where the import's bytecode cache directory would go: Hermes's
        # Python then writes no bytecode beside the observer (importlib passes over
        # the OSError), so the directory holds only what was written here, as the
        # host's cleanup, which removes only what the manifest records, needs.
        (plugin / _NO_BYTECODE).write_bytes(b"")
        return AttachmentPlan(env={BUNDLED_ENV: str(mirror)})


def _check(user_flags: tuple[str, ...], env: dict[str, str]) -> None:
    for flag in user_flags:
        if flag == "--":
            break
        # argparse also takes an unambiguous prefix (``--safe``).
        if len(flag) >= len("--saf") and _SAFE_MODE_FLAG.startswith(flag.partition("=")[0]):
            raise _Conflict("Hermes loads no plugins with --safe-mode; launch without it to "
                            "see this agent's state")
    if env.get("HERMES_SAFE_MODE", "").strip().lower() in _TRUTHY:
        raise _Conflict("HERMES_SAFE_MODE is set, so Hermes loads no plugins; unset it to see "
                        "this agent's state")

implementation = HermesAttention
