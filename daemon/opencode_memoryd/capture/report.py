"""The settings a session is processed with (:class:`Limits`, :class:`NoteSettings`) and
what processing it did (:class:`SessionReport`)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from opencode_memoryd.models import STORAGE_MESSAGE

__all__ = ["Limits", "NoteSettings", "SessionReport"]


@dataclass(frozen=True, slots=True)
class NoteSettings:
    """``[summaries]``: what is written and how long it may be.

    Attributes:
        session_summaries: write compaction summaries and session notes.
        project_briefs: write project briefs.
        idle_ms: a session is summarised once it has had no new message for this long.
        summary_max_chars: longest session summary.
        brief_max_chars: longest project brief.
        transcript_tokens: most transcript (estimated tokens) an LLM summary is given.
    """

    session_summaries: bool = True
    project_briefs: bool = True
    idle_ms: int = 900_000
    summary_max_chars: int = 1200
    brief_max_chars: int = 600
    transcript_tokens: int = 6000


@dataclass(frozen=True, slots=True)
class Limits:
    """Reader and chunking settings, from ``[opencode]`` and ``[extraction]``."""

    abandoned_ms: int = 1_800_000
    settle_ms: int = 2_000
    #: a 2.x turn not confirmed idle, its last step ended: read after this quiet time
    unconfirmed_ms: int = 60_000
    max_chunk_tokens: int = 6000
    tool_output_chars: int = 160
    near_duplicate_similarity: float = 0.85
    #: the rules floor's longest memory, in characters
    max_memory_chars: int = 400
    #: identical failures of one chunk after which it is given up (0 = never)
    max_identical_failures: int = 3
    #: session summaries and project briefs
    notes: NoteSettings = NoteSettings()


@dataclass(slots=True)
class SessionReport:
    """What processing one session did (counts only: never transcript text)."""

    session_id: str
    project_key: str
    project_root: str
    title_chars: int = 0
    turns_read: int = 0
    chunks: int = 0
    llm_calls: int = 0
    added: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    rejected: Counter[str] = field(default_factory=Counter)
    redactions: Counter[str] = field(default_factory=Counter)
    tokens_in: int = 0
    tokens_out: int = 0
    replayed_items: int = 0
    #: chunks given up (captured by the rules after repeated identical failures)
    given_up: int = 0
    #: ids of the message and part rows that could not be decoded (skipped)
    corrupt_rows: set[str] = field(default_factory=set)
    error: str | None = None
    error_kind: str | None = None
    retry_after_seconds: float | None = None
    #: the endpoint could not be reached at all (no connection: nothing was sent)
    unreachable: bool = False
    duration_ms: float = 0.0
    #: the table the session's turns were read from
    storage: str = STORAGE_MESSAGE
    #: a turn after the mark is not finished yet (the daemon looks again for v2 sessions,
    #: whose last writes are in-place updates it may not see)
    waiting: bool = False
    #: session-summary memories written (compaction summaries, the session's note)
    summaries: int = 0
    #: project briefs written or refreshed
    briefs: int = 0
    #: when (ms) the session will have been idle long enough for its note
    summary_due_ms: int | None = None

    def as_dict(self) -> dict[str, Any]:
        """A JSON-safe dict (the log event and ``maintain --json`` row)."""
        return {
            "session_id": self.session_id,
            "project": self.project_key,
            "project_root": self.project_root,
            "turns_read": self.turns_read,
            "chunks": self.chunks,
            "llm_calls": self.llm_calls,
            "added": self.added,
            "skipped": dict(self.skipped),
            "rejected": dict(self.rejected),
            "redactions": dict(self.redactions),
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "replayed_items": self.replayed_items,
            "given_up": self.given_up,
            "corrupt_rows": len(self.corrupt_rows),
            "summaries": self.summaries,
            "briefs": self.briefs,
            "error": self.error,
            "storage": self.storage,
            "duration_ms": round(self.duration_ms, 1),
        }
