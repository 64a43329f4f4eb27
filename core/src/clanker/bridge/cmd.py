"""``clanker cmd``: an agent asks the host to do something, one request at a time.

::

    clanker cmd list [--json]                  what this agent may ask for
    clanker cmd list --all [--json]            everything, for a person (no agent credential)
    clanker cmd describe NAME [--json]         one capability: arguments, hints, an example
    clanker cmd run NAME [--arg KEY=VALUE ...] [--json [OBJECT]]
    clanker cmd NAME ...                       the same as ``clanker cmd run NAME ...``

It reads the grid's socket (``CLANKER_BRIDGE_SOCKET``) and the launch's bridge
credential (``CLANKER_BRIDGE_TOKEN``) from its environment, sends one request
over the socket, prints the answer and exits (``docs/exit-codes.md``): 0, or 2
(usage, or arguments the capability refuses), 8 (it ran out of time), 18 (no
grid), 19 (no credential the grid accepts), 20 (no such capability for this
agent), 21 (the capability failed), 22 (rate-limited or busy: try later), 1
(an internal error).

``--arg KEY=VALUE`` values are typed by the capability's declaration, in the
grid (``true``/``false`` for a boolean, decimal digits for an integer);
``--json '{...}'`` sends a JSON object as it is, never coerced. ``run`` always
prints its result as JSON; ``--json`` also makes ``list`` and ``describe``
print JSON, and any failure print ``{"error": {"kind", "message",
"exit_code"}}`` on stdout besides its line on stderr.

Agents call this in loops, so it starts lean: the standard library and the
wire schema (:mod:`clanker.bridge.wire`), nothing else; a test holds it to
that. :class:`BridgeClient` is the same client for a program.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from collections.abc import Mapping, Sequence
from typing import IO, Any

from clanker.bridge import wire

__all__ = ["BridgeClient", "CommandError", "main"]

CONNECT_TIMEOUT = 2.0
ANSWER_TIMEOUT = 5.0
RUN_TIMEOUT = 65.0
"""A run may take the longest declared time (60 s) and the grid's own bounds."""

USAGE = """\
usage: clanker cmd list [--json] [--all]
       clanker cmd describe NAME [--json]
       clanker cmd run NAME [--arg KEY=VALUE ...] [--json [OBJECT]]
       clanker cmd NAME ...   (the same as: clanker cmd run NAME ...)

Ask the host (clanker) to do something for this agent. `list` shows exactly
what this agent's launch was granted (`clanker launch --bridge`); `--all` is
for a person and shows everything, none of it invokable. Exit codes are in
docs/exit-codes.md (2 usage, 18 no grid, 19 no credential, 20 unknown
capability, 21 it failed, 22 try again later).
"""


class CommandError(Exception):
    """A request that did not succeed: ``kind`` (a wire word or ``usage``), a safe
    ``message`` and the exit code ``clanker cmd`` uses for it."""

    def __init__(self, kind: str, message: str, exit_code: int) -> None:
        self.kind = kind
        self.message = message
        self.exit_code = exit_code
        super().__init__(message)


def _usage(message: str) -> CommandError:
    return CommandError("usage", message, wire.EXIT_USAGE)


def _unavailable(message: str) -> CommandError:
    return CommandError("grid-unavailable", message, wire.EXIT_GRID_UNAVAILABLE)


