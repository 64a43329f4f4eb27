"""What attention costs a launch on an SSH host: the frame extraction every byte of the
host's terminal passes through, and the install and cleanup of the launch's resources.

Extraction: 16 MiB of harness-like terminal output (text, SGR colours, cursor
moves, an OSC title now and then) with one attention frame per 64 KiB, fed in
4 KiB reads through :class:`~clanker.attention.frames.FrameExtractor`, against
the same reads copied as they are. Resources: on the test server of
``tests/sshd.py`` (Debian's ``openssh-server``; as root it logs in the
``clanker-sshd`` user), :meth:`RemoteResources.install` of what a Claude Code
launch installs (the hook bridge, the wire schema, the interpreter, the hook
command, a settings file) and :meth:`RemoteResources.cleanup`, each one
execution over the host's ControlMaster, N times (default 15) interleaved.
``--write`` records the table in ``benchmarks/RESULTS.md``.

    uv run python benchmarks/ssh_attention.py [--runs 15] [--write]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from results import record

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from clanker.attention import wire
from clanker.attention.frames import FrameExtractor
from clanker.attention.hook import STATE_FILES
from clanker.environment.remote_resources import RemoteResources, Resource
from clanker.execution.ssh import SshTransport
from clanker.launch.attention import HOOK_SCRIPT, remote_hook_command
from tests.sshd import start_sshd

_OUTPUT_BYTES = 16 * 1024 * 1024
_READ = 4096


def _stream() -> tuple[bytes, int, int]:
    """Harness-like output with one frame per 64 KiB: the stream, its frame count and
    the size of one frame."""
    line = (b"\x1b[2K\x1b[1G\x1b[38;5;244m  2 files changed\x1b[0m, "
            b"\x1b[32m+41\x1b[0m \x1b[31m-7\x1b[0m  working on it...\r\n")
    title = b"\x1b]0;claude: repo\x07"
    request = json.dumps({"v": 1, "op": "deliver", "terminal": "t-bench", "token": "a" * 64,
                          "envelopes": [{"event": "turn_started", "sessionId": "s",
                                         "turnId": "u", "scope": "root"}]}).encode()
    frame = (wire.FRAME_START.encode() + base64.b64encode(request)
             + wire.FRAME_END.encode())
    chunk = line * (64 * 1024 // len(line)) + title + frame
    copies = _OUTPUT_BYTES // len(chunk)
    return chunk * copies, copies, len(frame)


def _extraction(runs: int) -> tuple[float, float, int]:
    stream, frames, frame_size = _stream()
    reads = [stream[i:i + _READ] for i in range(0, len(stream), _READ)]
    plain: list[float] = []
    filtered: list[float] = []
    taken = 0
    for _ in range(runs):
        started = time.perf_counter()
        shown = b"".join(bytes(r) for r in reads)
        plain.append(time.perf_counter() - started)
        extractor = FrameExtractor(lambda payload: True)
        started = time.perf_counter()
        shown = b"".join(extractor.feed(r) for r in reads)
        filtered.append(time.perf_counter() - started)
        taken = extractor.frames
        assert len(shown) == len(stream) - frames * frame_size
    assert taken == frames
    mib = len(stream) / (1024 * 1024)
    return mib / statistics.median(plain), mib / statistics.median(filtered), frames


def _resources() -> list[Resource]:
    interpreter = (Path(__file__).resolve().parents[1] / "plugins" / "claude" / "src"
                   / "clanker_claude" / "attention_interpreter.py")
    return [Resource("hook", remote_hook_command("/x", interpreter.name, "t-bench", "a" * 64),
                     executable=True),
            Resource("hook.py", HOOK_SCRIPT.read_bytes()),
            Resource("wire.py", HOOK_SCRIPT.with_name("wire.py").read_bytes()),
            Resource(interpreter.name, interpreter.read_bytes()),
            Resource("claude-settings.json", b'{"hooks": {}}\n')]


def _host(runs: int) -> tuple[float, float, int]:
    control = Path(tempfile.mkdtemp(prefix="ckb-", dir="/tmp"))
    install: list[float] = []
    cleanup: list[float] = []
    size = sum(len(r.data) for r in _resources())
    try:
        with start_sshd() as (server, _):
            transport = SshTransport(server.alias, control_dir=control,
                                     config_file=server.config_file)
            resources = RemoteResources(transport, str(server.home))

            async def rounds() -> None:
                await transport.ensure_connected()
                for _ in range(runs):
                    launch, _ = resources.new_directory()
                    started = time.perf_counter()
                    await resources.install(launch, _resources(), owner="b" * 32)
                    install.append((time.perf_counter() - started) * 1000)
                    started = time.perf_counter()
                    done = await resources.cleanup(launch, STATE_FILES)
                    cleanup.append((time.perf_counter() - started) * 1000)
                    assert done.complete

            try:
                asyncio.run(rounds())
            finally:
                transport.close()
                shutil.rmtree(server.home / ".local" / "state" / "clanker", ignore_errors=True)
    finally:
        shutil.rmtree(control, ignore_errors=True)
    return statistics.median(install), statistics.median(cleanup), size


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--write", action="store_true")
    arguments = parser.parse_args()
    load = os.getloadavg()[0]
    plain, filtered, frames = _extraction(max(3, arguments.runs // 3))
    install_ms, cleanup_ms, size = _host(arguments.runs)
    report = "\n".join([
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}, "
        f"Python {platform.python_version()}. Date: {datetime.now(UTC):%Y-%m-%d}. "
        f"Load average before the runs {load:.1f}.",
        "",
        f"| 16 MiB of terminal output in {_READ // 1024} KiB reads, {frames} frames "
        "| MiB/s |",
        "| --- | ---: |",
        f"| copied as it is | {plain:.0f} |",
        f"| through `FrameExtractor` | {filtered:.0f} |",
        "",
        f"| on the loopback host, one execution each (median of {arguments.runs}) "
        "| ms |",
        "| --- | ---: |",
        f"| install ({size // 1024} KiB in 5 files and a manifest) | {install_ms:.1f} |",
        f"| cleanup | {cleanup_ms:.1f} |",
        "",
        f"A harness writing 1 MiB/s to its terminal spends {100 / filtered:.2f}% of one "
        "core on extraction.",
    ])
    print(report)
    if arguments.write:
        record("ssh_attention", "Attention on an SSH host", report)


if __name__ == "__main__":
    main()
