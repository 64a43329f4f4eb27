"""Commit message styles, the instructions that ask for one, and the check of the answer.

A harness's authoritative answer is checked against the requested style and
normalized; anything else fails closed (a typed parse failure). Nothing is
guessed: a preamble, a code fence, quotes around the subject or an overlong
subject mean the answer is not a commit message.
"""

from __future__ import annotations

import enum
import re
from typing import Final

from attrs import frozen

from clanker.commit.failures import CommitFailures

__all__ = ["SUBJECT_LIMIT", "CommitMessage", "Style", "normalize_message", "text_answer"]

SUBJECT_LIMIT: Final = 72
_CONVENTIONAL: Final = re.compile(
    r"(build|chore|ci|docs|feat|fix|perf|refactor|revert|style|test)(\([^()\s]{1,40}\))?!?: \S.*"
)
_DECORATION: Final = ("```", "~~~")
_QUOTES: Final = ("\"", "'", "`", "\u201c", "\u201d", "\u2018", "\u2019", "*", "#", ">", "- ")


class Style(enum.StrEnum):
    """How the subject line must look."""

    PLAIN = "plain"
    CONVENTIONAL = "conventional"

    @property
    def instruction(self) -> str:
        if self is Style.CONVENTIONAL:
            return (
                "The subject follows Conventional Commits: `type(scope): summary` with type one "
                "of build, chore, ci, docs, feat, fix, perf, refactor, revert, style, test; the "
                "scope is optional."
            )
        return "The subject is a short summary in the imperative mood (\"Add\", \"Fix\")."


@frozen(kw_only=True)
class CommitMessage:
    subject: str
    body: str | None = None

    @property
    def text(self) -> str:
        return self.subject if not self.body else f"{self.subject}\n\n{self.body}"


def text_answer(answer: str, *, harness: str) -> str:
    """Return a parser's ``answer`` if it is text git and a terminal can hold.

    JSON lets a harness send a lone surrogate (``"\\ud800"``), which decodes
    to a ``str`` that cannot be encoded: a parse failure, never a message.
    """
    try:
        answer.encode("utf-8")
    except UnicodeEncodeError:
        raise CommitFailures(harness).parse("the answer is not valid Unicode text") from None
    return answer


def normalize_message(text: str, style: Style, *, harness: str) -> CommitMessage:
    """Check ``text`` against ``style`` and return it as subject plus optional body."""
    refuse = CommitFailures(harness).parse
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    if not lines:
        raise refuse("the answer is empty")
    if any(line.lstrip().startswith(_DECORATION) for line in lines):
        raise refuse("the answer is wrapped in a code block")
    subject = lines[0].strip()
    if subject.startswith(_QUOTES) or subject.endswith((":", "\"", "'", "`")):
        raise refuse("the first line is not a commit subject")
    if len(subject) > SUBJECT_LIMIT:
        raise refuse(f"the subject is longer than {SUBJECT_LIMIT} characters")
    if any(not c.isprintable() for c in subject):
        raise refuse("the subject contains control characters")
    if style is Style.CONVENTIONAL and _CONVENTIONAL.fullmatch(subject) is None:
        raise refuse("the subject is not a Conventional Commits subject")
    if len(lines) == 1:
        return CommitMessage(subject=subject)
    if lines[1]:
        raise refuse("the subject is not followed by a blank line")
    body = "\n".join(lines[2:]).strip("\n")
    return CommitMessage(subject=subject, body=body or None)
