"""The full-screen renderer as a pure function: session state (built from recorded
frames of real agents, or from updates) in, text out, read without colour."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from clanker.acp.render import replay
from clanker.acp.state import Block, SessionState
from clanker.acp.ui import blocks
from clanker.acp.ui.screen import git_place

FIXTURES = Path(__file__).parents[2] / "fixtures"
CWD = "/work/project"


def _plain(renderable: Any, width: int = 80) -> str:
    return blocks.to_ansi(renderable, width, color=False)


def _recorded(harness: str) -> SessionState:
    path = FIXTURES / harness / "acp" / "permission.jsonl"
    return replay(json.loads(line) for line in path.read_text().splitlines())


def _tool(**fields: Any) -> Block:
    state = SessionState()
    state.apply({"sessionUpdate": "tool_call", "toolCallId": "t1", **fields})
    return state.blocks["tool:t1"]


def test_a_refused_opencode_command_shows_the_command_its_kind_and_the_failure() -> None:
    state = _recorded("opencode")
    assert [b.kind for b in state.blocks.values()] == ["tool"]
    shown = _plain(blocks.block_renderable(state.blocks["tool:call_1"], CWD))
    header, *body = shown.splitlines()
    assert header.split() == ["$", "ls", "[execute]", ".", "failed"]  # the workspace itself: "."
    assert body == ["The user rejected permission to use this specific tool call."]


def test_an_omp_turn_renders_every_block_and_the_usage_reaches_the_status_line() -> None:
    state = _recorded("omp")
    shown = [_plain(blocks.block_renderable(b, CWD)) for b in state.blocks.values()]
    assert shown[0].splitlines()[0].split() == ["$", "ls", "[execute]", "failed"]
    assert "Tool call rejected by user (bash)" in shown[0]
    assert shown[1].strip() == "done"
    line = blocks.status_line(state, blocks.Status(agent="omp", repository="project",
                                                   branch="main"))
    assert line == "omp · project (main) · 15,154/128,000 tokens · ready"


def test_an_answer_is_markdown() -> None:
    state = SessionState()
    for chunk in ("# Plan\n\nSome *text* and `code`.\n\n", "- one\n- two\n\n```python\n",
                  "print('hi')\n```\n"):
        state.apply({"sessionUpdate": "agent_message_chunk",
                     "content": {"type": "text", "text": chunk}})
    shown = _plain(blocks.block_renderable(next(iter(state.blocks.values())), CWD))
    assert "# Plan" not in shown and "Plan" in shown  # a heading, not its markup
    assert "*text*" not in shown and "text" in shown
    assert "• one" in shown and "• two" in shown
    assert "print('hi')" in shown and "```" not in shown


def test_a_long_answer_is_cut_and_says_both_sizes() -> None:
    block = Block("m", "agent")
    for _ in range(100):
        block.append("word " * 200 + "\n\n")
    shown = _plain(blocks.block_renderable(block, CWD), width=200)
    assert shown.rstrip().endswith("… truncated: 64.0 KiB of 97.9 KiB shown (the whole answer "
                                   "is in the transcript: clanker coder --show)")


def test_a_file_read_is_highlighted_with_line_numbers_and_bounded() -> None:
    source = "".join(f"value_{i} = {i}\n" for i in range(1, 501))
    block = _tool(kind="read", title="read", status="completed",
                  locations=[{"path": f"{CWD}/src/values.py"}],
                  content=[{"type": "content", "content": {"type": "text", "text": source}}])
    lines = _plain(blocks.block_renderable(block, CWD), width=100).splitlines()
    assert lines[0].split() == ["▸", "read", "[read]", "src/values.py", "done"]
    assert lines[1].split() == ["1", "value_1", "=", "1"]
    assert lines[200].split() == ["200", "value_200", "=", "200"]
    assert lines[201] == "… truncated: 200 of 500 lines shown"
    assert len(lines) == 202
    colour = blocks.to_ansi(blocks.block_renderable(block, CWD), 100)
    assert "\x1b[" in colour  # highlighted (Python, from the extension)


def test_an_edit_is_a_unified_diff_with_the_path_relative_to_the_workspace() -> None:
    old = "".join(f"line {i}\n" for i in range(1, 11))
    new = old.replace("line 5\n", "line five\n")
    block = _tool(kind="edit", title="edit", status="completed",
                  content=[{"type": "diff", "path": f"{CWD}/a.txt", "oldText": old,
                            "newText": new}])
    lines = _plain(blocks.block_renderable(block, CWD)).splitlines()
    assert lines[1:4] == ["--- a/a.txt", "+++ b/a.txt", "@@ -2,7 +2,7 @@"]
    assert "-line 5" in lines and "+line five" in lines
    assert lines[-1] == " line 8"  # three lines of context


def test_a_new_file_diffs_against_dev_null() -> None:
    item = {"type": "diff", "path": f"{CWD}/new.txt", "oldText": None, "newText": "hello\n"}
    assert blocks.unified_diff(item, CWD).splitlines()[:2] == ["--- /dev/null", "+++ b/new.txt"]


def test_command_output_is_stripped_of_escapes_and_bounded() -> None:
    output = "".join(f"\x1b[32mok\x1b[0m {i}\n" for i in range(300))
    block = _tool(kind="execute", title="pytest", status="completed",
                  rawInput={"command": ["pytest", "-q", "tests dir"]}, rawOutput={"output": output})
    lines = _plain(blocks.block_renderable(block, CWD)).splitlines()
    assert lines[0].split()[:5] == ["$", "pytest", "-q", "'tests", "dir'"]
    assert lines[1] == "ok 0"
    assert lines[-1] == "… truncated: 200 of 300 lines shown"


def test_the_approval_pane_shows_the_exact_command_and_the_keys_it_offers() -> None:
    fields = {"title": "Run the build", "kind": "execute",
              "rawInput": {"command": "rm -rf build && make"},
              "locations": [{"path": f"{CWD}/build"}]}
    shown = _plain(blocks.approval_pane(fields, cwd=CWD, warning=None, session_choice=False))
    assert "approve execute" in shown.splitlines()[0]
    assert "rm -rf build && make" in shown
    assert "│ build" in shown  # relative to the workspace
    assert "[y] approve once   [n] refuse" in shown
    assert "[a]" not in shown


def test_the_approval_pane_for_an_edit_shows_the_patch_and_the_session_choice() -> None:
    fields = {"title": "edit", "kind": "edit",
              "content": [{"type": "diff", "path": "/elsewhere/x.py", "oldText": "a\n",
                           "newText": "b\n"}]}
    shown = _plain(blocks.approval_pane(fields, cwd=CWD, warning="only a permanent approval",
                                        session_choice=True), width=100)
    assert "/elsewhere/x.py" in shown  # outside the workspace: the path as given
    assert "-a" in shown and "+b" in shown
    assert "warning: only a permanent approval" in shown
    assert "[a] approve edit this session" in shown


def test_the_status_line_names_model_mode_and_cost() -> None:
    state = SessionState()
    state.config_options = [{"id": "model", "category": "model", "currentValue": "m2"}]
    state.apply({"sessionUpdate": "current_mode_update", "currentModeId": "plan"})
    state.apply({"sessionUpdate": "usage_update", "used": 1200, "size": 200000,
                 "cost": {"amount": 0.125, "currency": "USD"}})
    line = blocks.status_line(state, blocks.Status(agent="opencode", working=True,
                                                   note="interrupting"))
    assert line == ("opencode · model m2 · mode plan · 1,200/200,000 tokens · 0.12 USD · "
                    "working · interrupting")


def test_the_live_lines_are_the_tail_of_the_answer_and_the_tool_headers() -> None:
    answer = Block("m", "agent")
    for i in range(1000):
        answer.append(f"line {i}\n")
    tool = _tool(kind="execute", title="make", status="in_progress")
    lines = [t.plain for t in blocks.live_lines([tool, answer], CWD, tail=3)]
    assert lines == ["$ make  [execute]  in_progress", "line 997", "line 998", "line 999"]


def test_unknown_and_own_blocks() -> None:
    state = SessionState()
    state.apply({"sessionUpdate": "future_kind"})
    assert _plain(blocks.block_renderable(next(iter(state.blocks.values())), CWD)).strip() \
        == "unsupported update: future_kind"
    approval = Block("a", "approval", fields={"verdict": "reject", "title": "rm", "kind": None,
                                              "rule": "refused by the person"})
    assert _plain(blocks.block_renderable(approval, CWD)).strip() \
        == "✗ refused rm [no kind]  refused by the person"


@pytest.mark.parametrize("worktree", [False, True])
def test_the_repository_and_branch_are_read_from_git(tmp_path: Path, worktree: bool) -> None:
    repo = tmp_path / "clanker"
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    where = repo / "src"
    where.mkdir()
    if worktree:
        git_dir = repo / ".git" / "worktrees" / "wt"
        git_dir.mkdir(parents=True)
        (git_dir / "HEAD").write_text("ref: refs/heads/feature\n")
        where = tmp_path / "wt"
        where.mkdir()
        (where / ".git").write_text(f"gitdir: {git_dir}\n")
    assert git_place(str(where)) == ("clanker", "feature" if worktree else "main")
    assert git_place(str(tmp_path)) == (None, None)


def _edit(old: str | None, new: str) -> Block:
    return _tool(kind="edit", status="completed", title="edit",
                 content=[{"type": "diff", "path": f"{CWD}/src/app.py", "oldText": old,
                           "newText": new}])


def test_a_split_diff_puts_old_and_new_lines_side_by_side_with_their_numbers() -> None:
    old = "".join(f"v{i}\n" for i in range(1, 21))
    new = old.replace("v3\n", "v3 changed\n").replace("v17\n", "")
    shown = _plain(blocks.block_renderable(_edit(old, new), CWD, split=True), width=60)
    rows = [line.rstrip() for line in shown.splitlines()]
    assert rows[1].split() == ["a/src/app.py", "b/src/app.py"]
    assert any(row.split() == ["3", "v3", "3", "v3", "changed"] for row in rows)
    assert any(row.split() == ["17", "v17"] for row in rows)  # removed: nothing on the right
    assert any(row.split() == ["⋯", "⋯"] for row in rows)  # between the two changes
    assert not any(row.split()[:2] == ["10", "v10"] for row in rows)  # outside the context
    unified = _plain(blocks.block_renderable(_edit(old, new), CWD), width=60)
    assert "-v3\n+v3 changed\n" in unified


def test_a_split_diff_of_a_new_file_and_its_bound() -> None:
    new = "".join(f"n{i}\n" for i in range(300))
    shown = _plain(blocks.split_diff({"path": f"{CWD}/new.py", "newText": new}, CWD), 60)
    assert shown.splitlines()[0].split() == ["/dev/null", "b/new.py"]
    assert "… truncated: 200 of 300 rows shown" in shown
    pane = _plain(blocks.approval_pane(_edit(None, new).fields, cwd=CWD, warning=None,
                                       session_choice=True, split=True), 60)
    assert "… truncated: 30 of 300 rows shown" in pane


def test_what_is_cut_is_collapsed_and_expanded_shows_it_whole() -> None:
    output = "".join(f"line {i}\n" for i in range(1, 251))
    long_run = _tool(kind="execute", status="completed", title="seq",
                     content=[{"type": "content", "content": {"type": "text", "text": output}}])
    short_run = _tool(kind="execute", status="completed", title="seq",
                      content=[{"type": "content", "content": {"type": "text", "text": "ok"}}])
    assert blocks.collapsed(long_run, CWD) and not blocks.collapsed(short_run, CWD)
    assert "line 250" not in _plain(blocks.block_renderable(long_run, CWD))
    expanded = _plain(blocks.block_renderable(long_run, CWD, expanded=True))
    assert "line 250" in expanded and "truncated" not in expanded
    answer = SessionState()
    answer.apply({"sessionUpdate": "agent_message_chunk",
                  "content": {"type": "text", "text": "a" * (blocks.MAX_MARKDOWN + 1)}})
    (message,) = answer.blocks.values()
    assert blocks.collapsed(message, CWD)
    assert "truncated" not in _plain(blocks.block_renderable(message, CWD, expanded=True))
    thought = Block("t", "thought")
    thought.text = "first\nsecond"
    assert blocks.collapsed(thought, CWD)
    assert "second" in _plain(blocks.block_renderable(thought, CWD, expanded=True))
    thought.text = "only one line\n"
    assert not blocks.collapsed(thought, CWD)
    assert not blocks.collapsed(_edit("a\n", "b\n"), CWD)
