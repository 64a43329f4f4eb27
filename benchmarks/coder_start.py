"""``clanker coder``'s start: time to the first frame sent to the agent, this tree
against another (``--baseline``), run for run.

The agent is ``coder_screen.py``'s minimal stdlib ACP agent, so what is
measured is clanker. Each round runs every case once on the baseline tree and
once on this one (which goes first alternates), so both see the same load:

* ``clanker coder --agent-command "python3 agent.py" PROMPT`` in line mode;
* the same with ``--harness opencode`` (an ``opencode`` on ``PATH`` that runs
  the agent), with the spawn plan an earlier run kept (``clanker.acp.plan``: the
  run's home gets the cache of one unmeasured run of that tree), and without it
  (``harness-cold``: a new home, so the registry, the plugin and the launch path
  come first);
* ``clanker coder --agent-command ...`` as a conversation on a pseudo-terminal
  (the full-screen interface): to the first frame, and to the footer drawn.

The first frame's time is the transcript's first record (``initialize``, with the
time it was written) minus the time the command was started. The target is 4x
a bare interpreter start plus the agent's own start (spawn to its answer).

    uv run python benchmarks/coder_start.py --baseline DIR [--runs 9] [--only CASE] [--write]

``--only`` (repeatable: ``line``, ``harness``, ``harness-cold``, ``screen``,
``footer``) measures
those cases alone.

``DIR`` is a source tree of clanker (``git archive main | tar -x -C DIR``): its
``core/src`` is put first on ``PYTHONPATH`` for the baseline's runs.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from coder import agent_workspace, bare_start, warm_up
from coder_screen import AGENT, _agent_start, _first_record, _full_screen
from results import record


def _line(root: Path, env: dict[str, str], flags: list[str], name: str,
          cache: Path | None = None) -> float:
    home = root / name
    if cache is not None and cache.is_dir():
        shutil.copytree(cache, home / "cache")
    start = time.time()
    subprocess.run([sys.executable, "-m", "clanker", "coder", "--no-attention", *flags,
                    "chunks 1"], cwd=root, env={**env, "CLANKER_HOME": str(home)}, check=True,
                   capture_output=True)
    return _first_record(home) - start


def _round(root: Path, agent: Path, env: dict[str, str], tag: str,
           index: int, cases: frozenset[str]) -> dict[str, float]:
    base = root / f"{tag}-{index}"
    base.mkdir()
    found: dict[str, float] = {}
    if cases & {"line", "screen", "footer"}:
        frame, footer, line = _full_screen(base, agent, env, 1)
        found.update(line=line, screen=frame, footer=footer)
    if "harness" in cases:
        found["harness"] = _line(base, env, ["--harness", "opencode"], "harness",
                                 root / f"{tag}-primed" / "cache")
    if "harness-cold" in cases:
        found["harness-cold"] = _line(base, env, ["--harness", "opencode"], "harness-cold")
    return {case: value for case, value in found.items() if case in cases}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--baseline", type=Path, required=True,
                        help="a source tree of clanker to compare with (its core/src)")
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--only", choices=("line", "harness", "harness-cold", "screen",
                                           "footer"),
                        action="append", help="measure this case only (repeatable)")
    args = parser.parse_args()
    cases = frozenset(args.only or ("line", "harness", "harness-cold", "screen", "footer"))
    baseline_src = (args.baseline / "core" / "src").resolve()
    if not (baseline_src / "clanker" / "__main__.py").is_file():
        parser.error(f"--baseline: no clanker source under {baseline_src}")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        agent, env = agent_workspace(root, AGENT)
        opencode = root / "bin" / "opencode"
        opencode.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{agent}" "$@"\n')
        opencode.chmod(0o755)
        trees = {"baseline": {**env, "PYTHONPATH": str(baseline_src)}, "this": env}
        for tag, tree_env in trees.items():
            warm_up(root, agent, tree_env, "chunks 1")
            # The spawn plan this tree keeps (none for a tree without them).
            _line(root, tree_env, ["--harness", "opencode"], f"{tag}-primed")
        load = os.getloadavg()[0]
        bare = bare_start(args.runs)
        agent_start = _agent_start(agent, args.runs)
        samples: dict[str, dict[str, list[float]]] = {tag: {} for tag in trees}
        for index in range(args.runs):
            order = list(trees) if index % 2 == 0 else list(reversed(trees))
            for tag in order:
                for case, value in _round(root, agent, trees[tag], tag, index, cases).items():
                    samples[tag].setdefault(case, []).append(value)
        load_after = os.getloadavg()[0]
    target = 4 * bare + agent_start
    labels = {
        "line": "`--agent-command`, `PROMPT`, line mode: first frame",
        "harness": "`--harness opencode`, `PROMPT`, line mode, a plan kept: first frame",
        "harness-cold": "`--harness opencode`, `PROMPT`, line mode, no plan: first frame",
        "screen": "`--agent-command`, full screen: first frame",
        "footer": "`--agent-command`, full screen: footer drawn",
    }
    table = ["| `clanker coder` | baseline | this tree | target |", "| --- | ---: | ---: | ---: |"]
    for case, label in labels.items():
        if case not in cases:
            continue
        before = statistics.median(samples["baseline"][case]) * 1000
        after = statistics.median(samples["this"][case]) * 1000
        bound = f"<= {target * 1000:.0f} ms" if case != "footer" else ""
        table.append(f"| {label} | {before:.0f} ms | {after:.0f} ms | {bound} |")
    report = (f"Machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}, "
              f"Python {platform.python_version()}. Date: {time.strftime('%Y-%m-%d %H:%M')} "
              f"UTC. Median of {args.runs} rounds, the two trees alternating run for run; "
              f"load average {load:.1f} before, {load_after:.1f} after. A bare start "
              f"(`python -c pass`): {bare * 1000:.0f} ms; the agent's own start (spawn to "
              f"its `initialize` answer): {agent_start * 1000:.0f} ms; target: 4x the one "
              f"plus the other.\n\n" + "\n".join(table) + "\n")
    print(report)
    if args.write:
        record("coder-start", "The coder's start, against a baseline", report,
               script="benchmarks/coder_start.py")


if __name__ == "__main__":
    main()
