"""The terminal transport of the in-process extensions, on this machine, and host paths.

The real extension files (OpenCode's plugin, Pi's and Oh My Pi's extensions)
run under ``node`` in the double of :mod:`test_remote_attention_extensions`,
on a pseudo-terminal this test owns, with the environment a launch on a host
gives them. What they write there goes through the launcher's own
:class:`~clanker.attention.frames.FrameExtractor`: every frame must be whole,
carry the credential file's terminal and token, and nothing of it may reach
the person's terminal. A credential file that is not private, not this
user's or a link leaves the extension inert.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import unquote, urlparse

import pytest

from clanker.attention.capability import grid_route
from clanker.attention.extension_source import combined
from clanker.attention.frames import FrameExtractor
from clanker.launch.attention import host_paths, remote_credential
from clanker_omp.attention import EXTENSION as OMP_EXTENSION
from clanker_opencode.attention import PLUGIN_SOURCE, plugin_config
from clanker_pi.attention import EXTENSION as PI_EXTENSION
from tests.core.ssh.test_remote_attention_extensions import _DOUBLE, _EXPECTED, _STEPS
from tests.helpers import run_on_terminal

_SOURCES = {"pi": PI_EXTENSION, "omp": OMP_EXTENSION, "opencode": PLUGIN_SOURCE}
_TOKEN = "c" * 64

needs_node = pytest.mark.skipif(shutil.which("node") is None,
                                reason="the extensions' JavaScript runs under node")


def _place(tmp_path: Path, harness: str, *, mode: int = 0o600) -> tuple[list[str], dict[str, str]]:
    """The double, the extension, its credential file and the steps in ``tmp_path``;
    the double's argv and environment as a launch on a host gives them."""
    double = tmp_path / "double.js"
    double.write_text(_DOUBLE)
    launch = tmp_path / "launch"
    launch.mkdir(mode=0o700)
    name = "clanker-attention" + _SOURCES[harness].suffix
    (launch / name).write_bytes(combined(_SOURCES[harness]))  # the file prepare() stages
    credential = launch / "credential"
    credential.write_bytes(remote_credential("t-host", _TOKEN))
    credential.chmod(mode)
    (tmp_path / "steps.json").write_text(json.dumps(_STEPS[harness]))
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "TERM": "xterm",
           "CLANKER_ATTENTION_TRANSPORT": "tty",
           "CLANKER_ATTENTION_CREDENTIAL": str(credential)}
    argv = ["node", str(double)]
    if harness == "opencode":
        env["OPENCODE_CONFIG_CONTENT"] = plugin_config(launch / name)
    else:
        argv += ["--extension", str(launch / name)]
    return argv, env


def _run(argv: list[str], env: dict[str, str], *, delivering: bool = True
         ) -> tuple[int, str, list[dict[str, Any]], int]:
    """Run the double on a terminal of ours, answering each ``fired`` line (when
    ``delivering``, the n-th step's only once n frames past the double's own have come:
    the extension writes them on its own schedule); return its status, what the person
    would see, the frames' requests and how many were dropped."""
    frames: list[dict[str, Any]] = []

    def sink(payload: bytes) -> bool:
        frames.append(json.loads(payload))
        return True

    extractor = FrameExtractor(sink)
    shown = bytearray()
    answered = 0

    def answer(chunk: bytes) -> bytes:
        nonlocal answered
        shown.extend(extractor.feed(chunk))
        fired = shown.decode("utf-8", "replace").replace("\r", "").count("\nfired ")
        # The first is "ready"; each step after it delivers one frame at least.
        before = answered
        while answered < fired and (not delivering or len(frames) - 1 >= answered):
            answered += 1
        return b"\n" * (answered - before)

    status = run_on_terminal(argv, env, answer)
    shown += extractor.flush()
    return status, shown.decode("utf-8", "replace"), frames, extractor.dropped


