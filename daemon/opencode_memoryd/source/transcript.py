"""The transcript an extractor reads: lines of human text, assistant text and tool calls.

Only **human text** is a source of user statements: non-synthetic, non-ignored ``text``
parts of user messages. Compaction requests (a user message with a ``compaction`` part),
compaction summaries (an assistant message with ``summary: true`` or agent ``compaction``),
synthetic continuations and file-read texts are not. Turns are cut into chunks
(:class:`Chunk`) that fit one extraction call, on turn boundaries.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opencode_memoryd.models import TranscriptLine
from opencode_memoryd.source.rows import MessageRow, sub_object
from opencode_memoryd.source.turns import Turn

#: Longest assistant text kept on one transcript line, in characters.
ASSISTANT_TEXT_CHARS = 600
#: Our own MCP tool (``mcp.memoryd`` in OpenCode's config, tool ``memory``): its calls and
#: results are memories we gave out, never a source of new ones.
OWN_TOOL_PREFIX = "memoryd_"
#: The first line of the context block the OpenCode plugin injects; a text part that
#: starts with it is our own text, not the user's.
CONTEXT_MARKER = "<!-- opencode-memoryd context -->"


def _strip_cli_quotes(text: str) -> str:
    # `opencode run "two words"` stores the text with a pair of double quotes added.
    t = text.strip()
    if len(t) >= 2 and t[0] == '"' and t[-1] == '"' and '"' not in t[1:-1]:
        return t[1:-1].strip()
    return t


def human_text(message: MessageRow) -> str:
    """The human-authored text of a role=user message (``""`` when there is none).

    Non-synthetic, non-ignored ``text`` parts only, and never our own context block
    (:data:`CONTEXT_MARKER`); CLI quotes stripped. A message with a ``compaction`` part is
    a compaction request and has no human text.
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
        and not str(p.get("text") or "").lstrip().startswith(CONTEXT_MARKER)
    ]
    return _strip_cli_quotes("\n".join(t for t in texts if t.strip()))


def _short(value: object, limit: int) -> str:
    s = " ".join(str(value).split())
    return s if len(s) <= limit else s[: max(limit - 1, 0)] + "…"


def _tool_line(part: Mapping[str, Any], output_chars: int) -> str:
    tool = str(part.get("tool") or "tool")
    state = sub_object(part, "state")
    inp = sub_object(state, "input")
    status = state.get("status")
    key = (inp.get("command") or inp.get("filePath") or inp.get("path") or inp.get("pattern")
           or inp.get("url") or inp.get("description") or inp.get("query") or "")
    line = f"{tool} {_short(key, 160)}".rstrip()
    if status == "error":
        return f"{line} -> error: {_short(state.get('error') or '', output_chars)}"
    if tool == "bash":
        meta = sub_object(state, "metadata")
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
    tool call to the tool, its key input and, for shell commands, a short output. Calls of
    our own ``memory`` tool (:data:`OWN_TOOL_PREFIX`) are left out.
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
                elif kind == "tool" and not str(p.data.get("tool") or "").startswith(
                        OWN_TOOL_PREFIX):
                    lines.append(TranscriptLine(m.id, "tool",
                                                _tool_line(p.data, tool_output_chars)))
    return lines


def estimate_tokens(text: str) -> int:
    """A model-independent token estimate: one token per 4 characters, at least 1."""
    return max(1, (len(text) + 3) // 4)


@dataclass(frozen=True, slots=True)
class Chunk:
    """Consecutive turns whose transcript fits one extraction call.

    ``last`` is the high-water mark reached once the chunk is processed, ``seq`` the
    largest ``rowid`` among its messages.
    """

    lines: tuple[TranscriptLine, ...]
    first: tuple[int, str]
    last: tuple[int, str]
    seq: int = 0

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
    seq = 0
    for turn in turns:
        lines = transcript_lines([turn], tool_output_chars=tool_output_chars)
        cost = sum(estimate_tokens(line.render()) + 1 for line in lines)
        if cur and cur_tokens + cost > max_tokens:
            assert first is not None and last is not None
            chunks.append(Chunk(tuple(cur), first, last, seq))
            cur, cur_tokens, first, seq = [], 0, None, 0
        if cost > max_tokens:
            lines = _fit(lines, max_tokens)
            cost = sum(estimate_tokens(line.render()) + 1 for line in lines)
        if first is None:
            first = turn.messages[0].mark
        cur.extend(lines)
        cur_tokens += cost
        last = turn.last.mark
        seq = max([seq, *(m.seq for m in turn.messages)])
    if first is not None and last is not None:
        chunks.append(Chunk(tuple(cur), first, last, seq))
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