def _no_constants(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def _refusal(word: str, message: str | None, op: str, name: str | None) -> CommandError:
    sentence = wire.SENTENCES.get(word, f"the grid refused the request ({word})")
    if word == wire.UNKNOWN_CAPABILITY and name is not None and wire.is_name(name):
        sentence = f"{sentence}: {name}"
    if message:
        sentence = f"{sentence} ({message})"
    code = wire.EXIT_FOR_WORD.get(word, wire.EXIT_INTERNAL)
    if op == "cmd-list" and word == wire.BAD_REQUEST:
        code = wire.EXIT_INTERNAL  # nothing the caller chose can make a listing malformed
    return CommandError(word, sentence, code)


class BridgeClient:
    """The capability plane as a program calls it: one connection per request.

    ``token`` is the launch's bridge credential (``None``: only :meth:`all_capabilities`).
    Every method raises :class:`CommandError`.
    """

    def __init__(self, socket_path: str | os.PathLike[str], token: str | None) -> None:
        self._path = os.fspath(socket_path)
        self._token = token

    def __repr__(self) -> str:  # never the credential
        return f"BridgeClient({self._path!r})"

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> BridgeClient:
        """The client an agent's environment names; refuses (exit 19) without a credential."""
        token = environ.get(wire.TOKEN_VARIABLE)
        path = environ.get(wire.SOCKET_VARIABLE)
        if not token or not path:
            raise CommandError(
                wire.UNAUTHORIZED,
                f"there is no bridge credential in this environment ({wire.TOKEN_VARIABLE}): "
                "only an agent launched with `clanker launch --bridge` can ask the host",
                wire.EXIT_NO_AUTHORITY)
        return cls(path, token)

    def capabilities(self) -> list[dict[str, Any]]:
        """What this credential may run (exactly its grant)."""
        reply = self._call(self._request("cmd-list", token=self._token), ANSWER_TIMEOUT)
        return list(reply["capabilities"])

    def all_capabilities(self) -> list[dict[str, Any]]:
        """Every capability the grid offers, each marked non-invokable (no credential)."""
        reply = self._call(self._request("cmd-list", all=True), ANSWER_TIMEOUT)
        return list(reply["capabilities"])

    def describe(self, name: str) -> dict[str, Any]:
        """One granted capability: its description, JSON Schema, hints and time bound."""
        reply = self._call(self._request("cmd-describe", token=self._token, name=name),
                           ANSWER_TIMEOUT, name=name)
        return dict(reply["capability"])

    def run(self, name: str, arguments: Mapping[str, object] | None = None) -> dict[str, Any]:
        """Run a granted capability with JSON ``arguments`` (never coerced)."""
        request = self._request("cmd-run", token=self._token, name=name,
                                arguments=dict(arguments) if arguments is not None else None)
        return dict(self._call(request, RUN_TIMEOUT, name=name)["result"])

    def run_text(self, name: str, arguments: Mapping[str, str]) -> dict[str, Any]:
        """Run a granted capability with ``KEY=VALUE`` strings its declaration types."""
        request = self._request("cmd-run", token=self._token, name=name,
                                textArguments=dict(arguments))
        return dict(self._call(request, RUN_TIMEOUT, name=name)["result"])

    # ------------------------------------------------------------- transport

    def _request(self, op: str, **fields: object) -> dict[str, object]:
        if self._token is None and "all" not in fields:
            raise CommandError(wire.UNAUTHORIZED, "there is no bridge credential",
                               wire.EXIT_NO_AUTHORITY)
        name = fields.get("name")
        if name is not None and not wire.is_name(name):
            raise CommandError(wire.UNKNOWN_CAPABILITY, wire.SENTENCES[wire.UNKNOWN_CAPABILITY],
                               wire.EXIT_UNKNOWN_CAPABILITY)
        try:
            return wire.request(op, **fields)
        except ValueError as exc:
            raise _usage(str(exc)) from None

    def _call(self, request: dict[str, object], timeout: float, *, name: str | None = None
              ) -> dict[str, Any]:
        op = str(request["op"])
        try:
            line = json.dumps(request, ensure_ascii=False, separators=(",", ":"),
                              allow_nan=False).encode("utf-8") + b"\n"
        except (ValueError, UnicodeEncodeError):
            raise _usage("the arguments are not valid JSON text") from None
        if len(line) > wire.MAX_LINE:
            raise _usage(f"the request is over {wire.MAX_LINE} bytes")
        raw = self._exchange(line, timeout)
        return self._parse(raw, op, name)

    def _exchange(self, line: bytes, timeout: float) -> bytes:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(CONNECT_TIMEOUT)
            try:
                sock.connect(os.fsencode(self._path))
            except (FileNotFoundError, ConnectionRefusedError, NotADirectoryError):
                raise _unavailable(f"the grid is not running ({self._path})") from None
            except OSError as exc:
                raise _unavailable(
                    f"cannot reach the grid at {self._path} ({type(exc).__name__})") from None
            deadline = time.monotonic() + timeout
            try:
                sock.sendall(line)
                received = bytearray()
                while b"\n" not in received:
                    if len(received) > wire.MAX_REPLY:
                        raise CommandError("internal", "the grid sent an oversized reply",
                                           wire.EXIT_INTERNAL)
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise TimeoutError
                    sock.settimeout(remaining)
                    chunk = sock.recv(65_536)
                    if not chunk:
                        raise _unavailable("the grid closed the connection without answering")
                    received += chunk
            except TimeoutError:
                raise _unavailable("the grid did not answer in time") from None
            except OSError as exc:
                raise _unavailable(
                    f"the connection to the grid failed ({type(exc).__name__})") from None
            return bytes(received[: received.index(b"\n")])
        finally:
            sock.close()

    @staticmethod
    def _parse(raw: bytes, op: str, name: str | None) -> dict[str, Any]:
        malformed = CommandError("internal", "the grid sent a malformed reply",
                                 wire.EXIT_INTERNAL)
        try:
            data = json.loads(raw.decode("utf-8"), parse_constant=_no_constants)
        except (UnicodeDecodeError, ValueError, RecursionError):
            raise malformed from None
        if type(data) is not dict or data.get("v") != wire.PROTOCOL_VERSION:
            raise malformed
        if data.get("ok") is False:
            word, message = data.get("error"), data.get("message")
            if type(word) is not str or (message is not None and type(message) is not str):
                raise malformed
            raise _refusal(word, message, op, name)
        key, kind = wire.REPLIES[op]
        if data.get("ok") is not True or set(data) != {"v", "ok", key} \
                or type(data[key]) is not kind:
            raise malformed
        return data


# ----------------------------------------------------------------- the command


def _split(argv: Sequence[str]) -> tuple[str, list[str]]:
    if not argv or argv[0] in ("-h", "--help", "help"):
        return "help", []
    head, rest = argv[0], list(argv[1:])
    if head in ("list", "describe", "run"):
        return head, rest
    if head.startswith("-"):
        raise _usage(f"unknown option {head!r}; see `clanker cmd --help`")
    return "run", [head, *rest]


def _options(args: list[str], *, flags: set[str], pairs: bool = False
             ) -> tuple[list[str], set[str], dict[str, str], str | None]:
    """Positional words, flags given, ``--arg`` pairs and a ``--json`` object."""
    words: list[str] = []
    seen: set[str] = set()
    given: dict[str, str] = {}
    document: str | None = None
    index = 0
    while index < len(args):
        arg = args[index]
        index += 1
        if arg == "--":
            words += args[index:]
            break
        if pairs and (arg == "--arg" or arg.startswith("--arg=")):
            if arg == "--arg":
                if index >= len(args):
                    raise _usage("--arg needs KEY=VALUE")
                arg, index = args[index], index + 1
            else:
                arg = arg.removeprefix("--arg=")
            key, sep, value = arg.partition("=")
            if not sep or not key:
                raise _usage("--arg needs KEY=VALUE")
            if key in given:
                raise _usage(f"--arg {key} is given twice" if wire.is_name(key)
                             else "an --arg key is given twice")
            given[key] = value
            continue
        if pairs and arg.startswith("--json="):
            seen.add("--json")
            document = arg.removeprefix("--json=")
            continue
        if arg in flags:
            seen.add(arg)
            if pairs and arg == "--json" and index < len(args) \
                    and args[index].lstrip().startswith("{"):
                document, index = args[index], index + 1
            continue
        if arg.startswith("-") and arg != "-":
            raise _usage(f"unknown option {arg!r}; see `clanker cmd --help`")
        words.append(arg)
    return words, seen, given, document


def _first_sentence(text: str) -> str:
    head = text.split(". ", 1)[0]
    return head if head.endswith(".") else head + "."


def _table(entries: list[dict[str, Any]], out: IO[str]) -> None:
    names = [str(e.get("name", "")) for e in entries]
    width = max([4, *map(len, names)])
    out.write(f"{'NAME'.ljust(width)}  DESCRIPTION\n")
    for name, entry in zip(names, entries, strict=True):
        out.write(f"{name.ljust(width)}  {_first_sentence(str(entry.get('description', '')))}\n")


def _rules(spec: Mapping[str, Any]) -> str:
    kind = spec.get("type")
    if kind == "string":
        if "enum" in spec:
            return "one of: " + ", ".join(map(str, spec["enum"]))
        return f"{spec.get('minLength', 0)} to {spec.get('maxLength')} characters"
    if kind == "integer":
        return f"from {spec.get('minimum')} to {spec.get('maximum')}"
    if kind == "boolean":
        return "true or false"
    return ""


def _example(entry: Mapping[str, Any]) -> str:
    schema = entry.get("inputSchema", {})
    parts = [f"clanker cmd run {entry.get('name')}"]
    for key in schema.get("required", []):
        spec = schema.get("properties", {}).get(key, {})
        sample = {"boolean": "true", "integer": str(spec.get("minimum", 0))}.get(
            spec.get("type"), "...")
        if spec.get("enum"):
            sample = str(spec["enum"][0])
        parts.append(f"--arg {key}={sample}")
    return " ".join(parts)


def _describe(entry: Mapping[str, Any], out: IO[str]) -> None:
    hints = entry.get("annotations", {})

    def yes(key: str) -> str:
        return "yes" if hints.get(key) else "no"

    out.write(f"{entry.get('name')}\n  {entry.get('description')}\n")
    out.write(f"  read-only: {yes('readOnlyHint')}, destructive: {yes('destructiveHint')}, "
              f"idempotent: {yes('idempotentHint')}, time limit: {entry.get('timeout'):g} s\n")
    schema = entry.get("inputSchema", {})
    properties = schema.get("properties", {})
    if not properties:
        out.write("  arguments: none\n")
    else:
        out.write("  arguments:\n")
        required = set(schema.get("required", []))
        for key, spec in properties.items():
            need = "required" if key in required else "optional"
            out.write(f"    {key} ({spec.get('type')}, {need}): {spec.get('description')} "
                      f"{_rules(spec)}\n")
    out.write(f"  example: {_example(entry)}\n")


def _client(environ: Mapping[str, str]) -> BridgeClient:
    return BridgeClient.from_environ(environ)


def _person_client(environ: Mapping[str, str]) -> BridgeClient:
    """For ``list --all``: never with an agent's credential."""
    if any(key.upper() == wire.TOKEN_VARIABLE for key in environ):
        raise _usage("--all is for a person: it is refused where an agent's bridge "
                     f"credential is set ({wire.TOKEN_VARIABLE})")
    path = environ.get(wire.SOCKET_VARIABLE)
    if not path:
        from clanker.grid.daemon import grid_location
        from clanker.grid.errors import GridError
        from clanker.paths import clanker_paths

        try:
            path = str(grid_location(clanker_paths(environ)).socket)
        except GridError as exc:
            raise _unavailable(str(exc)) from None
    return BridgeClient(path, None)


def _list(args: list[str], environ: Mapping[str, str], out: IO[str]) -> None:
    words, seen, _, _ = _options(args, flags={"--json", "--all"})
    if words:
        raise _usage("list takes no arguments")
    everything = "--all" in seen
    client = _person_client(environ) if everything else _client(environ)
    entries = client.all_capabilities() if everything else client.capabilities()
    if "--json" in seen:
        out.write(json.dumps(entries, indent=2, ensure_ascii=False) + "\n")
    elif not entries:
        out.write("Nothing: this agent was granted no capability.\n")
    else:
        _table(entries, out)
        if everything:
            out.write("None of these is invokable here: an agent runs what its launch "
                      "was granted (`clanker launch --bridge`).\n")


def _describe_command(args: list[str], environ: Mapping[str, str], out: IO[str]) -> None:
    words, seen, _, _ = _options(args, flags={"--json"})
    if len(words) != 1:
        raise _usage("describe takes one capability name")
    entry = _client(environ).describe(words[0])
    if "--json" in seen:
        out.write(json.dumps(entry, indent=2, ensure_ascii=False) + "\n")
    else:
        _describe(entry, out)


def _run(args: list[str], environ: Mapping[str, str], out: IO[str]) -> None:
    words, _, given, document = _options(args, flags={"--json"}, pairs=True)
    if len(words) != 1:
        raise _usage("run takes one capability name")
    if given and document is not None:
        raise _usage("give arguments as --arg KEY=VALUE or as --json OBJECT, not both")
    client = _client(environ)
    if document is not None:
        try:
            arguments = json.loads(document, parse_constant=_no_constants)
        except (ValueError, RecursionError):
            raise _usage("--json needs one JSON object") from None
        if type(arguments) is not dict:
            raise _usage("--json needs one JSON object")
        result = client.run(words[0], arguments)
    elif given:
        result = client.run_text(words[0], given)
    else:
        result = client.run(words[0])
    out.write(json.dumps(result, indent=2, ensure_ascii=False) + "\n")


_SUBCOMMANDS = {"list": _list, "describe": _describe_command, "run": _run}


def main(argv: Sequence[str] | None = None, *, environ: Mapping[str, str] | None = None,
         stdout: IO[str] | None = None, stderr: IO[str] | None = None) -> int:
    """Run ``clanker cmd ARGV...``; return the exit status (never raises)."""
    args = list(sys.argv[2:] if argv is None else argv)
    environ = os.environ if environ is None else environ
    out = sys.stdout if stdout is None else stdout
    err = sys.stderr if stderr is None else stderr
    as_json = "--json" in args or any(a.startswith("--json=") for a in args)
    try:
        command, rest = _split(args)
        if command == "help":
            out.write(USAGE)
            return wire.EXIT_OK
        _SUBCOMMANDS[command](rest, environ, out)
    except CommandError as exc:
        err.write(f"clanker: {exc.message}\n")
        if as_json:
            out.write(json.dumps({"error": {"kind": exc.kind, "message": exc.message,
                                            "exit_code": exc.exit_code}}) + "\n")
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return wire.EXIT_OK
    except Exception as exc:
        if environ.get("CLANKER_DEBUG"):
            raise
        err.write(f"clanker: internal error: {type(exc).__name__}\n")
        return wire.EXIT_INTERNAL
    return wire.EXIT_OK
