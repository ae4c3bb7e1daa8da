"""The transcript an extractor reads: lines of human text, assistant text and tool calls.

Only **human text** is a source of user statements: non-synthetic, non-ignored ``text``
parts of user messages (``data.text`` of a v2 ``user`` row). Compaction requests (a user
message with a ``compaction`` part), compaction summaries (an assistant message with
``summary: true`` or agent ``compaction``, a v2 ``compaction`` row), synthetic continuations,
file-read texts and v2 notes (``synthetic``, ``system``, ``shell``, ``*-switched``, ``idle``
rows) are not. Turns are cut into chunks (:class:`Chunk`) that fit one extraction call, on
turn boundaries. :func:`readable` renders one message for a person (the history browser),
with the same condensed tool lines.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opencode_memoryd.conversation.rows import MessageRow, sub_object
from opencode_memoryd.conversation.turns import Turn
from opencode_memoryd.models import TranscriptLine
from opencode_memoryd.redaction.engine import join_split_tokens

#: Longest assistant text kept on one transcript line, in characters.
ASSISTANT_TEXT_CHARS = 600
#: Our own MCP tool (``mcp.memoryd`` in OpenCode's config, tool ``memory``): its calls and
#: results are memories we gave out, never a source of new ones.
OWN_TOOL_PREFIX = "memoryd_"
#: The first line of the context block the OpenCode plugin injects; a text part that
#: starts with it is our own text, not the user's.
CONTEXT_MARKER = "<!-- opencode-memoryd context -->"
#: The first line of a user message's recall part (the plugin adds it as a synthetic part).
RECALL_MARKER = "<!-- opencode-memoryd recall -->"


def strip_cli_quotes(text: str) -> str:
    """``text`` stripped, without the pair of double quotes ``opencode run "two words"``
    adds around a message's text (a text with other double quotes inside is kept as is)."""
    t = text.strip()
    if len(t) >= 2 and t[0] == '"' and t[-1] == '"' and '"' not in t[1:-1]:
        return t[1:-1].strip()
    return t


