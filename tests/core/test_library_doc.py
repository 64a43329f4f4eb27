"""Every example in docs/library.md runs, and prints exactly the output shown after it.

The examples run in a throwaway home: a copy of the Claude Code transcripts
captured in tests/fixtures/claude/sessions, and a stand-in ``claude`` that
answers ``--version`` as Claude Code 2.1.197 does (its captured output) and
fails everything else. Nothing else is on ``PATH``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from clanker.testing.doubles import write_script

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "library.md"
FIXTURES = ROOT / "tests" / "fixtures" / "claude"
_BLOCK = re.compile(r"```python\n(?P<code>.*?)```\n(?:\n```text\n(?P<out>.*?)```\n)?", re.S)


def examples() -> list[tuple[str, str | None]]:
    return [(m["code"], m["out"]) for m in _BLOCK.finditer(DOC.read_text())]


def test_the_page_has_examples_with_their_output() -> None:
    found = examples()
    assert len(found) >= 5
    assert all(out is not None for _, out in found)


@pytest.fixture
def home(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    shutil.copytree(FIXTURES / "sessions" / "claude-config", home / ".claude")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    version = (FIXTURES / "version.txt").read_text()
    write_script(bin_dir, "claude", f"""
        import sys
        if sys.argv[1:] == ["--version"]:
            sys.stdout.write({version!r})
            sys.exit(0)
        sys.exit(2)
    """)
    return {"HOME": str(home), "CLANKER_HOME": str(tmp_path / "clanker"),
            "PATH": f"{bin_dir}:{os.path.dirname(sys.executable)}:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            # The examples never reach a real credential store (a macOS Keychain
            # would answer whatever the environment): keyring's own "none" backend.
            "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring"}


@pytest.mark.parametrize("index", range(len(examples())))
def test_the_example_prints_what_the_page_shows(index: int, home: dict[str, str],
                                                tmp_path: Path) -> None:
    code, expected = examples()[index]
    script = tmp_path / "example.py"
    script.write_text(code)
    done = subprocess.run([sys.executable, str(script)], env=home, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == expected
