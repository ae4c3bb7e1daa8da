"""The LLM extraction use case: build the prompt, parse and validate the model's answer.

The model's answer is untrusted (docs/reliability.md §4.3). Besides the strict schema, every
proposed memory must cite message ids that exist in the input and at least one line the user
wrote, must be within the character limit and must not look like junk (hashes, stack traces,
paths). The transcript given here must already be redacted.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from importlib import resources
from string import Template
from typing import Any, Protocol

import structlog

from opencode_memoryd.errors import ExtractionError
from opencode_memoryd.models import (
    MEMORY_TYPES,
    SCOPES,
    ExtractionResult,
    MemoryCandidate,
    TranscriptLine,
    normalize_text,
)

log = structlog.get_logger(__name__)

#: The schema name sent with ``json_schema`` mode.
SCHEMA_NAME = "memories"

#: Default character limit of one memory, used in the prompt when the caller gives none.
DEFAULT_MAX_CHARS = 300

#: Strict-mode compatible JSON schema of the answer.
MEMORY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "memories": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "content": {"type": "string"},
                    "type": {"type": "string", "enum": list(MEMORY_TYPES)},
                    "scope": {"type": "string", "enum": list(SCOPES)},
                    "message_ids": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["content", "type", "scope", "message_ids"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["memories"],
    "additionalProperties": False,
}

_SHORT = 80
_FENCE = re.compile(r"^\s*```[a-zA-Z]*\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)
_DELIMITER = re.compile(r"<(/?transcript)", re.IGNORECASE)
_HEX = re.compile(r"^(commit\s+)?[0-9a-f]{7,64}$", re.IGNORECASE)
_TRACE = re.compile(
    r"Traceback \(most recent call last\)"
    r"|File \"[^\"]+\", line \d+"
    r"|^\s*at \S+ \(\S+:\d+(:\d+)?\)"
    r"|^\s*at [\w.$<>]+\([\w.]+:\d+\)",
    re.MULTILINE,
)
_PATH_TOKEN = re.compile(
    r"^(\w+://\S+"  # a URL
    r"|[~.]{0,2}/?[\w.@+\-]+(/[\w.@+\-]*)+"  # a/b/c, /a/b, ./a, ~/a
    r"|[A-Za-z]:\\\S*"  # C:\...
    r"|[\w@+\-]+\.\w{1,5})$"  # file.ext
)


class ChatReplyLike(Protocol):
    """What :class:`LlmExtractor` reads from a chat answer."""

    @property
    def content(self) -> str: ...
    @property
    def tokens_in(self) -> int: ...
    @property
    def tokens_out(self) -> int: ...
    @property
    def model(self) -> str: ...
    @property
    def finish_reason(self) -> str | None: ...


class ChatModel(Protocol):
    """A chat endpoint that answers JSON (implemented by ``llm.ChatClient``)."""

    def complete_json(
        self, *, system: str, user: str, schema: dict[str, Any], schema_name: str
    ) -> ChatReplyLike: ...


@functools.cache
def _prompt_file(name: str) -> str:
    return resources.files("opencode_memoryd.extract").joinpath("prompts", name).read_text("utf-8")


def render_transcript(lines: Sequence[TranscriptLine]) -> str:
    """Render the transcript block: one :meth:`TranscriptLine.render` per line.

    Continuation lines of a multi-line text are indented by four spaces so that text cannot
    pose as a line of its own, and ``<transcript>`` tags inside the text are escaped
    (``&lt;transcript>``) so that text cannot close the block.
    """
    out = []
    for line in lines:
        text = _DELIMITER.sub(r"&lt;\1", line.render())
        out.append(text.replace("\r\n", "\n").replace("\n", "\n    "))
    return "\n".join(out)


def build_prompt(
    lines: Sequence[TranscriptLine],
    *,
    project_root: str | None,
    max_memories: int,
    max_chars: int = DEFAULT_MAX_CHARS,
) -> tuple[str, str]:
    """Return ``(system, user)`` prompts for one chunk of (redacted) transcript.

    The system prompt is fixed (``prompts/extract_system.md``); the user prompt
    (``prompts/extract_user.md``) holds the project root (``none`` when unknown), the limits
    and the transcript between ``<transcript>`` and ``</transcript>``.
    """
    system = _prompt_file("extract_system.md").strip()
    user = Template(_prompt_file("extract_user.md")).substitute(
        project_root=project_root or "none",
        max_memories=max_memories,
        max_chars=max_chars,
        transcript=render_transcript(lines),
    )
    return system, user.strip()


def load_json_list(content: str, key: str, what: str = "the answer") -> list[Any]:
    """Decode a model's JSON reply (a ```json fence tolerated) and return ``reply[key]``.

    Raises:
        ExtractionError: not JSON, or not an object whose ``key`` is a list.
    """
    text = content.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1).strip()
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ExtractionError(f"{what} is not JSON ({len(content)} chars)") from exc
    items = data.get(key) if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise ExtractionError(f'{what} is not an object with a "{key}" list')
    return items


def _load(content: str) -> list[Any]:
    return load_json_list(content, "memories")


def junk_reason(content: str) -> str | None:
    """Why ``content`` is junk rather than a durable fact, or ``None`` when it is not.

    Junk: a bare commit hash or hex string, a stack trace, a bare path or URL or a list of
    them, a single word, or text that is mostly not letters.
    """
    bare = content.strip().strip("`'\".").strip()
    if _HEX.match(bare):
        return "commit hash"
    if _TRACE.search(content):
        return "stack trace"
    tokens = [t for t in re.split(r"[\s,;]+", bare) if t]
    if tokens and all(_PATH_TOKEN.match(t.strip("`'\"()[]")) for t in tokens):
        return "bare path"
    if len(tokens) < 2:
        return "not a sentence"
    visible = [c for c in content if not c.isspace()]
    letters = sum(c.isalpha() for c in visible)
    if letters < len(visible) / 2:
        return "mostly non-letters"
    return None


def _check_item(
    item: Any, roles: dict[str, str], max_chars: int
) -> tuple[MemoryCandidate | None, str, str]:
    """Validate one proposed memory: ``(candidate or None, reject reason, short text)``."""
    if not isinstance(item, dict):
        return None, "not an object", str(item)[:_SHORT]
    raw = item.get("content")
    content = " ".join(raw.split()) if isinstance(raw, str) else ""
    short = content[:_SHORT]
    type_ = str(item.get("type") or "").strip().lower()
    scope = str(item.get("scope") or "").strip().lower()
    ids_raw = item.get("message_ids")
    if not content:
        return None, "empty content", short
    if len(content) > max_chars:
        return None, "too long", short
    if type_ not in MEMORY_TYPES:
        return None, "unknown type", short
    if scope not in SCOPES:
        return None, "unknown scope", short
    if not isinstance(ids_raw, list) or not ids_raw:
        return None, "no message_ids", short
    ids = tuple(dict.fromkeys(str(i).strip().strip("[]").strip() for i in ids_raw))
    if any(i not in roles for i in ids):
        return None, "unknown message_id", short
    if not any(roles[i] == "user" for i in ids):
        return None, "cites no user line", short
    reason = junk_reason(content)
    if reason:
        return None, f"junk: {reason}", short
    if type_ == "project":
        scope = "project"  # a fact about this project never applies to every project
    candidate = MemoryCandidate(content, type_, scope, ids, "llm")  # type: ignore[arg-type]
    return candidate, "", short


def parse_reply(
    content: str,
    *,
    lines: Sequence[TranscriptLine],
    max_memories: int,
    max_chars: int,
) -> tuple[list[MemoryCandidate], list[tuple[str, str]]]:
    """Parse the model's answer into accepted candidates and rejections.

    ``content`` must be a JSON object ``{"memories": [...]}``, optionally inside a Markdown
    code fence. Each memory is validated against ``lines`` (see the module docstring);
    whitespace in its content is collapsed. Duplicates (same :func:`normalize_text`) and
    memories beyond ``max_memories`` are rejected. Memory type ``project`` always gets scope
    ``project``.

    Returns:
        ``(accepted, rejected)``; ``rejected`` holds ``(reason, first 80 chars of content)``.

    Raises:
        ExtractionError: the answer is not JSON or not of the expected top-level shape.
    """
    items = _load(content)
    roles: dict[str, str] = {}
    for line in lines:
        # A message with both user text and tool lines counts as the user's.
        if roles.get(line.message_id) != "user":
            roles[line.message_id] = line.role
    accepted: list[MemoryCandidate] = []
    rejected: list[tuple[str, str]] = []
    seen: set[str] = set()
    for item in items:
        candidate, reason, short = _check_item(item, roles, max_chars)
        if candidate is None:
            rejected.append((reason, short))
            continue
        key = normalize_text(candidate.content)
        if key in seen:
            rejected.append(("duplicate", short))
        elif len(accepted) >= max_memories:
            rejected.append(("over cap", short))
        else:
            seen.add(key)
            accepted.append(candidate)
    return accepted, rejected


class LlmExtractor:
    """Extracts memories from a transcript chunk with a chat model.

    Args:
        chat: the chat endpoint (``llm.ChatClient`` or any :class:`ChatModel`).
        max_memories: most memories accepted per call.
        max_chars: longest accepted memory, in characters.

    Attributes:
        name: ``"llm"`` (the extractor's name in reports and logs).
    """

    name = "llm"

    def __init__(self, chat: ChatModel, *, max_memories: int, max_chars: int) -> None:
        if max_memories < 1 or max_chars < 1:
            raise ValueError("max_memories and max_chars must be positive")
        self.chat = chat
        self.max_memories = max_memories
        self.max_chars = max_chars

    def extract(
        self, lines: Sequence[TranscriptLine], *, project_root: str | None = None
    ) -> ExtractionResult:
        """Extract memories from ``lines`` (already redacted).

        A chunk without any user line makes no call (no memory could be accepted) and yields
        an empty result with model ``"none"`` and zero tokens.

        Raises:
            UpstreamError: the endpoint failed (from the chat client).
            ExtractionError: the answer is missing, not JSON, or of the wrong shape; the
                message says when the answer was cut off (``finish_reason=length``).
        """
        if not any(line.role == "user" for line in lines):
            return ExtractionResult(candidates=(), model="none")
        system, user = build_prompt(
            lines, project_root=project_root, max_memories=self.max_memories,
            max_chars=self.max_chars,
        )
        reply = self.chat.complete_json(
            system=system, user=user, schema=MEMORY_SCHEMA, schema_name=SCHEMA_NAME
        )
        try:
            accepted, rejected = parse_reply(
                reply.content, lines=lines, max_memories=self.max_memories,
                max_chars=self.max_chars,
            )
        except ExtractionError as exc:
            if reply.finish_reason == "length":
                raise ExtractionError(f"{exc}; the answer was cut off (finish_reason=length)") \
                    from exc
            raise
        log.debug("extraction.parsed", accepted=len(accepted), rejected=len(rejected),
                  reasons=sorted({reason for reason, _ in rejected}))
        return ExtractionResult(
            candidates=tuple(accepted),
            tokens_in=reply.tokens_in,
            tokens_out=reply.tokens_out,
            model=reply.model,
            rejected=tuple(rejected),
        )
