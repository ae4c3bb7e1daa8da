"""Turns and the finished-turn rule, over the messages a reader returns.

A *turn* is one role=user message and the assistant messages that answer it: their
``parentID`` is the user message in ``message`` (1.x), and in ``session_message`` (v2, no
``parentID``) they are the rows that follow it in ``seq`` order up to the next user row. v2
rows of other kinds (notes: ``synthetic``, ``system``, ``shell``, ``compaction``,
``*-switched``, ``idle``) join the turn they follow but are neither question nor answer.
Rules, as observed on databases written by OpenCode 1.2.1 to 1.18.33:

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
  its session whose id was minted well after its time is a copy and is skipped (a message
  written after the clock was set back is stamped before its session too, but its id and
  its time come from the same clock: it is read).

For v2 turns two more rules apply: a turn followed by a later user row is finished once
every answer has ``time.completed`` (or an error), even when the newest one says
``tool-calls`` (the run moved on: a prompt steered into it); and in a 2.x session
(``session_v2``) the turn is finished at once when confirmed idle (:class:`Idle`): an
``idle`` row after its newest answer, or ``time_idle`` at or after that answer's completion
with ``time_suspended`` unset. OpenCode 2.x writes those only when the session's whole busy
period ends (every queued prompt and background job included; read from its source, see
docs/explanation/capture.md, "The end of an OpenCode 2.x turn"), so a turn not
confirmed counts as finished
once it has had no write for ``unconfirmed_ms``: what keeps a turn from being read mid-way
then is its newest answer's ``time.completed`` with a ``finish`` other than ``tool-calls``,
no answer still in flight, and that quiet time. Without ``unconfirmed_ms`` such a turn
waits ``abandoned_ms``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from opencode_memoryd.conversation.rows import MessageRow, sub_object


@dataclass(frozen=True, slots=True)
class Idle:
    """The idle state of a 2.x session (``session_v2``), in ms; see the module docstring."""

    time_idle: int | None
    time_suspended: int | None


@dataclass(slots=True)
class Turn:
    """A user message and the rows that follow it (answers and notes), in read order."""

    user: MessageRow | None
    replies: list[MessageRow] = field(default_factory=list)

    @property
    def answers(self) -> list[MessageRow]:
        """The replies that are model answers (every reply but v2 notes)."""
        return [r for r in self.replies if not r.is_note]

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


def _confirmed_idle(turn: Turn, newest: MessageRow, idle: Idle) -> bool:
    """A 2.x turn's end is confirmed: an ``idle`` row after its newest answer, or
    ``time_idle`` at or after that answer's completion while not suspended."""
    if any(r.kind == "idle" and (r.seq or 0) > (newest.seq or 0) for r in turn.replies):
        return True
    completed = _time(newest, "completed") or newest.time_updated
    return (idle.time_idle is not None and idle.time_idle >= completed
            and not idle.time_suspended)


def _in_flight(answers: Sequence[MessageRow], *, now_ms: int, abandoned_ms: int) -> bool:
    """Whether one of ``answers`` is still being written: not completed, no error, and
    started less than ``abandoned_ms`` before ``now_ms`` (ms)."""
    for r in answers:
        if _time(r, "completed") is None and not r.data.get("error"):
            started = _time(r, "created") or r.time_created
            if now_ms - started < abandoned_ms:
                return True
    return False


