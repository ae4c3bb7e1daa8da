"""The pure parts of summaries and briefs: condensed compaction summaries,
caps, which failed commands count as fixed, and the daemon queue's deferred summaries."""

from __future__ import annotations

from pathlib import Path

import pytest

from opencode_memoryd.conversation.activity import command_key, session_activity
from opencode_memoryd.conversation.rows import MessageRow, PartRow
from opencode_memoryd.extract.digest import cap, condense_summary
from opencode_memoryd.state.db import StateDB


def test_cap_cuts_at_a_sentence_or_a_word() -> None:
    text = "One sentence here. Two sentences here. Three sentences here."
    assert cap(text, 100) == text
    assert cap(text, 45) == "One sentence here. Two sentences here."
    assert cap("word " * 30, 20) == "word word word word…"
    assert len(cap("x" * 50, 10)) <= 10


def test_condense_summary_reads_headings_and_bullets() -> None:
    text = ("## Goal\n- Ship the importer\n\n## Instructions\n- Keep Python 3.9\n- No new deps\n"
            "\n## Work State\n### Completed\n- Parser done\n### Blocked\n- (none)\n")
    assert condense_summary(text, max_chars=500) == (
        "Goal: Ship the importer. Instructions: Keep Python 3.9; No new deps. "
        "Completed: Parser done.")


@pytest.mark.parametrize(("command", "key"), [
    ("pytest tests/test_a.py -x", ("pytest", "tests/test_a.py")),
    ("cd web && CI=1 pnpm test --run", ("pnpm", "test")),
    ("make", ("make", "")),
    ("echo 'unbalanced", ("echo", "'unbalanced")),
])
def test_command_key(command: str, key: tuple[str, str]) -> None:
    assert command_key(command) == key


def _bash(command: str, code: int) -> PartRow:
    return PartRow(f"p{command}{code}", {"type": "tool", "tool": "bash", "state": {
        "status": "completed", "input": {"command": command}, "metadata": {"exit": code}}})


def _reply(i: int, *parts: PartRow) -> MessageRow:
    return MessageRow(f"msg_{i:02d}", "ses_x", i, i, {"role": "assistant", "parentID": "u"},
                      list(parts))


def test_a_failure_is_fixed_only_by_a_later_success_of_the_same_check() -> None:
    act = session_activity([
        MessageRow("msg_00", "ses_x", 0, 0, {"role": "user"},
                   [PartRow("t", {"type": "text", "text": "fix it"})]),
        _reply(1, _bash("pytest tests/a.py", 1), _bash("pytest tests/b.py", 1),
               _bash("ruff check .", 1)),
        _reply(2, _bash("pytest tests/a.py -x", 0), _bash("ruff check . --fix", 0),
               _bash("pytest tests/b.py", 2)),
        _reply(3, PartRow("err", {"type": "tool", "tool": "bash", "state": {
            "status": "error", "input": {"command": "npm run build"}, "error": "killed"}})),
    ])
    assert [(f.command, f.exit) for f in act.failing] == [("pytest tests/b.py", 2),
                                                           ("npm run build", None)]
    assert act.last_request == "fix it" and act.last_message_id == "msg_03"
    assert not act.ended_with_compaction


def test_a_deferred_summary_is_due_later_and_never_counts_as_waiting_too_long(
        tmp_path: Path) -> None:
    state = StateDB(tmp_path / "state.db")
    try:
        state.queue.queue_touch_many("src", ["a", "b"], 1_000, 60, 900)
        state.queue.queue_touch_many("src", ["b"], 5_000, 60, 900)  # changed during the run
        assert state.queue.queue_defer("src", "a", 2_000_000, 2_000, 900,
                                       "summary due") == 2_000_000
        assert state.queue.queue_defer("src", "b", 2_000_000, 2_000, 900, "summary due") == 65_000
        rows = {r["session_id"]: r for r in state.queue.queue()}
        assert rows["a"]["first_change_ms"] == 2_000_000 - 900_000
        assert rows["a"]["last_error"] == "summary due"
        # a change before it is due is extracted after the quiet period, as ever
        state.queue.queue_touch_many("src", ["a"], 10_000, 60, 900)
        assert {r["session_id"]: r["due_ms"] for r in state.queue.queue()}["a"] == 70_000
    finally:
        state.close()
