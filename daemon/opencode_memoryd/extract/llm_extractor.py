"""LLM extraction: build the prompt for a chunk of transcript, ask the model, gate the answer.

The transcript given here must already be redacted. The answer is parsed and every proposed
memory checked by :mod:`opencode_memoryd.extract.reply`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from importlib import resources
from string import Template
from typing import Any, Protocol

import structlog

from opencode_memoryd.errors import ExtractionError
from opencode_memoryd.extract.reply import MEMORY_SCHEMA, SCHEMA_NAME, parse_reply
from opencode_memoryd.models import ExtractionResult, TranscriptLine
from opencode_memoryd.redaction.engine import redact

log = structlog.get_logger(__name__)

#: Default character limit of one memory, used in the prompt when the caller gives none.
DEFAULT_MAX_CHARS = 300

_DELIMITER = re.compile(r"<(/?transcript)", re.IGNORECASE)


class ChatReplyLike(Protocol):
    """What :class:`LlmExtractor` reads from a chat answer.

    ``content`` is the answer's text, ``tokens_in``/``tokens_out`` the prompt and completion
    tokens the endpoint counted, ``model`` the model that answered and ``finish_reason`` why
    it stopped (``"stop"``, ``"length"`` when cut off, ``None`` when not reported).
    """

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
    """A chat endpoint that answers JSON.

    Implemented by :class:`~opencode_memoryd.extract.chat.ChatClient`.
    """

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



class LlmExtractor:
    """Extracts memories from a transcript chunk with a chat model.

    Args:
        chat: the chat endpoint (``ChatClient`` or any :class:`ChatModel`).
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

        Every proposed memory the answer's gate refuses is in the result's ``rejected``
        (reason, first 80 characters) and logged at debug level (``memory_refused``: the
        reason and the redacted text).

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
        for reason, short in rejected:
            log.debug("memory_refused", reason=reason, text=redact(short).text)
        return ExtractionResult(
            candidates=tuple(accepted),
            tokens_in=reply.tokens_in,
            tokens_out=reply.tokens_out,
            model=reply.model,
            rejected=tuple(rejected),
        )