def is_finished(turn: Turn, *, now_ms: int, abandoned_ms: int, settle_ms: int,
                followed: bool = False, idle: Idle | None = None,
                unconfirmed_ms: int | None = None) -> bool:
    """Apply the finished-turn rule (see the module docstring).

    Args:
        turn: the turn.
        now_ms: the current time, ms since the epoch.
        abandoned_ms: age after which an in-flight message counts as finished.
        settle_ms: a finished turn must have had no write for this long (OpenCode's
            trailing write lands about 100 ms after the last ``time.completed``).
        followed: a later turn exists (used for v2 turns only).
        idle: the session's idle state when it is a 2.x (``session_v2``) session.
        unconfirmed_ms: how long (ms) a 2.x turn whose newest answer ended with a final
            ``finish`` must have had no write to count as finished when the session is not
            confirmed idle; ``None``: ``abandoned_ms`` after that answer's completion.
    """
    if now_ms - turn.last_write_ms < settle_ms:
        return False
    answers = turn.answers
    if not answers:
        if turn.user is None:
            return True  # notes only: nothing to wait for
        # No answer yet: in flight, unless it has waited longer than any real request.
        return now_ms - turn.user.time_created >= abandoned_ms
    if _in_flight(answers, now_ms=now_ms, abandoned_ms=abandoned_ms):
        return False
    newest = answers[-1]
    if newest.data.get("error") or _time(newest, "completed") is None:
        return True  # aborted, provider error, or abandoned
    age = now_ms - (_time(newest, "completed") or newest.time_created)
    v2 = newest.kind is not None
    if v2 and followed:
        return True  # the run moved on to the next prompt
    if newest.data.get("finish") == "tool-calls":
        # Another step should follow; only an abandoned turn ends here.
        return age >= abandoned_ms
    if v2 and idle is not None and not _confirmed_idle(turn, newest, idle):
        if unconfirmed_ms is not None and now_ms - turn.last_write_ms >= unconfirmed_ms:
            return True  # the step ended for good: no later write for that long
        return age >= abandoned_ms
    return True


def finished_prefix(
    turns: Sequence[Turn], *, now_ms: int, abandoned_ms: int, settle_ms: int,
    idle: Idle | None = None, unconfirmed_ms: int | None = None,
) -> list[Turn]:
    """The leading finished turns: reading stops at the first unfinished one.

    ``idle`` is the session's idle state for a 2.x session, ``unconfirmed_ms`` how long
    one of its turns not confirmed idle must be quiet (see :func:`is_finished`).
    """
    out: list[Turn] = []
    last_user = max((i for i, t in enumerate(turns) if t.user is not None), default=-1)
    for i, t in enumerate(turns):
        followed = i < last_user
        if not is_finished(t, now_ms=now_ms, abandoned_ms=abandoned_ms, settle_ms=settle_ms,
                           followed=followed, idle=idle, unconfirmed_ms=unconfirmed_ms):
            break
        out.append(t)
    return out


#: How far apart (ms) a message's id and its ``time_created`` may have been taken for the
#: message to have been written where it is: OpenCode takes both from one clock within a
#: few ms (0 to 4 ms apart in the sample databases), a fork's copy gets its id when the
#: fork is made, seconds or days after the original's time.
FORK_ID_SKEW_MS = 1000
_ID_HEX = re.compile(r"^[a-z]+_([0-9a-f]{12})")
_ID_BITS = 48


def id_skew_ms(message: MessageRow) -> int | None:
    """How long after its ``time_created`` (ms, negative: before) the message's id was
    minted; ``None`` for an id not in OpenCode's shape.

    An id's 12 hex digits hold the low 48 bits of ``ms * 4096 + counter`` (see
    ``docs/opencode-db.md``, "IDs"), so the difference is known modulo 2**48 / 4096 ms
    (about 2.2 years) and is taken as the one nearest to zero.
    """
    found = _ID_HEX.match(message.id)
    if found is None:
        return None
    span = 1 << _ID_BITS
    diff = (int(found.group(1), 16) - message.time_created * 4096) % span
    if diff >= span // 2:
        diff -= span
    return diff // 4096


def is_fork_copy(message: MessageRow, session_time_created: int) -> bool:
    """Whether a fork copied ``message`` from its source session: it is stamped before the
    session was created, and its id was not minted when it was stamped (a copy keeps
    the original's time and gets a new id). A message written after the writer's clock
    went back is stamped before its session too, but its id comes from the same clock."""
    if message.time_created >= session_time_created:
        return False
    skew = id_skew_ms(message)
    return skew is None or abs(skew) >= FORK_ID_SKEW_MS


def drop_fork_copies(messages: Sequence[MessageRow], session_time_created: int) -> list[MessageRow]:
    """Drop the messages a fork copied from its source session (:func:`is_fork_copy`)."""
    return [m for m in messages if not is_fork_copy(m, session_time_created)]
