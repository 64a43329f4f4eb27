"""Each file-store parser alone: reading the samples and summarizing them, per store.

Over a tree made by ``benchmarks/sessions.py`` (the same ``--tree``), every
file of the Codex, Claude Code and Pi stores is read (``read_sample``, with the
provider's own head and tail sizes) and summarized (the provider's
``summarize``) in this process, one thread, no cache and no worker: the part
of a cold every-file listing that the parsers decide. It prints the CPU time
of each step per store (median of ``--runs`` passes, the samples read once
more before the first so the tree is in the page cache), and a digest of every
answer, so two versions of a parser can be checked to give the same summaries
file for file (``--dump`` writes them out, one JSON line a file).

    uv run python benchmarks/sessions_parsers.py --tree /tmp/clanker-bench-sessions [--runs 3]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clanker.environment.files import FileSample, read_sample

STORES = {
    "codex": ("clanker_codex.summaries", "codex/sessions"),
    "claude": ("clanker_claude.summaries", "claude/projects"),
    "pi": ("clanker_pi.summaries", "pi/sessions"),
}


def _record(answer: object) -> Any:
    fields = ("native_id", "title", "cwd", "created_at", "updated_at", "model",
              "message_count", "parent_id")
    if answer is None or not hasattr(answer, "native_id"):
        return repr(answer)
    return [str(getattr(answer, name)) for name in fields]


def _modules(name: str) -> tuple[Callable[[FileSample], object], int, int]:
    import importlib

    module = importlib.import_module(name)
    return module.summarize, module.HEAD_BYTES, module.TAIL_BYTES


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=Path("/tmp/clanker-bench-sessions"))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--store", choices=sorted(STORES), action="append")
    parser.add_argument("--dump", type=Path, help="write every answer here, one line a file")
    args = parser.parse_args()
    dump = args.dump.open("w") if args.dump else None
    for store in args.store or list(STORES):
        module, below = STORES[store]
        summarize, head, tail = _modules(module)
        files = sorted((args.tree / below).rglob("*.jsonl"))
        samples = [read_sample(p, head_bytes=head, tail_bytes=tail) for p in files]
        reads, parses = [], []
        digest = ""
        for _ in range(args.runs):
            started = time.process_time()
            samples = [read_sample(p, head_bytes=head, tail_bytes=tail) for p in files]
            reads.append(time.process_time() - started)
            started = time.process_time()
            answers = [summarize(s) for s in samples]
            parses.append(time.process_time() - started)
            lines = [json.dumps([str(s.path), _record(a)]) for s, a in zip(samples, answers,
                                                                           strict=True)]
            digest = hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]
        if dump is not None:
            dump.write("\n".join(lines) + "\n")
        print(f"{store}: {len(files)} files, read {statistics.median(reads):.3f} s, "
              f"summarize {statistics.median(parses):.3f} s "
              f"({statistics.median(parses) / len(files) * 1e6:.0f} us a file), "
              f"answers {digest}")
    if dump is not None:
        dump.close()


if __name__ == "__main__":
    main()