@needs_node
@pytest.mark.parametrize("harness", sorted(_SOURCES))
def test_each_delivery_is_one_whole_frame_on_the_extension_s_terminal(
    tmp_path: Path, harness: str
) -> None:
    argv, env = _place(tmp_path, harness)
    status, shown, frames, dropped = _run(argv, env)
    assert status == 0, shown
    # The double's own forged frame, then one of the extension's per step at least.
    assert frames[0]["terminal"] == "t-forged"
    mine = frames[1:]
    assert len(mine) >= len(_EXPECTED[harness]), shown
    assert all((f["v"], f["op"], f["terminal"], f["token"]) == (1, "deliver", "t-host", _TOKEN)
               for f in mine), mine
    events = [e["event"] for f in mine for e in f["envelopes"]]
    assert "turn_started" in events and "turn_completed" in events, events
    assert dropped == 0
    assert "\x1b]7717" not in shown and _TOKEN not in shown, shown
    assert "fired ready" in shown, "ordinary output goes through"


@needs_node
@pytest.mark.parametrize("harness", sorted(_SOURCES))
@pytest.mark.parametrize("flaw", ["group-readable", "link"])
def test_a_credential_file_that_is_not_private_leaves_the_extension_inert(
    tmp_path: Path, harness: str, flaw: str
) -> None:
    argv, env = _place(tmp_path, harness, mode=0o640 if flaw == "group-readable" else 0o600)
    if flaw == "link":
        link = tmp_path / "elsewhere"
        link.symlink_to(env["CLANKER_ATTENTION_CREDENTIAL"])
        env["CLANKER_ATTENTION_CREDENTIAL"] = str(link)
    status, shown, frames, _ = _run(argv, env, delivering=False)
    assert status == 0, shown
    assert [f["terminal"] for f in frames] == ["t-forged"], "nothing of the extension's"


def test_staging_paths_become_the_host_s_in_each_form() -> None:
    """A space, a quote and a non-ASCII letter: the ``file://`` URI OpenCode's
    configuration carries is percent-encoded, and JSON escapes the rest, so a plain
    string replacement alone would leave this machine's path there."""
    staged = Path('/home/a b/é"x/.local/state/clanker/run/opencode-1/pass-1')
    host = "/home/u v/ü/.local/state/clanker/attention/0123abcd"
    config = host_paths(plugin_config(staged / "clanker-attention.mjs"), staged, host)
    uri = json.loads(config)["plugin"][0]
    assert uri == PurePosixPath(f"{host}/clanker-attention.mjs").as_uri()
    assert unquote(urlparse(uri).path) == f"{host}/clanker-attention.mjs"
    document = json.dumps({"path": f"{staged}/settings.json"})
    assert json.loads(host_paths(document, staged, host)) == {"path": f"{host}/settings.json"}
    assert host_paths(f"--extension={staged}/x.js", staged, host) == f"--extension={host}/x.js"
    assert host_paths("unrelated", staged, host) == "unrelated"


def test_a_staging_path_left_after_mapping_is_refused() -> None:
    staged = Path("/tmp/stage/pass-1")
    with pytest.raises(ValueError, match="not mapped"):
        host_paths(f"{staged}/x", staged, f"{staged}/again")


def test_an_extension_s_route_is_the_socket_s_or_the_terminal_s_never_half_of_one() -> None:
    socket = {"CLANKER_ATTENTION_SOCKET": "/run/g.sock", "CLANKER_ATTENTION_TERMINAL": "t-1",
              "CLANKER_ATTENTION_TOKEN": _TOKEN}
    assert grid_route(socket)
    assert not grid_route({**socket, "CLANKER_ATTENTION_TOKEN": ""})
    tty = {"CLANKER_ATTENTION_TRANSPORT": "tty", "CLANKER_ATTENTION_CREDENTIAL": "/h/credential"}
    assert grid_route(tty)
    assert not grid_route({"CLANKER_ATTENTION_TRANSPORT": "tty"})
    assert not grid_route({**socket, "CLANKER_ATTENTION_TRANSPORT": "tty"}), \
        "on a host the socket's variables are not a route"
