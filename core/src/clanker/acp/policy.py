"""The approval ladder: which permission request runs, asks or is refused.

A pure policy, decided by the client from the configured table and the tool
call's kind before anything runs; the model's request never widens it. On the
wire only an ``allow_once`` or ``reject_once`` option is ever selected (or the
``cancelled`` outcome when the agent offered no ``reject_once``). "Approve
edits for this session" lives here, in the client, and is forgotten on exit.

=============== ========================================= ================================
level           applies to                                behaviour
=============== ========================================= ================================
automatic       ``read``, ``search``, ``think``           allowed, disclosed in the transcript
ask once        ``edit``                                  asks; "for this session" remembered
ask every time  ``execute``, ``fetch``, ``delete``,       asks every call
                ``move``, ``switch_mode``, ``other``,
                a missing or unknown kind
refuse          a path outside the workspace, an option   refused (the agent reads why)
                whose id or name matches ``/bypass/i``
=============== ========================================= ================================

Without a person to ask (no TTY, ``--plain``, ``--json``), asking means
refusing unless ``--approve KIND`` names the kind.
"""

from __future__ import annotations

import enum
import os
import re
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any, Final

from attrs import field, frozen

__all__ = [
    "DEFAULT_TABLE",
    "TOOL_KINDS",
    "Answer",
    "Decision",
    "Level",
    "Option",
    "PermissionRequest",
    "Policy",
]

TOOL_KINDS: Final = frozenset({"read", "edit", "delete", "move", "search", "execute", "think",
                               "fetch", "switch_mode", "other"})
_BYPASS: Final = re.compile("bypass", re.IGNORECASE)
# An approval that also switches the agent to a more permissive mode (Claude's
# plan-exit options, for one): never picked without the person choosing it.
_ESCALATION: Final = re.compile(r"auto|accept.?edits|dont.?ask|yolo|full.?access", re.IGNORECASE)


class Level(enum.StrEnum):
    AUTOMATIC = "automatic"
    ASK_ONCE = "ask-once"
    ASK_EVERY_TIME = "ask-every-time"


DEFAULT_TABLE: Final[Mapping[str, Level]] = MappingProxyType({
    "read": Level.AUTOMATIC, "search": Level.AUTOMATIC, "think": Level.AUTOMATIC,
    "edit": Level.ASK_ONCE,
    **{kind: Level.ASK_EVERY_TIME
       for kind in ("execute", "fetch", "delete", "move", "switch_mode", "other")},
})


class Answer(enum.StrEnum):
    """What the person chose in the approval pane."""

    ONCE = "once"
    SESSION = "session"
    REJECT = "reject"


@frozen
class Option:
    option_id: str
    name: str
    kind: str

    @property
    def bypass(self) -> bool:
        return bool(_BYPASS.search(self.option_id) or _BYPASS.search(self.name))

    @property
    def escalates(self) -> bool:
        return bool(_ESCALATION.search(self.option_id) or _ESCALATION.search(self.name))


@frozen(kw_only=True)
class PermissionRequest:
    """The parts of a ``session/request_permission`` the ladder reads."""

    tool_kind: str | None
    title: str
    paths: tuple[str, ...] = ()
    options: tuple[Option, ...] = ()
    tool_call: dict[str, Any] = field(factory=dict, eq=False, repr=False)
    """The request's ``toolCall`` as sent, for showing the exact command or patch
    (never read by the ladder)."""

    @classmethod
    def from_params(cls, params: object) -> PermissionRequest:
        """Read the request leniently: anything missing or malformed only makes
        it stricter (no kind asks every time, no usable option refuses)."""
        params = params if isinstance(params, dict) else {}
        call = params.get("toolCall")
        call = call if isinstance(call, dict) else {}
        kind = call.get("kind")
        paths = tuple(str(loc["path"]) for loc in _dicts(call.get("locations"))
                      if isinstance(loc.get("path"), str))
        options = tuple(
            Option(str(o["optionId"]), str(o.get("name", "")), str(o.get("kind", "")))
            for o in _dicts(params.get("options")) if isinstance(o.get("optionId"), str))
        title = call.get("title")
        return cls(tool_kind=kind if isinstance(kind, str) else None,
                   title=title if isinstance(title, str) else "", paths=paths, options=options,
                   tool_call=call)


def _usable(options: Iterable[Option]) -> list[Option]:
    """The options clanker may select: never a bypass, never an id offered twice
    (which of the two the agent would apply is not known)."""
    options = list(options)
    ids = [o.option_id for o in options]
    return [o for o in options if not o.bypass and ids.count(o.option_id) == 1]


def _reject(usable: list[Option]) -> Option | None:
    """The ``reject_once`` to send: never one whose words say it widens the mode
    (a mislabelled option is answered ``cancelled`` instead)."""
    return next((o for o in usable if o.kind == "reject_once" and not o.escalates), None)


def _dicts(value: object) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


@frozen
class Decision:
    """What to answer and why. ``ask``: the person decides (:meth:`Policy.answer`)."""

    verdict: str
    """``allow``, ``reject``, ``cancelled`` (no usable reject option) or ``ask``."""
    option_id: str | None
    rule: str
    """The rule that decided, for the transcript."""
    warning: str | None = None
    session_choice: bool = False
    """Whether the person may approve this kind for the session."""

    def outcome(self) -> dict[str, str]:
        """The ``outcome`` object of the answer on the wire."""
        if self.option_id is None:
            return {"outcome": "cancelled"}
        return {"outcome": "selected", "optionId": self.option_id}


