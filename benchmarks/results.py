"""Where every benchmark records its table: one marked section of ``RESULTS.md`` each."""

from __future__ import annotations

from pathlib import Path

RESULTS = Path(__file__).with_name("RESULTS.md")


def record(name: str, title: str, report: str, *, script: str | None = None) -> None:
    """Put ``report`` under ``title`` between the ``<!-- name -->`` markers.

    The section is replaced where it stands (or added at the end); the notes
    written between sections are kept. ``script`` is the benchmark that made it
    (default: ``benchmarks/<name>.py``).
    """
    marker = f"<!-- {name} -->"
    text = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n"
    parts = text.split(marker)
    head = parts[0].rstrip() + "\n\n"
    tail = parts[2] if len(parts) >= 3 else ""
    command = script or f"benchmarks/{name}.py"
    section = f"{marker}\n## {title} (`{command}`)\n\n{report}\n{marker}"
    RESULTS.write_text(head + section + tail + ("" if tail.endswith("\n") else "\n"))
