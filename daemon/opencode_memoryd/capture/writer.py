"""Write memory candidates to the store with write-time deduplication.

A candidate never becomes a second point for a fact the store already holds: the same
normalised fact in the same scope and type has the same deterministic point id, and a
near-identical one (similar text that says all the candidate says) is found by a search.
Either way the candidate's provenance (session and message ids) is merged into the existing
point. A fact a dream has retired is followed to the memory that holds it now. Replaying the
same candidates (crash recovery) therefore adds nothing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from opencode_memoryd.capture.supersede import Record, replaced_by, supersede
from opencode_memoryd.extract.facts import restates, similarity
from opencode_memoryd.extract.sections import section_for, valid_section
from opencode_memoryd.extract.slots import slot_change
from opencode_memoryd.extract.temporal import resolve_relative
from opencode_memoryd.models import (
    STRONGER_THAN_AGENT,
    Memory,
    content_hash,
    derive_provenance,
    normalize_text,
    point_id,
    utc_from_ms,
)
from opencode_memoryd.redaction.engine import scrub
from opencode_memoryd.state.db import StateDB
from opencode_memoryd.store.api import MemoryFilter, MemoryStore

#: Most ``superseded_by`` links :func:`write_memories` follows from a tombstone.
MAX_SUPERSEDED_HOPS = 8


def _successor(store: MemoryStore, tomb: Memory) -> Memory | None:
    """The active memory a tombstone's ``superseded_by`` chain leads to, or ``None`` when
    the chain is broken, cyclic or longer than :data:`MAX_SUPERSEDED_HOPS` links."""
    seen = {tomb.id}
    current = tomb
    for _ in range(MAX_SUPERSEDED_HOPS):
        nxt = current.superseded_by
        if not nxt or nxt in seen:
            return None
        try:
            got = store.get([nxt])
        except ValueError:  # not a UUID: a damaged payload
            return None
        if not got:
            return None
        current = got[0]
        if current.is_active:
            return current
        seen.add(current.id)
    return None


@dataclass(frozen=True, slots=True)
class WriteOutcome:
    """What :func:`write_memory` did with one candidate.

    Attributes:
        memory: the stored memory that now holds the fact (the new one, the existing
            duplicate, or the reactivated tombstone).
        result: ``added`` (a new point), ``revived`` (a tombstone reactivated; counted as
            added), ``duplicate`` (same deterministic id, or a tombstone's successor) or
            ``near_duplicate`` (a similar memory that says all the candidate says).
    """

    memory: Memory
    result: str

    @property
    def added(self) -> bool:
        """Whether the store holds a fact it did not hold (active) before."""
        return self.result in ("added", "revived")


def _merge_provenance(m: Memory, session_id: str | None, msg_ids: Sequence[str]) -> bool:
    """Add a session and message ids to ``m``'s provenance; whether anything changed."""
    sessions = list(dict.fromkeys([*m.session_ids, *([session_id] if session_id else [])]))
    messages = list(dict.fromkeys([*m.message_ids, *msg_ids]))
    if sessions == m.session_ids and messages == m.message_ids:
        return False
    m.session_ids, m.message_ids = sessions, messages
    return True


def write_memory(
    store: MemoryStore,
    candidate: Mapping[str, Any],
    *,
    session_id: str | None,
    project_key: str | None,
    project_root: str | None,
    message_times: Mapping[str, int],
    now: datetime,
    near_duplicate_similarity: float,
    user_id: str | None = None,
) -> WriteOutcome:
    """Write one candidate with write-time dedup (see :func:`write_memories`).

    Args:
        candidate: ``{"content", "type", "scope", "message_ids", "source"}`` and optionally
            ``"section"``: the section the extractor chose; missing or not one of
            :data:`~opencode_memoryd.models.SECTIONS`, a new memory gets the one
            :func:`~opencode_memoryd.extract.sections.section_for` chooses; optionally
            ``"provenance"`` (default: derived from ``source``) and ``"pending"`` (an agent
            note awaiting the user's confirmation). A ``user`` or ``extracted`` write of a
            fact the agent noted makes the memory theirs and no longer pending; an agent
            write never changes a memory it did not note (a forgotten one it revives
            becomes the agent's). A similar text (a near-duplicate) never changes hands,
            and a fact not the agent's is never folded into the agent's note.
        session_id: the session it comes from; ``None`` for a manual memory (then
            ``session_id`` of a new memory is ``""`` and ``session_ids`` empty).
        project_key: the project of a ``project``-scope candidate (ignored for ``user``).
        user_id: the identity a ``user``-scope candidate belongs to: stored in
            ``user_id``, part of the point id, and the only user-scope memories it is
            deduplicated against. ``None``: no identity (ids and dedup as before
            identities existed).

    Raises:
        StoreError, UpstreamError: from the store (nothing is half-written: each change is
            one upsert).
    """
    msg_ids = list(candidate["message_ids"])
    times = [message_times[m] for m in msg_ids if m in message_times]
    said = utc_from_ms(min(times)) if times else None
    content = scrub(str(candidate["content"])).text
    if candidate["source"] == "rules":  # "last night" is true on the day it was said
        content = resolve_relative(content, said.date() if said else None)
    scope = candidate["scope"]
    type_ = candidate["type"]
    pkey = None if scope == "user" else project_key
    proot = None if scope == "user" else project_root
    uid = user_id if scope == "user" else None
    pid = point_id(scope, pkey, type_, content, uid)
    asserted = str(candidate.get("provenance")
                   or derive_provenance(str(candidate["source"]), str(type_)))
    existing = store.get([pid])
    target: Memory | None = existing[0] if existing else None
    result = "duplicate"
    tomb: Memory | None = None
    if target is not None and not target.is_active:
        tomb, target = target, _successor(store, target)
    if target is None:
        norm = normalize_text(content)
        flt = MemoryFilter(project_id=pkey, include_user_scope=False, scope=scope,
                           types=(type_,), user_id=uid)
        for hit, _score in store.search(content, flt=flt, limit=5, as_document=True):
            if (hit.scope == scope and hit.project_id == pkey
                    and (uid is None or hit.user_id == uid)
                    # the user's fact is never folded into a note of the agent
                    and ((hit.provenance != "agent" and not hit.pending)
                         or asserted == "agent")
                    and similarity(norm, normalize_text(hit.content))
                    >= near_duplicate_similarity
                    and restates(content, hit.content)):
                target, result = hit, "near_duplicate"
                break
    if target is not None:
        changed = _merge_provenance(target, session_id, msg_ids)
        # the same fact (same id, not a similar text that may say more) asserted by the
        # user is the user's now
        if (target.id == pid and (target.provenance == "agent" or target.pending)
                and asserted in STRONGER_THAN_AGENT):
            target.provenance, target.pending, changed = asserted, False, True
        if changed:
            target.updated_at = now
            store.upsert([target])
        return WriteOutcome(target, result)
    if tomb is not None:  # retired, and its successor is gone: reactivate the fact
        tomb.provenance, tomb.pending = asserted, bool(candidate.get("pending"))
        tomb.status, tomb.superseded_by = "active", None
        tomb.said_at = said or tomb.said_at
        tomb.retired_reason = tomb.retired_by_run = None
        _merge_provenance(tomb, session_id, msg_ids)
        tomb.user_id = tomb.user_id or uid
        tomb.section = tomb.section or _section(candidate, content)
        tomb.updated_at = now
        store.upsert([tomb])
        return WriteOutcome(tomb, "revived")
    memory = Memory(
        id=pid, content=content, type=type_, scope=scope, project_id=pkey,
        project_root=proot, session_id=session_id or "", message_ids=msg_ids,
        source=candidate["source"], created_at=said or now, updated_at=now,
        session_ids=[session_id] if session_id else [], content_hash=content_hash(content),
        user_id=uid, section=_section(candidate, content), provenance=asserted,
        pending=bool(candidate.get("pending")), said_at=said,
    )
    store.upsert([memory])
    return WriteOutcome(memory, "added")


def _section(candidate: Mapping[str, Any], content: str) -> str:
    """The candidate's section when valid, else the rules' choice."""
    return (valid_section(candidate.get("section"))
            or section_for(str(candidate["type"]), str(candidate["scope"]), content))


def write_memories(
    store: MemoryStore,
    candidates: Sequence[dict[str, Any]],
    *,
    session_id: str,
    project_key: str,
    project_root: str | None,
    message_times: dict[str, int],
    now: datetime,
    near_duplicate_similarity: float,
    user_id: str | None = None,
    state: StateDB | None = None,
    record: Record | None = None,
) -> tuple[int, Counter[str]]:
    """Write candidates to the store with write-time dedup; return (added, skipped reasons).

    A candidate whose normalised fact already has a point in the same scope and type (same
    deterministic id) or whose text is at least ``near_duplicate_similarity`` similar to an
    existing memory of the same type and scope that says all it says (every content word
    and identifier, :func:`~opencode_memoryd.extract.facts.restates`) is not added: its provenance
    (session and message ids) is merged into the existing point. Replaying the same
    candidates therefore adds nothing. ``created_at`` and ``said_at`` of a new memory are
    the time of its first cited message (``message_times``: message id -> OpenCode's
    milliseconds); the relative time words of a ``rules`` candidate ("last night", "this
    morning") become that message's date (UTC), or are dropped when it is unknown
    (:func:`~opencode_memoryd.extract.temporal.resolve_relative`). User-scope candidates
    belong to ``user_id`` (see :func:`write_memory`).

    When the point of the candidate's id is a tombstone (retired by a dream), the candidate
    is merged into the memory that holds the fact now: ``superseded_by`` is followed, at
    most :data:`MAX_SUPERSEDED_HOPS` links, to the first active memory (skip reason
    ``duplicate``). When that chain is broken (the successor was deleted, a cycle, too
    long, or the memory was forgotten), a near-duplicate among the active memories is
    looked for as usual, and failing that the tombstone is reactivated with the
    candidate's provenance added (counted as added).

    A candidate with ``replaces`` (terms) and ``cue`` (the user's words) then retires the
    older active facts of its scope that state a replaced term, recorded in ``state`` and
    journaled through ``record``
    (:func:`~opencode_memoryd.capture.supersede.supersede`); again on a replay (whatever
    is left active then), never without ``state``. A candidate marked
    ``only_if_supersedes`` (a correction said without a trigger) is written only when it
    retires an active memory (:func:`~opencode_memoryd.capture.supersede.replaced_by`),
    else skipped with reason ``corrects_nothing``; never without ``state``.
    """
    added = 0
    skipped: Counter[str] = Counter()
    for c in candidates:
        olds: list[Memory] | None = None  # looked up before the write for a conditional one
        if c.get("only_if_supersedes"):
            olds = [] if state is None else _corrected(
                store, c, project_key=project_key, user_id=user_id,
                message_times=message_times, now=now)
            if not olds:
                skipped["corrects_nothing"] += 1
                continue
        outcome = write_memory(
            store, c, session_id=session_id, project_key=project_key,
            project_root=project_root, message_times=message_times, now=now,
            near_duplicate_similarity=near_duplicate_similarity, user_id=user_id)
        if outcome.added:
            added += 1
        else:
            skipped[outcome.result] += 1
        terms = [str(t) for t in c.get("replaces") or []]
        said_as = _users_words(c)
        if ((terms or slot_change(said_as)) and state is not None
                and outcome.memory.is_active):
            supersede(store, state, outcome.memory, terms, str(c.get("cue") or c["content"]),
                      now=now, record=record, said_as=said_as, olds=olds)
    return added, skipped


def _corrected(store: MemoryStore, candidate: Mapping[str, Any], *, project_key: str | None,
               user_id: str | None, message_times: Mapping[str, int], now: datetime
               ) -> list[Memory]:
    """The active memories a candidate would retire once written (its ``replaces``, or
    the value it gives a slot, against the facts of its scope said no later than its first
    cited message)."""
    terms = [str(t) for t in candidate.get("replaces") or []]
    content = scrub(str(candidate["content"])).text
    said_as = _users_words(candidate)
    if not terms and slot_change(said_as) is None:
        return []
    scope = str(candidate["scope"])
    times = [message_times[m] for m in candidate["message_ids"] if m in message_times]
    said = utc_from_ms(min(times)) if times else now
    return replaced_by(store, content, terms, scope=scope,
                       project_id=None if scope == "user" else project_key,
                       user_id=user_id if scope == "user" else None, said=said,
                       said_as=said_as)


def _users_words(candidate: Mapping[str, Any]) -> str:
    """The user's words a candidate says it replaces something in: its ``cue`` (the
    cited sentence of a model's memory), else the text of a ``rules`` memory (the user's
    words, cleaned); ``""`` for a model's memory with no cue."""
    cue = str(candidate.get("cue") or "")
    if cue:
        return cue
    return str(candidate["content"]) if candidate.get("source") == "rules" else ""
