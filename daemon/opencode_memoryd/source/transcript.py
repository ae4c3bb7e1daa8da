"""Turns, the finished-turn rule, and the transcript an extractor reads.

A *turn* is one role=user message and the assistant messages that answer it (their
``parentID`` is the user message). Rules from ``docs/opencode-db.md`` §6-§8:

* a turn is **finished** when every assistant message of it has ``time.completed`` and the
  newest one has a ``finish`` other than ``tool-calls`` or has an ``error``; an assistant
  message still in flight after ``abandoned_ms`` counts as finished (a crashed OpenCode leaves
  one forever), and so does a user message that never got an answer in that time;
* only **human text** is a source of user statements: non-synthetic, non-ignored ``text``
  parts of user messages. Compaction requests (a ``compaction`` part), compaction summaries
  (``summary: true``), synthetic continuations and file-read texts are not;
* copied turns of a fork keep the original ``time_created``, which is older than the fork
  session itself, so a message created before its session is a copy and is skipped.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from opencode_memoryd.models import TranscriptLine
from opencode_memoryd.source.reader import MessageRow

#: Longest assistant text kept on one transcript line, in characters.
ASSISTANT_TEXT_CHARS = 600


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
            t = Turn(user=m)
            turns.append(t)
            by_user[m.id] = t
        else:
            parent = str(m.data.get("parentID") or "")
            t = by_user.get(parent) or (turns[-1] if turns else None)
            if t is None:
                t = Turn(user=None)
                turns.append(t)
            t.replies.append(m)
    return turns


def _time(m: MessageRow, key: str) -> int | None:
    t = m.data.get("time")
    value = t.get(key) if isinstance(t, dict) else None
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


def _strip_cli_quotes(text: str) -> str:
    # `opencode run "two words"` stores the text with the quotes added (docs §6).
    t = text.strip()
    if len(t) >= 2 and t[0] == '"' and t[-1] == '"' and '"' not in t[1:-1]:
        return t[1:-1].strip()
    return t


def human_text(message: MessageRow) -> str:
    """The human-authored text of a role=user message (``""`` when there is none).

    Non-synthetic, non-ignored ``text`` parts only; CLI quotes stripped. A message with a
    ``compaction`` part is a compaction request and has no human text.
    """
    if message.role != "user":
        return ""
    parts = [p.data for p in message.parts]
    if any(p.get("type") == "compaction" for p in parts):
        return ""
    texts = [
        str(p.get("text") or "")
        for p in parts
        if p.get("type") == "text" and not p.get("synthetic") and not p.get("ignored")
    ]
    return _strip_cli_quotes("\n".join(t for t in texts if t.strip()))


def _short(value: object, limit: int) -> str:
    s = " ".join(str(value).split())
    return s if len(s) <= limit else s[: max(limit - 1, 0)] + "…"


def _tool_line(part: dict[str, Any], output_chars: int) -> str:
    tool = str(part.get("tool") or "tool")
    state = part.get("state") if isinstance(part.get("state"), dict) else {}
    assert isinstance(state, dict)
    inp = state.get("input") if isinstance(state.get("input"), dict) else {}
    assert isinstance(inp, dict)
    status = state.get("status")
    key = (inp.get("command") or inp.get("filePath") or inp.get("path") or inp.get("pattern")
           or inp.get("url") or inp.get("description") or inp.get("query") or "")
    line = f"{tool} {_short(key, 160)}".rstrip()
    if status == "error":
        return f"{line} -> error: {_short(state.get('error') or '', output_chars)}"
    if tool == "bash":
        meta = state.get("metadata") if isinstance(state.get("metadata"), dict) else {}
        assert isinstance(meta, dict)
        out = _short(state.get("output") or "", output_chars)
        code = meta.get("exit")
        suffix = f" (exit {code})" if code not in (None, 0) else ""
        return f"{line}{suffix} -> {out}" if out else f"{line}{suffix}"
    if tool in ("task",):
        return f"{line} (sub-agent)"
    return line


def transcript_lines(turns: Iterable[Turn], *, tool_output_chars: int) -> list[TranscriptLine]:
    """Render turns as transcript lines, each tagged with its message id.

    User lines carry human text only; assistant lines carry the model's visible text
    (reasoning, compaction summaries and fork copies left out); tool lines condense each
    tool call to the tool, its key input and, for shell commands, a short output.
    """
    lines: list[TranscriptLine] = []
    for turn in turns:
        for m in turn.messages:
            if m.corrupt:
                continue
            if m.role == "user":
                t = human_text(m)
                if t:
                    lines.append(TranscriptLine(m.id, "user", t))
                continue
            if m.data.get("summary") is True or m.data.get("agent") == "compaction":
                continue
            for p in m.parts:
                kind = p.data.get("type")
                if kind == "text" and not p.data.get("synthetic"):
                    t = str(p.data.get("text") or "").strip()
                    if t:
                        lines.append(TranscriptLine(m.id, "assistant",
                                                    _short(t, ASSISTANT_TEXT_CHARS)))
                elif kind == "tool":
                    lines.append(TranscriptLine(m.id, "tool",
                                                _tool_line(dict(p.data), tool_output_chars)))
    return lines


def drop_fork_copies(messages: Sequence[MessageRow], session_time_created: int) -> list[MessageRow]:
    """Drop the messages a fork copied from its source session.

    A fork's copies keep the original ``time_created`` and so predate the fork session
    (docs/opencode-db.md §6, "Fork"); messages written in the session itself never do.
    """
    return [m for m in messages if m.time_created >= session_time_created]


def estimate_tokens(text: str) -> int:
    """A model-independent token estimate: one token per 4 characters, at least 1."""
    return max(1, (len(text) + 3) // 4)


@dataclass(frozen=True, slots=True)
class Chunk:
    """Consecutive turns whose transcript fits one extraction call.

    ``last`` is the high-water mark reached once the chunk is processed.
    """

    lines: tuple[TranscriptLine, ...]
    first: tuple[int, str]
    last: tuple[int, str]

    @property
    def has_user_text(self) -> bool:
        """Whether any line is human text (no extraction is needed otherwise)."""
        return any(line.role == "user" for line in self.lines)


def chunk_turns(
    turns: Sequence[Turn], *, max_tokens: int, tool_output_chars: int
) -> list[Chunk]:
    """Split turns into chunks of at most ``max_tokens`` (estimated) each.

    Chunks end on turn boundaries; a single turn larger than the budget is cut between
    lines, keeping its user lines first, and its tail beyond the budget is dropped except
    for user lines (human text is never dropped).
    """
    chunks: list[Chunk] = []
    cur: list[TranscriptLine] = []
    cur_tokens = 0
    first: tuple[int, str] | None = None
    last: tuple[int, str] | None = None
    for turn in turns:
        lines = transcript_lines([turn], tool_output_chars=tool_output_chars)
        cost = sum(estimate_tokens(line.render()) + 1 for line in lines)
        if cur and cur_tokens + cost > max_tokens:
            assert first is not None and last is not None
            chunks.append(Chunk(tuple(cur), first, last))
            cur, cur_tokens, first = [], 0, None
        if cost > max_tokens:
            lines = _fit(lines, max_tokens)
            cost = sum(estimate_tokens(line.render()) + 1 for line in lines)
        if first is None:
            first = turn.messages[0].mark
        cur.extend(lines)
        cur_tokens += cost
        last = turn.last.mark
    if first is not None and last is not None:
        chunks.append(Chunk(tuple(cur), first, last))
    return chunks


def _fit(lines: list[TranscriptLine], max_tokens: int) -> list[TranscriptLine]:
    """Keep every user line and as many other lines, in order, as fit the budget."""
    budget = max_tokens - sum(estimate_tokens(x.render()) + 1 for x in lines if x.role == "user")
    keep: list[TranscriptLine] = []
    for line in lines:
        if line.role == "user":
            keep.append(line)
            continue
        cost = estimate_tokens(line.render()) + 1
        if cost <= budget:
            keep.append(line)
            budget -= cost
    return keep
