"""Turns and the finished-turn rule, over the messages a reader returns.

A *turn* is one role=user message and the assistant messages that answer it (their
``parentID`` is the user message). Rules, as observed on databases written by OpenCode
1.2.1 to 1.18.33:

* a turn is **finished** when every assistant message of it has ``time.completed`` and the
  newest one has a ``finish`` other than ``tool-calls`` or has an ``error``; an assistant
  message still in flight after ``abandoned_ms`` counts as finished (a crashed OpenCode leaves
  one forever), and so does a user message that never got an answer in that time. OpenCode
  writes the last row of a turn about 100 ms after the newest ``time.completed``, so a turn
  must also have been quiet for ``settle_ms``;
* an aborted message gets ``time.completed`` and an ``error`` and no ``finish``, and so does
  a provider error;
* a fork copies the messages of its source session with new ids but the original
  ``time_created``, which is older than the fork session itself, so a message created before
  its session is a copy and is skipped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from opencode_memoryd.source.rows import MessageRow, sub_object


@dataclass(slots=True)
class Turn:
    """A user message and its assistant replies, in ``(time_created, id)`` order."""

    user: MessageRow | None
    replies: list[MessageRow] = field(default_factory=list)

    @property
    def messages(self) -> list[MessageRow]:
        """All messages of the turn in order (the user message first)."""
        return ([self.user] if self.user else []) + self.replies

    @property
    def last(self) -> MessageRow:
        """The turn's last message: its high-water mark once processed."""
        return self.messages[-1]

    @property
    def last_write_ms(self) -> int:
        """The newest ``time_updated`` of the turn's messages, in ms."""
        return max(m.time_updated for m in self.messages)


def group_turns(messages: Sequence[MessageRow]) -> list[Turn]:
    """Group ordered messages into turns.

    An assistant message joins the turn of its ``parentID``; one whose parent is not in the
    batch (already processed, or deleted by a revert) joins the current turn, or starts a
    turn with no user message.
    """
    turns: list[Turn] = []
    by_user: dict[str, Turn] = {}
    for m in messages:
        if m.role == "user" or (m.corrupt and not turns):
            turn = Turn(user=m)
            turns.append(turn)
            by_user[m.id] = turn
        else:
            parent = str(m.data.get("parentID") or "")
            owner = by_user.get(parent) or (turns[-1] if turns else None)
            if owner is None:
                owner = Turn(user=None)
                turns.append(owner)
            owner.replies.append(m)
    return turns


def _time(m: MessageRow, key: str) -> int | None:
    value = sub_object(m.data, "time").get(key)
    return int(value) if isinstance(value, int | float) else None


def is_finished(turn: Turn, *, now_ms: int, abandoned_ms: int, settle_ms: int) -> bool:
    """Apply the finished-turn rule (see the module docstring).

    Args:
        turn: the turn.
        now_ms: the current time, ms since the epoch.
        abandoned_ms: age after which an in-flight message counts as finished.
        settle_ms: a finished turn must have had no write for this long (OpenCode's
            trailing write lands about 100 ms after the last ``time.completed``).
    """
    if now_ms - turn.last_write_ms < settle_ms:
        return False
    if not turn.replies:
        # No answer yet: in flight, unless it has waited longer than any real request.
        return turn.user is not None and now_ms - turn.user.time_created >= abandoned_ms
    for r in turn.replies:
        if _time(r, "completed") is None and not r.data.get("error"):
            started = _time(r, "created") or r.time_created
            if now_ms - started < abandoned_ms:
                return False
    newest = turn.replies[-1]
    if newest.data.get("error") or _time(newest, "completed") is None:
        return True  # aborted, provider error, or abandoned
    if newest.data.get("finish") == "tool-calls":
        # Another step should follow; only an abandoned turn ends here.
        return now_ms - (_time(newest, "completed") or newest.time_created) >= abandoned_ms
    return True


def finished_prefix(
    turns: Sequence[Turn], *, now_ms: int, abandoned_ms: int, settle_ms: int
) -> list[Turn]:
    """The leading finished turns: reading stops at the first unfinished one."""
    out: list[Turn] = []
    for t in turns:
        if not is_finished(t, now_ms=now_ms, abandoned_ms=abandoned_ms, settle_ms=settle_ms):
            break
        out.append(t)
    return out


def drop_fork_copies(messages: Sequence[MessageRow], session_time_created: int) -> list[MessageRow]:
    """Drop the messages a fork copied from its source session.

    A fork's copies keep the original ``time_created`` and so predate the fork session
    (see the module docstring); messages written in the session itself never do.
    """
    return [m for m in messages if m.time_created >= session_time_created]
