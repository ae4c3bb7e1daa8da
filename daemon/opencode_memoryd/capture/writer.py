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
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from opencode_memoryd.extract.facts import restates, similarity
from opencode_memoryd.models import (
    Memory,
    content_hash,
    normalize_text,
    point_id,
    utc_from_ms,
)
from opencode_memoryd.redaction.engine import scrub
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
) -> tuple[int, Counter[str]]:
    """Write candidates to the store with write-time dedup; return (added, skipped reasons).

    A candidate whose normalised fact already has a point in the same scope and type (same
    deterministic id) or whose text is at least ``near_duplicate_similarity`` similar to an
    existing memory of the same type and scope that says all it says (every content word
    and identifier, :func:`~opencode_memoryd.extract.facts.restates`) is not added: its provenance
    (session and message ids) is merged into the existing point. Replaying the same
    candidates therefore adds nothing. ``created_at`` of a new memory is the time of its
    first cited message.

    When the point of the candidate's id is a tombstone (retired by a dream), the candidate
    is merged into the memory that holds the fact now: ``superseded_by`` is followed, at
    most :data:`MAX_SUPERSEDED_HOPS` links, to the first active memory (skip reason
    ``duplicate``). When that chain is broken (the successor was deleted, a cycle, too
    long), a near-duplicate among the active memories is looked for as usual, and failing
    that the tombstone is reactivated with the candidate's provenance added (counted as
    added).
    """
    added = 0
    skipped: Counter[str] = Counter()
    for c in candidates:
        content = scrub(str(c["content"])).text
        scope = c["scope"]
        pkey = None if scope == "user" else project_key
        proot = None if scope == "user" else project_root
        pid = point_id(scope, pkey, c["type"], content)
        msg_ids = list(c["message_ids"])
        existing = store.get([pid])
        target: Memory | None = existing[0] if existing else None
        reason = "duplicate"
        tomb: Memory | None = None
        if target is not None and not target.is_active:
            tomb, target = target, _successor(store, target)
        if target is None:
            norm = normalize_text(content)
            flt = MemoryFilter(project_id=pkey, include_user_scope=False, scope=scope,
                               types=(c["type"],))
            for hit, _score in store.search(content, flt=flt, limit=5):
                if (hit.scope == scope and hit.project_id == pkey
                        and similarity(norm, normalize_text(hit.content))
                        >= near_duplicate_similarity
                        and restates(content, hit.content)):
                    target, reason = hit, "near_duplicate"
                    break
        if target is not None:
            sessions = list(dict.fromkeys([*target.session_ids, session_id]))
            messages = list(dict.fromkeys([*target.message_ids, *msg_ids]))
            if sessions != target.session_ids or messages != target.message_ids:
                target.session_ids, target.message_ids = sessions, messages
                target.updated_at = now
                store.upsert([target])
            skipped[reason] += 1
            continue
        if tomb is not None:  # retired, and its successor is gone: reactivate the fact
            tomb.status, tomb.superseded_by = "active", None
            tomb.retired_reason = tomb.retired_by_run = None
            tomb.session_ids = list(dict.fromkeys([*tomb.session_ids, session_id]))
            tomb.message_ids = list(dict.fromkeys([*tomb.message_ids, *msg_ids]))
            tomb.updated_at = now
            store.upsert([tomb])
            added += 1
            continue
        times = [message_times[m] for m in msg_ids if m in message_times]
        created = utc_from_ms(min(times)) if times else now
        store.upsert([Memory(
            id=pid, content=content, type=c["type"], scope=scope, project_id=pkey,
            project_root=proot, session_id=session_id, message_ids=msg_ids,
            source=c["source"], created_at=created, updated_at=now,
            session_ids=[session_id], content_hash=content_hash(content),
        )])
        added += 1
    return added, skipped
