"""Domain records shared by every module. Plain frozen dataclasses, no I/O."""

from __future__ import annotations

import hashlib
import re
import unicodedata
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal, NamedTuple

from opencode_memoryd.vocab import FACT_TYPES as FACT_TYPES
from opencode_memoryd.vocab import MEMORY_TYPES as MEMORY_TYPES
from opencode_memoryd.vocab import NOTE_TYPES as NOTE_TYPES
from opencode_memoryd.vocab import SCOPES as SCOPES
from opencode_memoryd.vocab import SECTIONS as SECTIONS

MemoryType = Literal["user", "feedback", "project", "reference", "project-brief",
                     "session-summary"]
Scope = Literal["user", "project"]
Source = Literal["llm", "rules", "manual"]
Role = Literal["user", "assistant", "tool"]
Status = Literal["active", "retired"]
Provenance = Literal["user", "extracted", "agent", "generated"]
#: Who asserted a memory (:attr:`Memory.provenance`): ``user`` (the user's own ``add``, an
#: edit on the page, or a confirmed agent note), ``extracted`` (an extractor, from the
#: user's words in a session), ``agent`` (the agent, through the MCP tool or the CLI run
#: from its shell), ``generated`` (text opencode-memoryd wrote: summaries, briefs).
PROVENANCES: tuple[str, ...] = ("user", "extracted", "agent", "generated")
#: Provenances that rank above ``agent``: a write of the same fact by one of them makes the
#: memory theirs (and no longer pending).
STRONGER_THAN_AGENT: frozenset[str] = frozenset({"user", "extracted"})

#: Namespace of every point id (UUIDv5), fixed forever: changing it duplicates every memory.
POINT_NAMESPACE = uuid.UUID("6f0c5d2e-3a51-5b7e-9c1f-0d7a4e2b8c31")


#: Where a session's turns are stored in an OpenCode database: the 1.x ``message``/``part``
#: tables (positions are ``(time_created_ms, message_id)``) ...
STORAGE_MESSAGE = "message"
#: ... or the v2 ``session_message`` table (positions are ``(seq, message_id)``).
STORAGE_SESSION_MESSAGE = "session_message"


class Mark(NamedTuple):
    """A session's high-water mark: the last row processed, and which table it is in.

    Attributes:
        storage: :data:`STORAGE_MESSAGE` or :data:`STORAGE_SESSION_MESSAGE`.
        position: ``(time_created_ms, message_id)`` in ``message``, ``(seq, message_id)``
            in ``session_message``. Positions of different storages are never compared.
    """

    storage: str
    position: tuple[int, str]


@dataclass(frozen=True, slots=True)
class TranscriptLine:
    """One line of the transcript shown to the extractor.

    Attributes:
        message_id: the OpenCode message id the line comes from (``msg_…``).
        role: ``user`` (human text), ``assistant`` (model text) or ``tool`` (a condensed
            tool call made by the assistant).
        text: the line's text, already redacted when it reaches an extractor.
    """

    message_id: str
    role: Role
    text: str

    def render(self) -> str:
        """Return the line as the LLM sees it: ``[msg_…] role: text``."""
        return f"[{self.message_id}] {self.role}: {self.text}"


@dataclass(frozen=True, slots=True)
class MemoryCandidate:
    """A memory proposed by an extractor, before dedup and storage.

    Attributes:
        content: one fact, one or two sentences, no secrets.
        type: ``user`` (about the person), ``feedback`` (how they want the agent to work),
            ``project`` (facts and decisions about the project), ``reference`` (where to find
            things: URLs, dashboards, docs).
        scope: ``project`` (this project only) or ``user`` (all the user's projects).
        message_ids: the transcript messages the fact comes from (at least one).
        source: which extractor produced it.
        section: the context-block section the extractor chose (one of :data:`SECTIONS`),
            or ``""`` to let the rules choose (:mod:`opencode_memoryd.extract.sections`).
        replaces: the terms the fact replaces ("Jest" of "use Vitest instead of Jest"),
            each grounded in a replacement cue of the cited user text; the memories that
            state them are superseded when it is written.
        cue: the user's words saying what it replaces (``""``: none, or the content).
        only_if_supersedes: a correction said without a trigger ("we moved off Poetry,
            it's uv now"; :mod:`opencode_memoryd.extract.corrections`): written only when it
            retires an active memory, else skipped (reason ``corrects_nothing``).
    """

    content: str
    type: MemoryType
    scope: Scope
    message_ids: tuple[str, ...]
    source: Source
    section: str = ""
    replaces: tuple[str, ...] = ()
    cue: str = ""
    only_if_supersedes: bool = False


