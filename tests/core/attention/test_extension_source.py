"""The in-process extensions' shared transport: one source, combined into each staged file.

Each provider's ``prepare()`` stages its extension in the launch's private directory; the
staged file must hold the core's transport exactly once (in place of the marker line) and
load under ``node``, where the transport's functions are called while the module starts.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from importlib.resources import files
from pathlib import Path

import pytest

from clanker.attention.capability import AttachmentPlan, AttentionCapability
from clanker.attention.extension_source import (
    MARKER,
    TRANSPORT,
    ExtensionSourceError,
    combined,
)
from clanker.testing.doubles import attachment_context
from clanker_omp.attention import EXTENSION as OMP_EXTENSION
from clanker_omp.attention import OmpAttention
from clanker_opencode.attention import PLUGIN_SOURCE, OpenCodeAttention
from clanker_pi.attention import EXTENSION as PI_EXTENSION
from clanker_pi.attention import PiAttention

NODE = shutil.which("node")

_HARNESSES: dict[str, tuple[type[AttentionCapability], Path, tuple[str, ...]]] = {
    "omp": (OmpAttention, OMP_EXTENSION, ("omp", "launch")),
    "pi": (PiAttention, PI_EXTENSION, ("pi",)),
    "opencode": (OpenCodeAttention, PLUGIN_SOURCE, ("opencode",)),
}

# Loads the staged module the way each harness does (a dynamic import of its URL) and calls
# Pi's factory, which reads its route only then; omp and OpenCode read theirs at load
# (`route()`, from the transport: a missing transport fails there).
_LOADER = """
const module = await import(process.argv[1]);
const factory = module.default ?? module.ClankerAttention;
if (typeof factory !== "function") process.exit(3);
if (process.argv[2] === "pi") factory({ on() { throw new Error("inert without a route"); } });
process.stdout.write("loaded\\n");
"""


def _staged(harness: str, tmp_path: Path) -> Path:
    """The file ``prepare()`` of ``harness`` writes for a launch on an SSH host."""
    provider, _, argv = _HARNESSES[harness]
    private = tmp_path / "private"
    private.mkdir()
    context = attachment_context(argv=argv, cwd="/tmp", private_dir=private, env={
        "CLANKER_ATTENTION_TRANSPORT": "tty",
        "CLANKER_ATTENTION_CREDENTIAL": str(tmp_path / "credential")})
    assert isinstance(provider().prepare(context), AttachmentPlan)
    [staged] = private.iterdir()
    return staged


@pytest.mark.parametrize("harness", sorted(_HARNESSES))
def test_the_staged_file_holds_the_transport_once_in_place_of_the_marker(
        harness: str, tmp_path: Path) -> None:
    staged = _staged(harness, tmp_path).read_bytes()
    transport = TRANSPORT.read_bytes()
    assert staged.count(transport) == 1
    for function in (b"hostCredential", b"writeFrame", b"route", b"deliverRequest"):
        assert staged.count(b"function " + function + b"(") == 1
    assert MARKER not in staged
    source = _HARNESSES[harness][1].read_bytes()
    assert source.count(MARKER) == 1 and b"function deliverRequest(" not in source
    assert staged == source.replace(MARKER, transport)


@pytest.mark.skipif(NODE is None, reason="the extensions' JavaScript runs under node")
@pytest.mark.parametrize("harness", sorted(_HARNESSES))
def test_the_staged_file_loads_under_node(harness: str, tmp_path: Path) -> None:
    assert NODE is not None
    staged = _staged(harness, tmp_path)
    module = tmp_path / "clanker-attention.mjs"  # node 20 takes ES modules from .mjs only
    module.write_bytes(staged.read_bytes())
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path),
           "CLANKER_ATTENTION_TRANSPORT": "tty",
           "CLANKER_ATTENTION_CREDENTIAL": str(tmp_path / "credential")}  # absent: inert
    done = subprocess.run([NODE, "--input-type=module", "-e", _LOADER, module.as_uri(), harness],
                          env=env, capture_output=True, text=True, timeout=60, check=False)
    assert (done.returncode, done.stdout, done.stderr) == (0, "loaded\n", "")


@pytest.mark.skipif(NODE is None, reason="the extensions' JavaScript runs under node")
def test_a_source_without_the_transport_fails_where_it_needs_it(tmp_path: Path) -> None:
    """The load test above can fail: the uncombined omp source calls a missing function."""
    assert NODE is not None
    module = tmp_path / "clanker-attention.mjs"
    module.write_bytes(OMP_EXTENSION.read_bytes())
    env = {"PATH": os.environ["PATH"], "CLANKER_ATTENTION_TRANSPORT": "tty",
           "CLANKER_ATTENTION_CREDENTIAL": str(tmp_path / "credential")}
    done = subprocess.run([NODE, "--input-type=module", "-e", _LOADER, module.as_uri(), "omp"],
                          env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode != 0 and "route is not defined" in done.stderr


@pytest.mark.parametrize("body", [
    b"const a = 1;\n",
    MARKER + b"const a = 1;\n" + MARKER,
    b"const a = 1; " + MARKER,  # not a line of its own
])
def test_a_source_without_exactly_one_marker_line_is_refused(tmp_path: Path, body: bytes) -> None:
    source = tmp_path / "extension.mjs"
    source.write_bytes(body)
    with pytest.raises(ExtensionSourceError, match="exactly once"):
        combined(source)


def test_the_transport_ships_as_package_data() -> None:
    shipped = files("clanker.attention") / "extension_transport.js"
    assert shipped.is_file() and shipped.read_bytes() == TRANSPORT.read_bytes()
    # A fragment: no declaration of its own that an ES module allows only at its top.
    lines = TRANSPORT.read_bytes().splitlines()
    assert not [line for line in lines if line.startswith((b"import ", b"export "))]
