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
``plugin.yaml`` of kind ``backend`` and the observer as ``__init__.py``), and
``HERMES_BUNDLED_PLUGINS`` pointing there. The user's home, config and plugins
are neither read nor written; the user's ``plugins.disabled`` still wins.
The observer only observes (its callbacks return ``None``) and is inert
without the launch's ``CLANKER_ATTENTION_*`` variables.

Declined (``None``): ``--safe-mode`` or ``HERMES_SAFE_MODE`` (Hermes skips
every plugin), a bundled directory that already has a ``clanker-attention``
entry, or a Hermes installation whose bundled directory cannot be found.
"""

from __future__ import annotations

import logging
import shutil
import stat
from pathlib import Path
from typing import Final

from clanker.attention.capability import AttachmentContext, AttachmentPlan, Declined
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

    def prepare(self, context: AttachmentContext) -> AttachmentPlan | Declined:
        env = dict(context.env)
        try:
            _check(context.user_flags, env)
        except _Conflict as conflict:
            return Declined(reason=str(conflict))
        source = bundled_plugins_dir(context)
        if source is None:
            return Declined(reason="Hermes's bundled plugin directory was not found, so "
                                   "clanker's observer cannot be added")
        entries = sorted(source.iterdir())
        if any(entry.name == PLUGIN_NAME for entry in entries):
            # Something else already carries this name; it is not ours to hide.
            return Declined(reason=f"a plugin named {PLUGIN_NAME} is already in {source}")
        mirror = context.private_dir / "hermes-plugins"
        mirror.mkdir(mode=0o700)
        for entry in entries:
            (mirror / entry.name).symlink_to(entry)
        plugin = mirror / PLUGIN_NAME
        plugin.mkdir(mode=0o700)
        (plugin / "plugin.yaml").write_text(MANIFEST, encoding="utf-8")
        shutil.copyfile(OBSERVER_SOURCE, plugin / "__init__.py")
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