@dataclass(slots=True)
class Memory:
    """A stored memory: the payload of one Qdrant point.

    ``project_id`` and ``project_root`` are ``None`` for user-scope memories; ``created_at``
    and ``updated_at`` are aware UTC datetimes. A manual memory (``source`` ``manual``) has
    no session: ``session_id`` is ``""`` and ``session_ids`` is empty.

    Consolidation ("dreams", :mod:`opencode_memoryd.dream.dreamer`) never deletes a memory: it
    *retires* it, leaving a tombstone (the usual soft-delete / tombstone pattern of
    replicated stores, e.g. the deletion markers of Cassandra or of Dynamo-style systems):

    Attributes:
        status: ``active`` (searched and listed) or ``retired`` (a tombstone: kept for
            audit and undo; hidden from search, listing and counts unless asked for).
        superseded_by: for a retired memory, the id of the memory that now holds its fact
            (the merged memory, the surviving duplicate, or the newer fact superseding it).
        retired_reason: why it was retired: ``duplicate``, ``merged`` or ``superseded``
            (free text from the plan may follow after ``: ``).
        retired_by_run: the dream run id that retired it.
        merged_from: ids of the memories merged into this one (oldest first).
        dream_runs: ids of the dream runs that created or changed this memory.
        user_id: whose user-scope memory this is (the user identity of the daemon that
            wrote it); ``None`` for project memories, which everyone writing to the same
            store shares.
        section: the context-block section it belongs in (one of :data:`SECTIONS`), or
            ``""`` when none was chosen yet (a payload written before sections existed,
            until the store's one-time section migration gives it one).
        basis: what a memory opencode-memoryd wrote itself was made from, so it is made
            again only when that changes: the content hash of the README of a
            ``project-brief``, the last message id a session's ``session-summary`` covers;
            ``None`` for facts.
        history: the earlier versions a person replaced by editing the memory, oldest
            first: ``{"content", "type", "edited_at" (ISO 8601 UTC), "run_id"}`` each
            (``run_id``: the edit's dream-journal entry).
        provenance: who asserted it (one of :data:`PROVENANCES`); ``""`` at construction
            means "derive it" (:func:`derive_provenance`).
        pending: a user-scope note of the agent the user has not confirmed yet: kept, but
            in no context block until confirmed (and retired if rejected).
        said_at: when the user said it (aware UTC): the time OpenCode gave the first message
            it comes from; ``None`` for a memory written before this was kept and for a
            manual one (see :attr:`said`).
        stale: what the project's worktree no longer has of what it names, as a dream last
            found it (:mod:`opencode_memoryd.dream.freshness`): ``{"kind", "what",
            "where", "since"}`` each; empty when nothing is known to be gone.

    Payloads written before these fields existed load with the defaults (active, no
    lineage, no ``user_id``, no section, no basis, no history, provenance derived from
    ``source`` and ``type``, not pending).
    """

    id: str
    content: str
    type: MemoryType
    scope: Scope
    project_id: str | None
    project_root: str | None
    session_id: str
    message_ids: list[str]
    source: Source
    created_at: datetime
    updated_at: datetime
    session_ids: list[str] = field(default_factory=list)
    content_hash: str = ""
    status: Status = "active"
    superseded_by: str | None = None
    retired_reason: str | None = None
    retired_by_run: str | None = None
    merged_from: list[str] = field(default_factory=list)
    dream_runs: list[str] = field(default_factory=list)
    user_id: str | None = None
    section: str = ""
    basis: str | None = None
    history: list[dict[str, str]] = field(default_factory=list)
    provenance: str = ""
    pending: bool = False
    said_at: datetime | None = None
    stale: list[dict[str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.provenance not in PROVENANCES:
            self.provenance = derive_provenance(self.source, self.type)

    @property
    def said(self) -> datetime:
        """When the fact was said (valid from): :attr:`said_at`, else ``created_at``."""
        return self.said_at or self.created_at

    @property
    def is_active(self) -> bool:
        """Whether this memory is active (not a tombstone)."""
        return self.status != "retired"

    def to_payload(self) -> dict[str, object]:
        """Return the JSON-safe payload (times as ISO 8601 UTC strings with ``Z``)."""
        return {
            "id": self.id,
            "content": self.content,
            "type": self.type,
            "scope": self.scope,
            "project_id": self.project_id,
            "project_root": self.project_root,
            "session_id": self.session_id,
            "session_ids": list(self.session_ids
                                or ([self.session_id] if self.session_id else [])),
            "message_ids": list(self.message_ids),
            "source": self.source,
            "created_at": iso_utc(self.created_at),
            "updated_at": iso_utc(self.updated_at),
            "content_hash": self.content_hash or content_hash(self.content),
            "status": self.status,
            "superseded_by": self.superseded_by,
            "retired_reason": self.retired_reason,
            "retired_by_run": self.retired_by_run,
            "merged_from": list(self.merged_from),
            "dream_runs": list(self.dream_runs),
            "user_id": self.user_id,
            "section": self.section or None,
            "basis": self.basis,
            "history": [dict(h) for h in self.history],
            "provenance": self.provenance,
            "pending": self.pending,
            "said_at": iso_utc(self.said_at) if self.said_at else None,
            "stale": [dict(m) for m in self.stale],
        }

    @classmethod
    def from_payload(cls, payload: dict[str, object]) -> Memory:
        """Build a memory from a stored payload (inverse of :meth:`to_payload`).

        Keys missing from older payloads take their defaults (``status`` ``active``, no
        lineage).
        """
        p = payload
        return cls(
            id=str(p["id"]),
            content=str(p["content"]),
            type=p["type"],  # type: ignore[arg-type]
            scope=p["scope"],  # type: ignore[arg-type]
            project_id=p.get("project_id"),  # type: ignore[arg-type]
            project_root=p.get("project_root"),  # type: ignore[arg-type]
            session_id=str(p["session_id"]),
            message_ids=list(p.get("message_ids") or []),  # type: ignore[call-overload]
            source=p["source"],  # type: ignore[arg-type]
            created_at=parse_iso(str(p["created_at"])),
            updated_at=parse_iso(str(p["updated_at"])),
            session_ids=list(p.get("session_ids")  # type: ignore[call-overload]
                             or ([p["session_id"]] if p.get("session_id") else [])),
            content_hash=str(p.get("content_hash") or ""),
            status="retired" if p.get("status") == "retired" else "active",
            superseded_by=_opt_str(p.get("superseded_by")),
            retired_reason=_opt_str(p.get("retired_reason")),
            retired_by_run=_opt_str(p.get("retired_by_run")),
            merged_from=[str(x) for x in p.get("merged_from") or []],  # type: ignore[attr-defined]
            dream_runs=[str(x) for x in p.get("dream_runs") or []],  # type: ignore[attr-defined]
            user_id=_opt_str(p.get("user_id")),
            section=str(p.get("section") or ""),
            basis=_opt_str(p.get("basis")),
            history=[{str(k): str(v) for k, v in h.items()}
                     for h in p.get("history") or []  # type: ignore[attr-defined]
                     if isinstance(h, dict)],
            provenance=str(p.get("provenance") or ""),
            pending=p.get("pending") is True,
            said_at=parse_iso(str(p["said_at"])) if p.get("said_at") else None,
            stale=[{str(k): str(v) for k, v in m.items()}
                   for m in p.get("stale") or [] if isinstance(m, dict)],  # type: ignore[attr-defined]
        )


def derive_provenance(source: str, type_: str) -> Provenance:
    """The provenance of a memory written before provenance was recorded: ``generated``
    for a ``project-brief`` or ``session-summary``, ``user`` for a ``manual`` memory (the
    CLI, the page, and also the agent's MCP ``add`` of those versions, which recorded no
    caller), else ``extracted``."""
    if type_ in ("project-brief", "session-summary"):
        return "generated"
    return "user" if source == "manual" else "extracted"


def _opt_str(value: object) -> str | None:
    return None if value is None else str(value)


def iso_utc(dt: datetime) -> str:
    """Format an aware datetime as ISO 8601 UTC with millisecond precision and ``Z``."""
    return dt.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_iso(text: str) -> datetime:
    """Parse an ISO 8601 string (``Z`` or offset) into an aware UTC datetime."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def utc_from_ms(ms: int) -> datetime:
    """Convert OpenCode's integer milliseconds since the epoch into an aware UTC datetime."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


_PUNCT = re.compile(r"[^\w\s/.:@#+-]")
_SPACE = re.compile(r"\s+")


def normalize_text(text: str) -> str:
    """Normalise a fact for exact-duplicate detection.

    NFKC, case-folded, punctuation other than the characters that carry meaning in code
    (``/ . : @ # + -``) removed, whitespace collapsed, trailing dots stripped.
    """
    t = unicodedata.normalize("NFKC", text).casefold()
    t = _PUNCT.sub(" ", t)
    t = _SPACE.sub(" ", t).strip().rstrip(".").strip()
    return t


def content_hash(text: str) -> str:
    """SHA-256 hex digest of :func:`normalize_text` of ``text``."""
    return hashlib.sha256(normalize_text(text).encode("utf-8")).hexdigest()


def scope_key(scope: Scope, project_id: str | None) -> str:
    """The key that partitions memories: ``user`` or ``project:<project_id>``."""
    return "user" if scope == "user" else f"project:{project_id}"


def scope_project(key: str) -> str | None:
    """The project id of a :func:`scope_key` (``None`` for ``user``)."""
    return None if key == "user" else key.split(":", 1)[1]


def point_id(scope: Scope, project_id: str | None, type_: str, text: str,
             user_id: str | None = None) -> str:
    """Deterministic point id (UUIDv5) of a fact in a scope.

    The same normalised fact of the same type in the same scope always maps to the same
    point, so replaying an extraction, or meeting the fact again in another session,
    upserts instead of duplicating (pattern: deterministic ids make the write idempotent).
    A user-scope fact with a ``user_id`` is keyed by that identity too
    (``user:<user_id>|type|hash``), so two users of one shared store never share a point;
    without one (memories written before user identities existed) the key is
    ``user|type|hash``. ``user_id`` is ignored for project memories.
    """
    where = (f"user:{user_id}" if scope == "user" and user_id is not None
             else scope_key(scope, project_id))
    key = f"{where}|{type_}|{content_hash(text)}"
    return str(uuid.uuid5(POINT_NAMESPACE, key))


def note_id(project_key: str, type_: str, key: str) -> str:
    """Deterministic point id (UUIDv5) of a memory opencode-memoryd writes itself.

    One point per source, rewritten in place when the source changes: ``type_``
    ``project-brief`` with ``key`` ``readme`` (one brief per project);
    ``session-summary`` with ``key`` ``compaction:<message id>`` (one per compaction
    summary) or ``session:<session id>`` (the state one session ended in).
    """
    return str(uuid.uuid5(POINT_NAMESPACE, f"project:{project_key}|{type_}|{key}"))


@dataclass(frozen=True, slots=True)
class ExtractionResult:
    """What one extractor call produced for one chunk of transcript.

    Attributes:
        candidates: the accepted memories (already validated).
        tokens_in: prompt tokens reported by the endpoint (0 for rules).
        tokens_out: completion tokens reported by the endpoint (0 for rules).
        model: the model name, or ``"rules"``.
        rejected: ``(reason, short text)`` for each proposed memory that was refused.
        saturated: the answer hit the per-call cap (as many memories proposed as allowed,
            the model said it had more, or it stopped at the output token cap): the chunk
            may hold more facts than this answer carries, so the caller splits it.
    """

    candidates: tuple[MemoryCandidate, ...]
    tokens_in: int = 0
    tokens_out: int = 0
    model: str = "rules"
    rejected: tuple[tuple[str, str], ...] = ()
    saturated: bool = False


@dataclass(frozen=True, slots=True)
class NegotiatedMode:
    """The structured-output mode that works with one endpoint and model.

    Attributes:
        base_url: the endpoint (``llm.base_url``).
        model: the model name sent.
        json_mode: ``json_schema``, ``json_object`` or ``none`` (instructions only).
        start: the configured ``llm.json_mode`` the negotiation started from; a remembered
            mode applies only while the configuration still names this one.
        detail: why this mode was chosen (the refusal of the mode before it, or ``works``).
        updated_at: when it was learnt (ISO 8601 UTC).
    """

    base_url: str
    model: str
    json_mode: str
    start: str
    detail: str
    updated_at: str
