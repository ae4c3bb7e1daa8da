"""Whether the store still holds what the state file says was stored.

Every session whose extraction result was recorded as stored (an outbox item with memory
candidates, :meth:`~opencode_memoryd.state.items.OutboxTable.sessions_with_memories`) is
named in the provenance (``session_ids``) of at least one point, live or retired: a
duplicate or near-duplicate candidate merges its session into the point that holds the
fact, and a dream's merged memory keeps its sources. A session no point names lost its
memories (a deleted segment, a store moved away with the state kept). Reading every
point's payload is the sample read too: a store whose reads fail raises here.
"""

from __future__ import annotations

from typing import Any

from opencode_memoryd.staleness import stale_note
from opencode_memoryd.state.db import StateDB
from opencode_memoryd.store.api import MemoryFilter, MemoryStore

#: How many of the lost sessions the report names.
MISSING_SHOWN = 5
#: How many of the memories marked "may be out of date" the report names.
STALE_SHOWN = 5
#: How many points are fetched again by id, after the scroll, as the sample read.
SAMPLE_SIZE = 20


def store_integrity(state: StateDB, store: MemoryStore) -> dict[str, Any]:
    """Count the points and the recorded sessions no point names.

    Returns:
        ``{"points": int (live and retired), "recorded_sessions": int, "recorded_memories":
        int (candidates recorded as stored), "missing_sessions": int, "missing": [session
        ids, at most MISSING_SHOWN], "sample": int (points read again by id), "sampled":
        int (of those, found), "stale": int (active memories a dream marked "may be out of
        date"), "stale_shown": [{"id", "content", "note"}, at most STALE_SHOWN, oldest
        first]}``.

    Raises:
        StoreError: the store cannot be read.
        StateError: the state file cannot be read.
    """
    recorded = state.outbox.sessions_with_memories()
    named: set[str] = set()
    ids: list[str] = []
    stale: list[dict[str, str]] = []
    for m in store.scroll(MemoryFilter(include_retired=True)):
        ids.append(m.id)
        if m.stale and m.is_active:
            stale.append({"id": m.id, "content": m.content, "note": stale_note(m.stale)})
        named.update(m.session_ids)
        if m.session_id:
            named.add(m.session_id)
    step = max(1, len(ids) // SAMPLE_SIZE)
    sample = ids[::step][:SAMPLE_SIZE]
    sampled = len(store.get(sample)) if sample else 0  # fewer: points the scroll saw are gone
    missing = sorted(s for s in recorded if s not in named)
    return {"points": len(ids), "recorded_sessions": len(recorded),
            "recorded_memories": sum(recorded.values()),
            "missing_sessions": len(missing), "missing": missing[:MISSING_SHOWN],
            "sample": len(sample), "sampled": sampled,
            "stale": len(stale), "stale_shown": stale[:STALE_SHOWN]}