def human_text(message: MessageRow) -> str:
    """The human-authored text of a role=user message (``""`` when there is none).

    Non-synthetic, non-ignored ``text`` parts only, and never our own context block or
    recall part (:data:`CONTEXT_MARKER`, :data:`RECALL_MARKER`), even one that lost its
    ``synthetic`` flag; CLI quotes stripped. A message with a ``compaction`` part is
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
        and not str(p.get("text") or "").lstrip().startswith((CONTEXT_MARKER, RECALL_MARKER))
    ]
    return strip_cli_quotes("\n".join(t for t in texts if t.strip()))


def _short(value: object, limit: int) -> str:
    """``value`` with white space folded, cut to ``limit`` characters (``…`` included).

    A key pasted over two lines is joined first
    (:func:`~opencode_memoryd.redaction.engine.join_split_tokens`), so that folding does
    not make two words of it. The cut never falls inside a word: the partly kept word is
    dropped whole, so that a secret cut in two (whose prefix no redaction rule would
    know) is never half sent.
    """
    raw = str(value)
    # Only the start matters: a huge tool output is read up to a margin past the limit
    # (all of it when folding leaves less than the limit, as in a run of blanks).
    head = raw[: limit * 4 + 4096]
    s = " ".join(join_split_tokens(head).split())
    if len(s) <= limit and len(head) < len(raw):
        s = " ".join(join_split_tokens(raw).split())
    if len(s) <= limit:
        return s
    cut = s[: max(limit - 1, 0)]
    if s[len(cut)] != " ":  # the cut falls inside a word: drop that word
        cut = cut[: max(cut.rfind(" "), 0)]
    return cut.rstrip() + "…"


def tool_line(part: Mapping[str, Any], output_chars: int) -> str:
    """One line for a ``tool`` part: the tool, its key input (command, path, pattern, …)
    and, for a shell command, its exit code and output shortened to ``output_chars``; an
    error as ``-> error: …``; a sub-agent call as ``(sub-agent)``."""
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
            if m.corrupt or m.is_note:
                continue
            if m.role == "user":
                t = human_text(m)
                if t:
                    lines.append(TranscriptLine(m.id, "user", t))
                continue
            if not is_compaction_summary(m):
                lines += _assistant_lines(m, tool_output_chars)
    return lines


def _assistant_lines(m: MessageRow, tool_output_chars: int) -> list[TranscriptLine]:
    """The transcript lines of an assistant message ``m``: its visible text parts (not
    synthetic ones) and its tool calls (not our own ``memory`` tool's), in order."""
    lines: list[TranscriptLine] = []
    for p in m.parts:
        kind = p.data.get("type")
        if kind == "text" and not p.data.get("synthetic"):
            t = str(p.data.get("text") or "").strip()
            if t:
                lines.append(TranscriptLine(m.id, "assistant", _short(t, ASSISTANT_TEXT_CHARS)))
        elif kind == "tool" and not str(p.data.get("tool") or "").startswith(OWN_TOOL_PREFIX):
            lines.append(TranscriptLine(m.id, "tool", tool_line(p.data, tool_output_chars)))
    return lines


def is_compaction_summary(message: MessageRow) -> bool:
    """Whether a (non-user) message is a compaction summary (``summary: true`` or agent
    ``compaction``): it restates earlier turns."""
    return message.data.get("summary") is True or message.data.get("agent") == "compaction"


def compaction_request(message: MessageRow) -> Mapping[str, Any] | None:
    """The ``compaction`` part of a user message that requests a compaction, else ``None``."""
    if message.role != "user":
        return None
    return next((p.data for p in message.parts if p.data.get("type") == "compaction"), None)


@dataclass(frozen=True, slots=True)
class Readable:
    """One message as a person reads it (see :func:`readable`).

    ``kind`` is ``text`` (a user or assistant message), ``compaction`` (the user message
    that asks for a compaction), ``summary`` (a compaction summary) or ``synthetic`` (a
    user message OpenCode wrote itself, e.g. the continuation after an automatic
    compaction).
    """

    kind: str
    text: str


def readable(message: MessageRow, *, tool_output_chars: int) -> Readable:
    """A message as readable text: its text parts joined, tool calls one line each.

    User messages: the human text (:func:`human_text`), then ``[file: name]`` for each
    attachment; OpenCode's synthetic text parts (the file-read texts it adds) are left
    out, unless they are all the message holds (``kind`` ``synthetic``). Assistant
    messages: the visible text parts, each tool call as ``[tool] …`` (:func:`tool_line`)
    and an ``[error: Name]`` line when the step failed (a v2 error's ``type``); reasoning
    is left out. Corrupt
    rows read as empty text.
    """
    if message.corrupt:
        return Readable("text", "")
    if message.role == "user":
        request = compaction_request(message)
        if request is not None:
            how = "automatic" if request.get("auto") else "manual"
            return Readable("compaction", f"[compaction requested: {how}]")
        lines = [human_text(message)]
        lines += [f"[file: {p.data.get('filename') or p.data.get('url') or '?'}]"
                  for p in message.parts if p.data.get("type") == "file"]
        text = "\n".join(x for x in lines if x)
        if text:
            return Readable("text", text)
        synthetic = [str(p.data.get("text") or "").strip() for p in message.parts
                     if p.data.get("type") == "text" and p.data.get("synthetic")]
        return Readable("synthetic", "\n".join(t for t in synthetic if t))
    out: list[str] = []
    for p in message.parts:
        kind = p.data.get("type")
        if kind == "text" and not p.data.get("synthetic"):
            t = str(p.data.get("text") or "").strip()
            if t:
                out.append(t)
        elif kind == "tool":
            out.append("[tool] " + tool_line(p.data, tool_output_chars))
    error = sub_object(message.data, "error")
    if error:
        out.append(f"[error: {error.get('name') or error.get('type') or 'unknown'}]")
    return Readable("summary" if is_compaction_summary(message) else "text", "\n".join(out))


def estimate_tokens(text: str) -> int:
    """A model-independent token estimate: one token per 4 characters, at least 1."""
    return max(1, (len(text) + 3) // 4)


@dataclass(frozen=True, slots=True)
class Chunk:
    """Consecutive turns whose transcript fits one extraction call.

    ``last`` is the high-water mark reached once the chunk is processed, ``rowid`` the
    largest ``message`` rowid among its messages (0 for ``session_message`` rows).
    """

    lines: tuple[TranscriptLine, ...]
    first: tuple[int, str]
    last: tuple[int, str]
    rowid: int = 0

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
    rowid = 0
    for turn in turns:
        lines = transcript_lines([turn], tool_output_chars=tool_output_chars)
        cost = sum(estimate_tokens(line.render()) + 1 for line in lines)
        if cur and cur_tokens + cost > max_tokens:
            assert first is not None and last is not None
            chunks.append(Chunk(tuple(cur), first, last, rowid))
            cur, cur_tokens, first, rowid = [], 0, None, 0
        if cost > max_tokens:
            lines = _fit(lines, max_tokens)
            cost = sum(estimate_tokens(line.render()) + 1 for line in lines)
        if first is None:
            first = turn.messages[0].mark
        cur.extend(lines)
        cur_tokens += cost
        last = turn.last.mark
        rowid = max([rowid, *(m.rowid for m in turn.messages)])
    if first is not None and last is not None:
        chunks.append(Chunk(tuple(cur), first, last, rowid))
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
