"""What every subcommand shares: harness lookup, error mapping, output."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final, ParamSpec, TypeVar

import click

from clanker.cli import Output
from clanker.errors import HarnessCapabilityError

if TYPE_CHECKING:
    # Loading the registry imports every plugin: only commands that name a
    # harness pay for it (`clanker status` in a prompt must stay quick).
    from clanker.api import Clanker
    from clanker.registry import HarnessProvider

__all__ = [
    "CapabilityFailure",
    "DurationArgument",
    "Failure",
    "HarnessArgument",
    "capability_errors",
    "echo_json",
    "echo_json_listing",
    "echo_table",
    "json_option",
    "library",
    "relative_time",
    "run_async",
]

P = ParamSpec("P")
T = TypeVar("T")


def library() -> Clanker:
    """The library object this command works through (the CLI wires nothing itself)."""
    from clanker.api import Clanker

    return Clanker()


class Failure(click.ClickException):
    """A failure of a command, in the one format every command uses.

    On stderr: ``clanker: <message>`` (a capability failure's message is
    ``<harness>: <fixed sentence> (<safe detail>)``). Under ``--json``, stdout
    also gets ``{"error": {"kind", "message", "exit_code"}}``, so a program
    never has to parse stderr.
    """

    def __init__(self, message: str, exit_code: int, *, kind: str = "usage") -> None:
        super().__init__(message)
        self.exit_code = exit_code  # type: ignore[misc]  # click reads it per instance
        self.kind = kind

    def show(self, file: Any = None) -> None:
        click.echo(f"clanker: {self.message}", err=True)
        if Output.json:
            echo_json({"error": {"kind": self.kind, "message": self.message,
                                 "exit_code": self.exit_code}})


class CapabilityFailure(Failure):
    """A typed capability failure, shown as its safe message with its exit code."""

    def __init__(self, error: HarnessCapabilityError) -> None:
        super().__init__(error.message, error.exit_code, kind=error.kind.value)


@contextmanager
def capability_errors() -> Iterator[None]:
    """Turn :class:`HarnessCapabilityError` into a clean CLI failure."""
    try:
        yield
    except HarnessCapabilityError as exc:
        raise CapabilityFailure(exc) from exc


_UNITS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_MAX_DURATION: Final = timedelta(days=100 * 365)


class DurationArgument(click.ParamType):  # type: ignore[type-arg,unused-ignore]
    """A duration: a whole number and one unit, ``s``, ``m``, ``h``, ``d`` or ``w``
    (``90m``, ``30d``)."""

    name = "duration"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> timedelta:
        if isinstance(value, timedelta):
            return value
        text = str(value).strip().lower()
        number, unit = text[:-1], text[-1:]
        if unit not in _UNITS or not (number.isascii() and number.isdigit()) or len(number) > 12:
            self.fail(f"{value!r} is not a duration (a number and s, m, h, d or w: 30d)",
                      param, ctx)
        duration = timedelta(seconds=int(number) * _UNITS[unit])
        return min(duration, _MAX_DURATION)


class HarnessArgument(click.ParamType):  # type: ignore[type-arg,unused-ignore]
    """A harness id from the command line: the untrusted-string boundary."""

    name = "harness"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> HarnessProvider:
        from clanker.registry import HarnessProvider, get_registry

        if isinstance(value, HarnessProvider):
            return value
        registry = get_registry()
        provider = registry.find_provider(value)
        if provider is None:
            known = ", ".join(registry.ids()) or "none installed"
            self.fail(f"unknown harness {value!r} (known: {known})", param, ctx)
        return provider

    def shell_complete(
        self, ctx: click.Context, param: click.Parameter, incomplete: str
    ) -> list[click.shell_completion.CompletionItem]:
        from click.shell_completion import CompletionItem

        from clanker.registry import get_registry

        return [CompletionItem(i) for i in get_registry().ids() if i.startswith(incomplete)]


def _remember_json(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    Output.json = Output.json or value
    return value


def json_option(function: Callable[P, T]) -> Callable[P, T]:
    return click.option("--json", "as_json", is_flag=True, callback=_remember_json,
                        is_eager=True, help="Print JSON for programs.")(function)


def run_async(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine``; Ctrl+C cancels it (children are reaped) and exits 130."""
    import asyncio  # here: commands that never run a coroutine (`status`) skip its import

    from clanker.cli import quiet_asyncio

    quiet_asyncio()
    try:
        return asyncio.run(coroutine)
    except KeyboardInterrupt:
        raise click.exceptions.Exit(130) from None


def echo_json(data: object) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False, sort_keys=False))


_BATCH: Final = 64
"""Lines a write carries: a few tens of KB (more lines cost memory and save nothing)."""


def echo_json_listing(document: Mapping[str, object], key: str, items: Iterable[object]) -> None:
    """Print ``document`` with ``items`` as its ``key`` (``document`` holds ``key``
    too, as a placeholder that says where it goes), one item a line.

    The same JSON as :func:`echo_json` would print, laid out differently: each
    item is one compact line, written by the C encoder as it comes (a batch of
    lines at a time), so a listing of tens of thousands of items is neither
    one large string in memory nor a pass of the pure-Python indenting encoder.
    """
    out = sys.stdout
    encode = json.JSONEncoder(ensure_ascii=False).encode
    out.write("{")
    for index, (name, value) in enumerate(document.items()):
        out.write(("," if index else "") + "\n  " + encode(name) + ": ")
        if name != key:
            out.write(json.dumps(value, indent=2, ensure_ascii=False).replace("\n", "\n  "))
            continue
        batch: list[str] = []
        written = False
        for item in items:
            batch.append(encode(item))
            if len(batch) == _BATCH:
                out.write(("," if written else "[") + "\n    " + ",\n    ".join(batch))
                batch, written = [], True
        if batch:
            out.write(("," if written else "[") + "\n    " + ",\n    ".join(batch))
            written = True
        out.write("\n  ]" if written else "[]")
    out.write("\n}\n" if document else "}\n")
    out.flush()


def echo_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Print left-aligned columns, sized to their widest cell."""
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    click.echo(line(headers))
    for row in rows:
        click.echo(line(row))


def relative_time(moment: datetime, now: datetime | None = None) -> str:
    """``just now``, ``5m ago``, ``3h ago``, ``4d ago``, or the date past a month."""
    seconds = ((now or datetime.now(UTC)) - moment).total_seconds()
    if seconds < 60:
        return "just now"
    for unit, size in (("m", 60), ("h", 3600), ("d", 86400)):
        if seconds < size * {"m": 60, "h": 24, "d": 31}[unit]:
            return f"{int(seconds // size)}{unit} ago"
    return moment.astimezone().strftime("%Y-%m-%d")
