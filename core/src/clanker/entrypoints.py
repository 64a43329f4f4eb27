"""The entry points of one group, read from the installed metadata directly.

Importing :mod:`importlib.metadata` costs more than everything else the
registry does at start-up (it brings in ``email``, ``zipfile``, ``csv`` and
more). The layout every installer writes today is simple: ``*.dist-info``
directories on ``sys.path``, each with a ``METADATA`` file and perhaps an
``entry_points.txt``. For exactly that layout this module finds the same entry
points, in the same order, with the same distribution names and versions as
``importlib.metadata.entry_points(group=...)``, by listing the ``sys.path``
directories and reading those files. Anything else (a zip or egg on the path,
an ``*.egg-info``, a finder of its own on ``sys.meta_path``, a file it cannot
read the way ``importlib.metadata`` does) is handed to ``importlib.metadata``
itself, so the answer never depends on which path found it.
"""

from __future__ import annotations

import functools
import importlib
import os
import re
import sys
from collections.abc import Iterable
from typing import Final

from attrs import frozen

__all__ = ["FoundEntryPoint", "entry_points"]

_SUFFIX: Final = ".dist-info"
_OTHER_METADATA: Final = (".egg-info", ".egg")
_VALUE: Final = re.compile(
    r"(?P<module>[\w.]+)\s*(:\s*(?P<attr>[\w.]+)\s*)?((?P<extras>\[.*\])\s*)?$")
_UNREADABLE: Final = (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError)


@frozen
class FoundEntryPoint:
    """One entry point: its name, its ``module:attribute`` value and its distribution."""

    name: str
    value: str
    distribution: tuple[str, str | None] | None
    """The distribution's ``Name`` and ``Version`` metadata."""

    def load(self) -> object:
        """Import the module and return the attribute the value names."""
        match = _VALUE.match(self.value)
        if match is None:
            raise ValueError(f"entry point {self.name}: malformed value {self.value!r}")
        module = importlib.import_module(match.group("module"))
        attributes = filter(None, (match.group("attr") or "").split("."))
        return functools.reduce(getattr, attributes, module)


class _Unusual(Exception):
    """The layout is one this module does not read: ask importlib.metadata."""


def entry_points(group: str) -> list[FoundEntryPoint]:
    """Every entry point of ``group``, as ``importlib.metadata.entry_points(group=group)``."""
    try:
        return _scan(group)
    except _Unusual:
        return _from_importlib(group)


def _from_importlib(group: str) -> list[FoundEntryPoint]:
    from importlib.metadata import entry_points as metadata_entry_points

    found = []
    for ep in metadata_entry_points(group=group):
        dist = getattr(ep, "dist", None)
        found.append(FoundEntryPoint(
            name=ep.name, value=ep.value,
            distribution=None if dist is None else (dist.metadata["Name"], dist.version)))
    return found


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower().replace("-", "_")


def _scan(group: str) -> list[FoundEntryPoint]:
    import importlib.machinery

    if any(getattr(finder, "find_distributions", None) is not None
           and finder is not importlib.machinery.PathFinder for finder in sys.meta_path):
        raise _Unusual("a finder of its own")
    seen: set[str] = set()
    found: list[FoundEntryPoint] = []
    for root in sys.path:
        for info in _infos(root):
            name = _normalize(os.path.basename(info)[: -len(_SUFFIX)].partition("-")[0])
            if name in seen:
                continue  # an earlier entry of sys.path has this distribution
            seen.add(name)
            found += _entries(info, group)
    return found


def _infos(root: str) -> Iterable[str]:
    """The ``*.dist-info`` directories in ``root``, grouped by name as importlib does."""
    if os.path.basename(root).lower().endswith(".egg"):
        raise _Unusual("an egg on sys.path")
    try:
        children = os.listdir(root or ".")
    except FileNotFoundError:
        return []
    except OSError as exc:  # a zip file, or a directory that cannot be listed
        raise _Unusual(type(exc).__name__) from exc
    grouped: dict[str, list[str]] = {}
    for child in children:
        low = child.lower()
        if low.endswith(_OTHER_METADATA) or (low.endswith(_SUFFIX)
                                            and not child.endswith(_SUFFIX)):
            raise _Unusual("metadata other than *.dist-info")
        if child.endswith(_SUFFIX):
            key = _normalize(low.rpartition(".")[0].partition("-")[0])
            grouped.setdefault(key, []).append(os.path.join(root, child))
    return [path for paths in grouped.values() for path in paths]


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except _UNREADABLE:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise _Unusual(type(exc).__name__) from exc


def _entries(info: str, group: str) -> list[FoundEntryPoint]:
    text = _read(os.path.join(info, "entry_points.txt"))
    if not text or f"[{group}]" not in text:
        return []
    section = None
    pairs = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line.strip("[]")
            continue
        if section is None:
            continue
        if "=" not in line:
            raise _Unusual("an entry point line without '='")
        if section == group:
            name, value = line.split("=", 1)
            pairs.append((name.strip(), value.strip()))
    if not pairs:
        return []
    distribution = _distribution(info)
    return [FoundEntryPoint(name=name, value=value, distribution=distribution)
            for name, value in pairs]


def _distribution(info: str) -> tuple[str, str | None]:
    text = _read(os.path.join(info, "METADATA"))
    if text is None:
        raise _Unusual("no METADATA")
    headers: dict[str, str] = {}
    for line in re.split(r"\r\n|\r|\n", text):
        if not line:
            break  # the body
        if line[0] in " \t" or line.startswith("From ") or not line.isprintable():
            raise _Unusual("a header the email parser would read its own way")
        key, colon, value = line.partition(":")
        if not colon:
            raise _Unusual("a line that is not a header")
        # As the email parser keeps it: leading blanks dropped, trailing ones kept.
        headers.setdefault(key.lower(), value.lstrip(" \t"))
    if "name" not in headers:
        raise _Unusual("no Name")
    return headers["name"], headers.get("version")
