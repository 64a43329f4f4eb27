"""Hypothesis strategies for the values that cross clanker's boundaries."""

from __future__ import annotations

import copy
import json
import string
from collections.abc import Sequence
from typing import Any, TypeVar

from hypothesis import strategies as st

__all__ = [
    "absolute_paths",
    "awkward_values",
    "documents_with_one_value_replaced",
    "documents_with_values_replaced",
    "harness_ids",
    "json_line_records",
    "json_values",
    "junk_text",
    "model_ids",
    "prefixes",
    "user_flags",
]

_Text = TypeVar("_Text", str, bytes)


def harness_ids() -> st.SearchStrategy[str]:
    """Valid harness ids."""
    return st.from_regex(r"[a-z][a-z0-9-]{1,31}", fullmatch=True)


def _flag() -> st.SearchStrategy[str]:
    plain = st.text(
        alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\0"),
        min_size=1,
        max_size=24,
    )
    option = st.builds(
        lambda dashes, name: dashes + name,
        st.sampled_from(["-", "--"]),
        st.text(alphabet=string.ascii_lowercase + "-", min_size=1, max_size=16),
    )
    # Values that look like clanker's own or the harness's own flags must stay opaque too.
    lookalikes = st.sampled_from(
        ["--model", "-m", "--resume", "--fork", "--session", "resume", "fork", "--", "-c", "=x"]
    )
    return st.one_of(option, lookalikes, plain)


def user_flags() -> st.SearchStrategy[tuple[str, ...]]:
    """Opaque user flags: options, values, lookalikes of real flags, unicode."""
    return st.lists(_flag(), max_size=8).map(tuple)


def model_ids() -> st.SearchStrategy[str]:
    """Model ids as people type them: ``name``, ``provider/name``, ``name:variant``."""
    part = st.text(alphabet=string.ascii_letters + string.digits + "-._[]", min_size=1, max_size=20)
    return st.one_of(
        part,
        st.builds(lambda a, b: f"{a}/{b}", part, part),
        st.builds(lambda a, b: f"{a}:{b}", part, part),
    ).filter(lambda s: s == s.strip())


def absolute_paths() -> st.SearchStrategy[str]:
    """Absolute POSIX paths, including spaces and unicode."""
    segment = st.text(
        alphabet=st.characters(blacklist_categories=["Cs", "Cc"], blacklist_characters="/\0"),
        min_size=1,
        max_size=12,
    ).filter(lambda s: s not in (".", ".."))
    return st.lists(segment, min_size=1, max_size=5).map(lambda parts: "/" + "/".join(parts))


def junk_text() -> st.SearchStrategy[str]:
    """What a broken or changed harness might print: garbage, half JSON, huge lines."""
    return st.one_of(
        st.text(max_size=300),
        st.sampled_from(["", "{", "[]", "null", '{"models":', "\x1b[31merror\x1b[0m", "ok\n" * 5]),
        st.builds(lambda s: "{" + s, st.text(max_size=200)),
        st.integers(min_value=0, max_value=10).map(lambda n: "x" * (n * 1000)),
    )


def json_values(
    max_leaves: int = 12,
    *,
    keys: st.SearchStrategy[str] | None = None,
    floats: st.SearchStrategy[float] | None = None,
) -> st.SearchStrategy[object]:
    """Any JSON value: what a changed or broken harness might put where a field was.

    ``keys`` are the object keys (default: short text); pass the field names a
    format uses to build documents that look like it. ``floats`` are the
    numbers with a fraction (default: finite ones); pass ``st.floats()`` to add
    NaN and the infinities, which Python's ``json`` reads and writes though
    strict JSON has neither.
    """
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=False, allow_infinity=False) if floats is None else floats,
        st.text(max_size=30),
    )
    return st.recursive(
        scalars,
        lambda children: st.lists(children, max_size=4)
        | st.dictionaries(st.text(max_size=12) if keys is None else keys, children, max_size=4),
        max_leaves=max_leaves,
    )


