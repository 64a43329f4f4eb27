"""Lint and type checks run with the suite, so CI enforces them too."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def run_tool(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    tool = shutil.which(name, path=str(BIN))
    if tool is None:
        pytest.skip(f"{name} is not installed")
    return subprocess.run([tool, *args], cwd=ROOT, capture_output=True, text=True, check=False)


def test_ruff() -> None:
    done = run_tool("ruff", "check", "--no-cache", ".")
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_strict() -> None:
    done = run_tool("mypy")
    assert done.returncode == 0, done.stdout + done.stderr