def _check_table(_: object, __: object, value: Mapping[str, Level]) -> None:
    unknown = set(value) - TOOL_KINDS
    if unknown:
        raise ValueError(f"table: unknown tool kinds {sorted(unknown)}")


def _freeze_table(value: Mapping[str, str]) -> Mapping[str, Level]:
    return MappingProxyType({**DEFAULT_TABLE, **{k: Level(v) for k, v in value.items()}})


def _kinds(values: Iterable[str]) -> frozenset[str]:
    kinds = frozenset(values)
    if kinds - TOOL_KINDS:
        raise ValueError(f"approve: unknown tool kinds {sorted(kinds - TOOL_KINDS)}")
    return kinds


@frozen(kw_only=True)
class Policy:
    """The ladder for one session in ``workspace``.

    ``table`` overrides levels by kind (configuration); the refuse row is not in
    the table and cannot be changed. ``approved`` are the ``--approve`` kinds.
    """

    workspace: str
    interactive: bool
    table: Mapping[str, Level] = field(factory=dict, converter=_freeze_table,
                                       validator=_check_table)
    approved: frozenset[str] = field(default=frozenset(), converter=_kinds)
    remembered: frozenset[str] = frozenset()
    """Kinds the person approved for this session (see :meth:`remember`)."""

    def level(self, kind: str | None) -> Level:
        if kind is None or kind not in TOOL_KINDS:
            return Level.ASK_EVERY_TIME
        return self.table[kind]

    def decide(self, request: PermissionRequest) -> Decision:
        """The answer the ladder gives ``request`` before asking anyone."""
        usable = _usable(request.options)
        allow = next((o for o in usable if o.kind == "allow_once" and not o.escalates), None)
        reject = _reject(usable)
        refusal = self._refusal(request, usable)
        if refusal is not None:
            return self._refuse(reject, refusal)
        kind = request.tool_kind
        level = self.level(kind)
        if allow is None:  # only an allow_always, or approvals that widen the mode
            escalating = any(o.kind == "allow_once" for o in usable)
            if not self.interactive:
                return self._refuse(reject, "refuse: only a mode change was offered"
                                    if escalating else
                                    "refuse: only a permanent approval was offered")
            return Decision("ask", None, f"{level.value}: {kind or 'no kind'}",
                            "approving also switches the agent to a more permissive mode"
                            if escalating else
                            "the agent offers only a permanent approval, which clanker never "
                            "sends: this call can only be refused")
        why = self._allowed_because(kind, level)
        if why is not None:
            return Decision("allow", allow.option_id, why)
        if not self.interactive:
            return self._refuse(reject, f"refuse: {level.value} ({kind or 'no kind'}) "
                                        "and nobody to ask")
        return Decision("ask", None, f"{level.value}: {kind or 'no kind'}",
                        session_choice=level is Level.ASK_ONCE)

    def _refusal(self, request: PermissionRequest, usable: list[Option]) -> str | None:
        """The refuse row: a path outside the workspace, or nothing allowable offered."""
        outside = [p for p in request.paths if not self._inside(p)]
        if outside:
            return f"refuse: outside the workspace: {outside[0]}"
        if not any(o.kind in ("allow_once", "allow_always") for o in usable):
            return "refuse: no allow option this client may select"
        return None

    def _allowed_because(self, kind: str | None, level: Level) -> str | None:
        """The rule that allows ``kind`` without asking, if one does."""
        if level is Level.AUTOMATIC:
            return f"automatic: {kind}"
        if kind is not None and kind in self.remembered:
            return f"approved for this session: {kind}"
        if kind is not None and kind in self.approved:
            return f"--approve {kind}"
        return None

    def answer(self, request: PermissionRequest, choice: Answer) -> tuple[Decision, Policy]:
        """The decision for the person's ``choice`` and the policy afterwards."""
        usable = _usable(request.options)
        once = [o for o in usable if o.kind == "allow_once"]
        plain = [o for o in once if not o.escalates]
        # The person saw the warning: a mode-widening approval only when nothing else is.
        allow = next(iter(plain or once), None)
        reject = _reject(usable)
        if choice is Answer.REJECT or allow is None:
            # Never an allow_always on the wire, even when the person said yes.
            return self._refuse(reject, "refused by the person" if choice is Answer.REJECT
                                else "refuse: only a permanent approval was offered"), self
        policy = self
        if (choice is Answer.SESSION and self.level(request.tool_kind) is Level.ASK_ONCE
                and not allow.escalates):
            assert request.tool_kind is not None
            policy = Policy(workspace=self.workspace, interactive=self.interactive,
                            table=dict(self.table), approved=self.approved,
                            remembered=self.remembered | {request.tool_kind})
            return Decision("allow", allow.option_id,
                            f"approved for this session: {request.tool_kind}"), policy
        return Decision("allow", allow.option_id, "approved once by the person"), policy

    def _inside(self, path: str) -> bool:
        root = os.path.realpath(self.workspace)
        full = os.path.realpath(os.path.join(root, path))
        return full == root or full.startswith(root + os.sep)

    @staticmethod
    def _refuse(reject: Option | None, rule: str) -> Decision:
        if reject is None:
            return Decision("cancelled", None, rule)
        return Decision("reject", reject.option_id, rule)