def prefixes(texts: Sequence[_Text]) -> st.SearchStrategy[_Text]:
    """A prefix of one of ``texts`` (empty and whole included): a real output cut short.

    What a harness killed mid-write, a full disk or a file read while it is
    written leaves; with one text, ``prefixes([whole])`` cuts only that one.
    """
    return st.sampled_from(texts).flatmap(
        lambda text: st.integers(min_value=0, max_value=len(text)).map(lambda cut: text[:cut])
    )


def _places(value: object, path: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    """The path (keys and indexes) to every value inside ``value``, ``value`` itself first."""
    found = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _places(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _places(item, (*path, index))
    return found


@st.composite
def _replaced(
    draw: st.DrawFn, document: object, values: st.SearchStrategy[object], at_most: int
) -> object:
    changed: Any = copy.deepcopy(document)
    for _ in range(draw(st.integers(min_value=1, max_value=at_most))):
        path = draw(st.sampled_from(_places(changed)[1:]))
        parent = changed
        for key in path[:-1]:
            parent = parent[key]
        parent[path[-1]] = draw(values)
    return changed


def documents_with_values_replaced(
    document: object, values: st.SearchStrategy[object] | None = None, *, at_most: int = 3
) -> st.SearchStrategy[object]:
    """Copies of ``document`` (a decoded JSON object or array) with one to ``at_most``
    values replaced, each at any depth, by one of ``values`` (default: ``json_values()``).

    Each replacement is drawn from the document as the earlier ones left it;
    ``document`` itself is never changed. It needs at least one value inside.
    """
    return _replaced(document, json_values() if values is None else values, at_most)


def documents_with_one_value_replaced(
    document: object, values: st.SearchStrategy[object] | None = None
) -> st.SearchStrategy[object]:
    """Copies of ``document`` with one value, at any depth, replaced by one of ``values``."""
    return documents_with_values_replaced(document, values, at_most=1)


def json_line_records(
    kinds: Sequence[str],
    keys: Sequence[str],
    values: st.SearchStrategy[object],
    *,
    body: tuple[str, Sequence[str], Sequence[str]] | None = None,
    type_key: str = "type",
    compact: bool = False,
    max_records: int = 8,
) -> st.SearchStrategy[bytes]:
    """Files of JSON lines in a harness's record shape with values of any type in its
    fields: one to ``max_records`` records, each ``{type_key: one of kinds}`` with some
    of ``keys`` set to ``values``. ``body`` is ``(key, kinds, body_keys)``: records of
    those kinds also carry ``key``, an object with some of ``body_keys``. ``compact``
    writes without spaces, as JavaScript's ``JSON.stringify`` and serde do."""
    separators = (",", ":") if compact else None

    def record(kind: str, fields: dict[str, object], nested: dict[str, object]) -> bytes:
        value: dict[str, object] = {type_key: kind, **fields}
        if body is not None and kind in body[1]:
            value[body[0]] = nested
        return json.dumps(value, separators=separators).encode() + b"\n"

    nested_keys = body[2] if body is not None else ["-"]
    records = st.builds(
        record,
        st.sampled_from(list(kinds)),
        st.dictionaries(st.sampled_from(list(keys)), values, max_size=min(len(keys), 7)),
        st.dictionaries(st.sampled_from(list(nested_keys)), values,
                        max_size=min(len(nested_keys), 5)),
    )
    return st.lists(records, min_size=1, max_size=max_records).map(b"".join)


_AWKWARD: tuple[object, ...] = (
    "", " ", "\x00", "/a\x00b", "\ud800", "/\udcff", "~", "relative",
    "0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00", 1e308, -1, 2**70,
    float("nan"), "x" * 10_000,
)


def awkward_values(extra: Sequence[object] = ()) -> st.SearchStrategy[object]:
    """What a changed or broken harness might write in a field: any JSON value (NaN and
    the infinities too), and the values that trip parsers (blank, NUL, lone surrogates,
    relative paths, times at the ends of the calendar, huge numbers and texts), plus
    ``extra`` (a format's own ids and markers)."""
    return st.one_of(json_values(floats=st.floats()), st.sampled_from([*_AWKWARD, *extra]))
