"""Many concurrent hook transactions against a real grid: nothing lost,
duplicated or reordered, and revisions strictly increase.

64 real processes (8 per terminal, 8 terminals) each run the hook bridge's own
transaction (:func:`clanker.attention.hook.transact`) 100 times, all starting
together: the per-terminal lock, the state file and in-lock delivery are the
real ones; only the interpreter start-up per event is left out (6,400 Python
start-ups would measure process creation, which ``benchmarks/attention.py``
measures). A worker pauses 20 ms between two transactions, where a real hook
process exits and the next one starts: in a tight loop the process that just
released the lock would take it again ahead of the waiters the kernel woke,
which one-shot hooks never do. Each transaction starts and completes the next
turn of a counter,
so the grid must see exactly turns 0, 1, 2, ... of each terminal, in order.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

from clanker.grid.client import GridClient
from clanker.grid.protocol import StreamEvent
from clanker.launch.attention import HOOK_SCRIPT
from clanker.testing.attention import running_grid

TERMINALS = 8
WORKERS_PER_TERMINAL = 8
TRANSACTIONS = 100

COUNTER = """
def interpret(payload, state):
    n = state.get("n", 0)
    turn = "t%d" % n
    envelopes = [{"event": event, "scope": "root", "sessionId": "s", "turnId": turn}
                 for event in ("turn_started", "turn_completed")]
    return envelopes, {"n": n + 1}
"""

WORKER = """
import importlib.util, os, sys, time
spec = importlib.util.spec_from_file_location("bridge", sys.argv[1])
bridge = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bridge)
env = bridge.read_environment(os.environ)
module = bridge.load_interpreter(env.interpreter, time.monotonic() + 10)
sys.stdin.readline()  # everyone starts together
for _ in range(int(sys.argv[2])):
    bridge.transact(env, module, b"{}", time.monotonic() + bridge.TOTAL_SECONDS)
    time.sleep(0.02)  # a hook process exits and the next starts (about 70 ms, really)
"""


def _collect(client: GridClient, into: list[StreamEvent], synced: threading.Event) -> None:
    for event in client.subscribe(timeout=120):
        if event.kind == "synced":
            synced.set()
        into.append(event)


def _step(snapshot: dict[str, object]) -> tuple[str, object]:
    runtime = snapshot["runtime"]
    assert isinstance(runtime, dict)
    if runtime["state"] == "unverified":
        return ("registered", None)
    if runtime["state"] == "running":
        return ("started", runtime["turnId"])
    completion = snapshot["lastCompletion"]
    assert isinstance(completion, dict)
    return ("completed", completion["turnId"])


def test_concurrent_hooks_deliver_every_transition_once_and_in_order(
    short_dir: Path, tmp_path: Path
) -> None:
    socket = short_dir / "grid.sock"
    # The subscriber queue is made deep enough for every revision of the run, so a
    # test reader slowed down by a loaded machine is never dropped (dropping a slow
    # subscriber has its own test).
    with running_grid(socket, subscriber_queue=1_000_000) as client:
        events, states = _run(client, socket, short_dir, tmp_path)
    per_terminal = TRANSACTIONS * WORKERS_PER_TERMINAL
    for state in states.values():
        # Every transaction held the lock and was confirmed: nothing failed closed.
        assert not (state / "poison").exists()
        assert json.loads((state / "state.json").read_text()) == {"n": per_terminal}
    expected = [("registered", None)] + [
        (step, f"t{n}") for n in range(per_terminal) for step in ("started", "completed")]
    revisions = [e.entry for e in events if e.kind == "revision" and e.entry is not None]
    for terminal in states:
        mine = [entry.revision for entry in revisions if entry.terminal == terminal]
        numbers = [revision["revision"] for revision in mine]
        assert numbers == sorted(set(numbers))  # strictly increasing
        assert [_step(revision["snapshot"]) for revision in mine] == expected


def _run(
    client: GridClient, socket: Path, state_root: Path, tmp_path: Path
) -> tuple[list[StreamEvent], dict[str, Path]]:
    """Start the workers together, wait for them, and return the whole revision stream."""
    interpreter = tmp_path / "counter.py"
    interpreter.write_text(COUNTER)
    events: list[StreamEvent] = []
    synced = threading.Event()
    reader = threading.Thread(target=_collect, args=(client, events, synced), daemon=True)
    reader.start()
    assert synced.wait(30)

    states: dict[str, Path] = {}
    workers = []
    for index in range(TERMINALS):
        registration = client.register(harness="stress", workspace=str(tmp_path),
                                       cwd=str(tmp_path), launcher_pid=os.getpid())
        state = state_root / f"s{index}"
        state.mkdir(mode=0o700)
        states[registration.terminal] = state
        env = {**os.environ, "CLANKER_ATTENTION_INTERPRETER": str(interpreter),
               "CLANKER_ATTENTION_SOCKET": str(socket),
               "CLANKER_ATTENTION_TERMINAL": registration.terminal,
               "CLANKER_ATTENTION_TOKEN": registration.token,
               "CLANKER_ATTENTION_STATE": str(state)}
        workers += [
            subprocess.Popen([sys.executable, "-c", WORKER, str(HOOK_SCRIPT), str(TRANSACTIONS)],
                             env=env, stdin=subprocess.PIPE)
            for _ in range(WORKERS_PER_TERMINAL)
        ]
    for worker in workers:
        assert worker.stdin is not None
        worker.stdin.write(b"go\n")
        worker.stdin.close()
    for worker in workers:
        assert worker.wait(timeout=600) == 0

    client.shutdown()  # ends the stream once everything queued has been sent
    reader.join(60)
    return events, states
