"""LLM extraction: build the prompt for a chunk of transcript, ask the model, gate the answer.

The transcript given here must already be redacted. The answer is parsed and every proposed
memory checked by :mod:`opencode_memoryd.extract.reply`. The answer is capped at
:func:`reply_token_cap` tokens unless the configuration says otherwise; an answer that hit a
cap (as many memories as allowed, ``"more": true``, or the token cap) is marked
``saturated`` so that the caller splits the chunk rather than lose facts.
"""

from __future__ import annotations

import functools
import hashlib
import math
import re
from collections.abc import Sequence
from importlib import resources
from string import Template

import structlog

from opencode_memoryd.errors import ExtractionError, ReplyCutOff
from opencode_memoryd.extract.reply import MEMORY_SCHEMA, SCHEMA_NAME, parse_reply, said_more
from opencode_memoryd.llm.model import ChatModel
from opencode_memoryd.models import ExtractionResult, TranscriptLine
from opencode_memoryd.redaction.engine import redact

log = structlog.get_logger(__name__)

#: Default character limit of one memory, used in the prompt when the caller gives none.
DEFAULT_MAX_CHARS = 300

_DELIMITER = re.compile(r"<(/?transcript)", re.IGNORECASE)


def reply_token_cap(max_memories: int, max_chars: int) -> int:
    """The output token cap that fits ``max_memories`` memories of ``max_chars``
    characters: per memory a third of its characters (dense text runs near 3-4 characters
    per token) plus 40 tokens of JSON (type, scope, message ids), plus 32 for the object.
    With the defaults (12 memories, 400 characters): 2,120 tokens."""
    return 32 + max_memories * (math.ceil(max_chars / 3) + 40)


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
        max_output_tokens: the cap on the answer's tokens; 0 = :func:`reply_token_cap`.

    Attributes:
        name: ``"llm"`` (the extractor's name in reports and logs).
    """

    name = "llm"

    def __init__(self, chat: ChatModel, *, max_memories: int, max_chars: int,
                 max_output_tokens: int = 0) -> None:
        if max_memories < 1 or max_chars < 1 or max_output_tokens < 0:
            raise ValueError("max_memories and max_chars must be positive, "
                             "max_output_tokens not negative")
        self.chat = chat
        self.max_memories = max_memories
        self.max_chars = max_chars
        self.max_output_tokens = max_output_tokens or reply_token_cap(max_memories, max_chars)

    def extract(
        self, lines: Sequence[TranscriptLine], *, project_root: str | None = None
    ) -> ExtractionResult:
        """Extract memories from ``lines`` (already redacted).

        A chunk without any user line makes no call (no memory could be accepted) and yields
        an empty result with model ``"none"`` and zero tokens. The result is ``saturated``
        when the model proposed ``max_memories`` memories or more, said it had more, or
        stopped at the token cap. Each refused proposal is logged at debug level with its
        reason and its first 80 characters, redacted (``memory_refused``).

        Raises:
            UpstreamError: the endpoint failed (from the chat client).
            ReplyCutOff: the answer stopped at the token cap before it was complete JSON.
            ExtractionError: the answer is missing, not JSON, or of the wrong shape. Both
                carry the call's tokens and a digest of the answer.
        """
        if not any(line.role == "user" for line in lines):
            return ExtractionResult(candidates=(), model="none")
        system, user = build_prompt(
            lines, project_root=project_root, max_memories=self.max_memories,
            max_chars=self.max_chars,
        )
        reply = self.chat.complete_json(
            system=system, user=user, schema=MEMORY_SCHEMA, schema_name=SCHEMA_NAME,
            max_tokens=self.max_output_tokens,
        )
        cut_off = reply.finish_reason == "length"
        try:
            accepted, rejected = parse_reply(
                reply.content, lines=lines, max_memories=self.max_memories,
                max_chars=self.max_chars, project_name=_folder_name(project_root),
            )
        except ExtractionError as exc:
            digest = hashlib.sha256(reply.content.encode("utf-8", "replace")).hexdigest()
            if cut_off:
                raise ReplyCutOff(
                    f"{exc}; the answer was cut off at {self.max_output_tokens} tokens "
                    "(finish_reason=length)", tokens_in=reply.tokens_in,
                    tokens_out=reply.tokens_out, reply_digest=digest) from exc
            raise ExtractionError(str(exc), tokens_in=reply.tokens_in,
                                  tokens_out=reply.tokens_out, reply_digest=digest) from exc
        proposed = len(accepted) + len(rejected)
        saturated = proposed >= self.max_memories or cut_off or said_more(reply.content)
        for reason, short in rejected:
            log.debug("memory_refused", reason=reason, proposed=redact(short).text)
        log.debug("extraction.parsed", accepted=len(accepted), rejected=len(rejected),
                  reasons=sorted({reason for reason, _ in rejected}), saturated=saturated)
        return ExtractionResult(
            candidates=tuple(accepted),
            tokens_in=reply.tokens_in,
            tokens_out=reply.tokens_out,
            model=reply.model,
            rejected=tuple(rejected),
            saturated=saturated,
        )


def _folder_name(root: str | None) -> str | None:
    """The last component of a project root (``/srv/acme-web/`` → ``acme-web``), or
    ``None`` for no root."""
    name = root.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1] if root else ""
    return name or None
