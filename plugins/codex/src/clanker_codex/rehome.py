"""Codex moves after the turn: once the root turn has completed and the first
process is retired, ``codex resume <id> --cd <target>`` continues the thread in
the target checkout.

Codex cannot be hot-replaced: its per-``CODEX_HOME`` app-server daemon holds the
thread's writer lock, and a second ``resume --cd`` next to a live TUI or a
running turn attaches to the live thread, which keeps its original directory
(docs/harnesses/codex.md). ``--cd`` names the target explicitly, so any
``-C``/``--cd`` the person gave is replaced. The binary names two writer-lock
contentions; exactly those are retried, at most three attempts 250 ms apart.

A resume of an id Codex cannot find draws its header and "Resuming session…" first
and only then prints its error and exits 1: 1.9 to 2.4 s after it started in the
sandbox, once over 5 s while the previous app-server daemon was still stopping. A
resume therefore counts as proven only once it has kept running for 8 s after its
first output.
"""

from __future__ import annotations

from typing import Final

from clanker.checkouts.capability import ContentionRetry, RehomeStrategy

__all__ = ["CONTENTION_MESSAGES", "CodexRehome"]

CONTENTION_MESSAGES: Final = (
    "failed to acquire thread writer lock",
    "is already running with a different rollout path",
)
"""The writer-lock contentions codex 0.171.0's binary carries (docs/harnesses/codex.md)."""

_TARGET_OPTIONS: Final = ("-C", "--cd")


def _without_target(flags: tuple[str, ...]) -> list[str]:
    kept: list[str] = []
    index = 0
    while index < len(flags):
        flag = flags[index]
        if flag == "--":  # the rest is the prompt, never an option
            kept += flags[index:]
            break
        if flag in _TARGET_OPTIONS:
            # The option and its value; clap takes no value that looks like an option.
            value = flags[index + 1] if index + 1 < len(flags) else "-"
            index += 1 if value.startswith("-") else 2
            continue
        if flag.startswith(("-C", "--cd=")):
            index += 1  # -C=X, clap's attached -CX, --cd=X
            continue
        kept.append(flag)
        index += 1
    return kept


class CodexRehome:
    strategy = RehomeStrategy.AFTER_TURN
    contention_retry = ContentionRetry(attempts=3, interval=0.25)
    observation_window = 8.0

    def resume_flags(self, target: str, user_flags: tuple[str, ...]) -> tuple[str, ...]:
        kept = _without_target(tuple(user_flags))
        if "--" in kept:
            split = kept.index("--")
            return (*kept[:split], "--cd", target, *kept[split:])
        return (*kept, "--cd", target)

    def is_transient_contention(self, output: str) -> bool:
        return any(message in output for message in CONTENTION_MESSAGES)

implementation = CodexRehome
