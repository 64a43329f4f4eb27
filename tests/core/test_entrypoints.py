"""Entry points read from the metadata directly are exactly importlib.metadata's."""

from __future__ import annotations

import importlib.machinery
import sys
from importlib.metadata import entry_points as metadata_entry_points
from pathlib import Path

import pytest

from clanker import entrypoints
from clanker.entrypoints import FoundEntryPoint, entry_points
from clanker.registry import ENTRY_POINT_GROUP
from tests.conftest import STANDARD_FIND_DISTRIBUTIONS


def expected(group: str) -> list[FoundEntryPoint]:
    found = []
    for ep in metadata_entry_points(group=group):
        dist = ep.dist
        found.append(FoundEntryPoint(
            name=ep.name, value=ep.value,
            distribution=None if dist is None else (dist.metadata["Name"], dist.version)))
    return found


def no_fallback(group: str) -> list[FoundEntryPoint]:
    raise AssertionError("the direct read handed this layout to importlib.metadata")


@pytest.fixture(autouse=True)
def standard_finders(monkeypatch: pytest.MonkeyPatch) -> None:
    """The standard finders, as a process that never imported the importlib_metadata
    backport has them: another test may have (see ``STANDARD_FIND_DISTRIBUTIONS``),
    and the direct read rightly leaves such a process to importlib.metadata."""
    finder = importlib.machinery.PathFinder
    if "find_distributions" not in finder.__dict__ and STANDARD_FIND_DISTRIBUTIONS:
        monkeypatch.setattr(finder, "find_distributions", STANDARD_FIND_DISTRIBUTIONS,
                            raising=False)
    monkeypatch.setattr(sys, "meta_path", [
        entry for entry in sys.meta_path
        if getattr(entry, "find_distributions", None) is None or entry is finder])


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "site"
    directory.mkdir()
    monkeypatch.syspath_prepend(str(directory))
    return directory


def dist_info(site: Path, stem: str, name: str, entries: str, version: str = "1.0") -> Path:
    info = site / f"{stem}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                                   "Summary: x\n\nbody: not a header\n")
    (info / "entry_points.txt").write_text(entries)
    return info


@pytest.mark.parametrize("group", [ENTRY_POINT_GROUP, "console_scripts", "pytest11", "none.such"])
def test_the_installed_entry_points_are_importlibs(group: str) -> None:
    assert entry_points(group) == expected(group)


def test_the_bundled_plugins_are_found_by_the_direct_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(entrypoints, "_from_importlib", no_fallback)
    assert {ep.name for ep in entry_points(ENTRY_POINT_GROUP)} >= {
        "agy", "claude", "codex", "hermes", "omp", "opencode", "pi"}


def test_shadowed_duplicate_and_odd_entries_read_alike(site: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    dist_info(site, "clanker_zed-1.2.3", "clanker-zed",
              "# a comment\n[console_scripts]\nzed = zed.cli:main\n\n"
              f"[{ENTRY_POINT_GROUP}]\n  zed =  zed_plugin:plugin.inner  \nyak=yak_plugin\n")
    # The same distribution later on the path is shadowed, as importlib.metadata does.
    later = tmp_path / "later"
    later.mkdir()
    monkeypatch.setattr(sys, "path", [*sys.path, str(later)])
    dist_info(later, "Clanker.Zed-9.0", "clanker-zed", f"[{ENTRY_POINT_GROUP}]\nzed = shadow\n")
    dist_info(site, "clanker_other-2.0", "Clanker-Other  ", f"[{ENTRY_POINT_GROUP}]\nzed = z2\n",
              version="2.0")
    dist_info(site, "unrelated-1.0", "unrelated", "[other]\nx = y\n")
    (site / "no_entries-1.0.dist-info").mkdir()
    (site / "no_entries-1.0.dist-info" / "METADATA").write_text("Name: no-entries\n")
    monkeypatch.setattr(entrypoints, "_from_importlib", no_fallback)
    found = entry_points(ENTRY_POINT_GROUP)
    assert found == expected(ENTRY_POINT_GROUP)
    assert ("zed", "zed_plugin:plugin.inner", ("clanker-zed", "1.0")) in [
        (ep.name, ep.value, ep.distribution) for ep in found]


@pytest.mark.parametrize("layout", ["egg-info", "zip", "upper-case suffix", "folded header",
                                    "line without =", "no metadata"])
def test_an_unusual_layout_is_left_to_importlib(site: Path, layout: str,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    entries = f"[{ENTRY_POINT_GROUP}]\nzed = zed_plugin\n"
    if layout == "egg-info":
        (site / "legacy.egg-info").mkdir()
        (site / "legacy.egg-info" / "PKG-INFO").write_text("Name: legacy\nVersion: 1\n")
    elif layout == "zip":
        archive = site / "bundle.zip"
        archive.write_bytes(b"PK\x05\x06" + bytes(18))  # an empty zip archive
        monkeypatch.syspath_prepend(str(archive))
    elif layout == "upper-case suffix":
        dist_info(site, "zed-1.0", "zed", entries).rename(site / "zed-1.0.DIST-INFO")
    elif layout == "folded header":
        info = dist_info(site, "zed-1.0", "zed", entries)
        (info / "METADATA").write_text("Name: zed\nVersion: 1.0\nSummary: a\n  folded line\n")
    elif layout == "line without =":
        dist_info(site, "zed-1.0", "zed", f"[{ENTRY_POINT_GROUP}]\nzed\n")
    else:
        (dist_info(site, "zed-1.0", "zed", entries) / "METADATA").unlink()
    asked: list[str] = []
    real = entrypoints._from_importlib
    monkeypatch.setattr(entrypoints, "_from_importlib",
                        lambda group: asked.append(group) or real(group))
    try:
        found = entry_points(ENTRY_POINT_GROUP)
    except TypeError:  # importlib.metadata's own answer to a line without "="
        assert layout == "line without ="
    else:
        assert found == expected(ENTRY_POINT_GROUP)
    assert asked == [ENTRY_POINT_GROUP]


def test_loading_follows_the_attribute_path() -> None:
    ep = FoundEntryPoint(name="x", value="clanker.registry:Registry.from_plugins",
                         distribution=None)
    from clanker.registry import Registry

    assert ep.load() == Registry.from_plugins
    with pytest.raises(ValueError, match="malformed"):
        FoundEntryPoint(name="x", value="not a value!", distribution=None).load()
