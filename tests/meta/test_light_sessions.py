"""Knowing where a store is costs no reader: each bundled plugin's `sessions` module
answers `store_roots` without importing its `summaries`, core's store readers
(`clanker.stores`) or Pi's format reader (`clanker.pistore`).

The listing over empty stores (`clanker.sessions.empty`) asks every provider for its
roots and nothing else, so this is what keeps its start-up free of them. Each plugin
is asked in a fresh interpreter, over an empty home, after the modules that start-up
imports anyway.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HARNESSES = ("agy", "claude", "codex", "hermes", "omp", "opencode", "pi")
# Modules no store_roots may need.
READERS = ("clanker.stores", "clanker.pistore", "clanker.sessions.filestore",
           "clanker.environment.files", "clanker.environment.lines")

_PROBE = """
import importlib, json, sys
import clanker.sessions.empty
from clanker.environment.local import LocalFiles

harness, home = sys.argv[1], sys.argv[2]
environ = {"HOME": home, "PATH": ""}
capability = importlib.import_module(f"clanker_{harness}.sessions").implementation()
roots = capability.store_roots(environ, LocalFiles())
print(json.dumps({"roots": [str(root) for root in roots],
                  "modules": sorted(name for name in sys.modules if name.startswith("clanker"))}))
"""


@pytest.mark.parametrize("harness", HARNESSES)
def test_store_roots_import_no_reader(harness: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    done = subprocess.run([sys.executable, "-c", _PROBE, harness, str(home)],
                          capture_output=True, text=True, check=True, timeout=60)
    found = json.loads(done.stdout)
    modules = set(found["modules"])
    assert f"clanker_{harness}.sessions" in modules
    assert f"clanker_{harness}.summaries" not in modules
    assert sorted(modules & set(READERS)) == []
    # Every root is the store's own, found from the home it was given (OpenCode lists
    # through its command: none).
    assert all(root.startswith(str(home) + "/") for root in found["roots"])
    assert bool(found["roots"]) == (harness != "opencode")


def test_a_scan_imports_the_reader(tmp_path: Path) -> None:
    """The other half: the reader is what a scan loads, on its first use."""
    probe = """
import asyncio, sys
from clanker.environment.local import LocalFiles
from clanker.sessions.cache import SummaryCache
from clanker.sessions.capability import SessionsContext
from clanker_codex.sessions import implementation

environ = {"HOME": sys.argv[1], "PATH": ""}
store = LocalFiles()
context = SessionsContext(harness="codex", executor=None, files=store, environ=environ,
                          cache=SummaryCache("codex", None))
(store_root,) = implementation().store_roots(environ, store)
import os; os.makedirs(store_root)
asyncio.run(implementation().discover(context))
print("clanker_codex.summaries" in sys.modules)
"""
    home = tmp_path / "home"
    home.mkdir()
    done = subprocess.run([sys.executable, "-c", probe, str(home)],
                          capture_output=True, text=True, check=True, timeout=60)
    assert done.stdout.strip() == "True"
