"""Hypothesis strategies for the values that cross clanker's boundaries."""

from __future__ import annotations

import string

from hypothesis import strategies as st

__all__ = [
    "absolute_paths",
    "harness_ids",
    "json_values",
    "junk_text",
    "model_ids",
    "user_flags",
]


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


def json_values(max_leaves: int = 12) -> st.SearchStrategy[object]:
    """Any JSON value: what a changed or broken harness might put where a field was."""
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=30),
    )
    return st.recursive(
        scalars,
        lambda children: st.lists(children, max_size=4)
        | st.dictionaries(st.text(max_size=12), children, max_size=4),
        max_leaves=max_leaves,
    )
