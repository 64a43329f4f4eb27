"""The README's install line puts a working `clanker` with every bundled plugin on PATH."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.meta.test_setup import ROOT, setup_commands


def test_the_install_line_installs_clanker_with_the_bundled_plugins(tmp_path: Path) -> None:
    uv = os.environ.get("UV") or shutil.which("uv")  # uv names itself to what it runs
    if uv is None:
        pytest.skip("uv is not available to this test run")
    [line] = setup_commands()[2:]
    words = shlex.split(line)
    assert words[:3] == ["uv", "tool", "install"]
    env = {**os.environ, "UV_TOOL_DIR": str(tmp_path / "tools"),
           "UV_TOOL_BIN_DIR": str(tmp_path / "bin"), "CLANKER_HOME": str(tmp_path / "home")}
    env.pop("VIRTUAL_ENV", None)
    done = subprocess.run([uv, *words[1:]], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    clanker = tmp_path / "bin" / "clanker"
    listed = subprocess.run([str(clanker), "plugins", "--json"], env=env, capture_output=True,
                            text=True, timeout=120, check=True)
    report = json.loads(listed.stdout)
    bundled = sorted(p.name for p in (ROOT / "plugins").iterdir()
                     if (p / "pyproject.toml").exists())
    assert sorted(p["harness"] for p in report["plugins"]) == bundled
    assert report["refused"] == []
