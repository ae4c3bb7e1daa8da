"""The candidates of a session's context block: each memory's section, the order the
block's budget takes them in, and the daemon's cache of them.

A memory goes in the section stored with it (``Memory.section``, chosen when it was
written), with three exceptions (:func:`section_of`): the agent's notes go last, in their
own section; user-scope memories are the user's preferences; and a correction, a memory
that superseded another one ("we switched from Yarn to pnpm" retired "we install packages
with Yarn"), is a convention of the project: its current way, the fact an agent is most
likely to get wrong, spent first. Within its section (a user-scope correction among the
user's preferences) a correction comes before the newer memories. Which memories are
corrections the store's tombstones say (a retired memory's ``superseded_by``, retired as
``superseded``), so it holds for a correction in any words, by rules, an LLM or a dream.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import replace

from opencode_memoryd.extract.sections import section_for
from opencode_memoryd.models import Memory
from opencode_memoryd.store.api import RETIRED, MemoryFilter, MemoryStore
from opencode_memoryd.usecases.fence import entry_line

#: Section keys and titles, in the order the block shows them.
SECTIONS: tuple[tuple[str, str], ...] = (
    ("brief", "Project brief"),
    ("architecture", "Architecture and tech"),
    ("conventions", "Conventions and feedback"),
    ("progress", "Progress and last session"),
    ("user", "User preferences"),
    ("reference", "References"),
    ("relevant", "Relevant to the task"),
    ("agent", "Noted by the agent (unconfirmed)"),
)
#: The order in which the budget is spent (most important first; the agent's notes last).
PRIORITY: tuple[str, ...] = ("conventions", "user", "brief", "progress", "architecture",
                             "reference", "agent")
_SECTION_KEYS = set(PRIORITY)

def section_of(memory: Memory, corrections: Collection[str] = frozenset()) -> str:
    """The section a memory belongs in: the agent's note → ``agent``; user scope →
    ``user``; a correction (its id among ``corrections``: it superseded another memory)
    → ``conventions``, the project's current way, spent first; else its ``section``; a
    memory with none yet (a store not migrated) → the rules' choice
    (:func:`~opencode_memoryd.extract.sections.section_for`)."""
    if memory.provenance == "agent":
        return "agent"
    if memory.scope == "user":
        return "user"
    if memory.id in corrections:
        return "conventions"
    if memory.section in _SECTION_KEYS:
        return memory.section
    return section_for(memory.type, memory.scope, memory.content)


def newest_summaries_only(memories: Iterable[Memory]) -> list[Memory]:
    """``memories`` with every ``session-summary`` but the newest of each project left out
    (newest by ``updated_at``, ties by id); the order is kept."""
    memories = list(memories)
    newest: dict[str | None, Memory] = {}
    for m in memories:
        if m.type != "session-summary":
            continue
        best = newest.get(m.project_id)
        if best is None or (m.updated_at, m.id) > (best.updated_at, best.id):
            newest[m.project_id] = m
    keep = {m.id for m in newest.values()}
    return [m for m in memories if m.type != "session-summary" or m.id in keep]


def line_of(memory: Memory) -> str:
    """The block's line of ``memory``: its day, its quoted text, what may be out of date."""
    return entry_line(memory.said.date().isoformat(), memory.content, memory.stale)


def _newest_first(memories: Iterable[Memory], corrections: Collection[str] = frozenset()
                  ) -> list[Memory]:
    """The ``corrections`` first, then the rest; each newest said first (``said_at``, else
    ``updated_at``), ties by id."""
    return sorted(memories, key=lambda m: (m.id not in corrections,
                                           -(m.said_at or m.updated_at).timestamp(), m.id))


#: One candidate of the block: ``(section key, memory, its line)``.
Entry = tuple[str, Memory, str]


def ordered_pool(candidates: Iterable[Memory], corrections: Collection[str] = frozenset()
                 ) -> list[Entry]:
    """``candidates`` in the order the budget takes them when no search hit comes first:
    sections in :data:`PRIORITY` order (:func:`section_of`, ``corrections`` the ids of the
    memories that superseded another), in each the corrections first, then newest said
    first (ties by id), with each line
    rendered once; pending notes left out. It does not depend on the query, so the daemon
    keeps it until the store is written (:meth:`ScrollCache.pool`)."""
    by_section: dict[str, list[Memory]] = {key: [] for key in PRIORITY}
    for m in candidates:
        if m.pending:
            continue
        by_section.setdefault(section_of(m, corrections), []).append(m)
    return [(key, m, line_of(m)) for key in PRIORITY
            for m in _newest_first(by_section.get(key, []), corrections)]


class ScrollCache:
    """The memories of a filter, read once and kept until the store is written.

    Only for a store this process writes alone (``store.single_writer``: the embedded
    store, owned by the daemon), whose ``generation`` counter changes with every write;
    a shared server store is read every time. Thread-safe.
    """

    def __init__(self, store: MemoryStore) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._generation = -1
        self._cached: dict[MemoryFilter, list[Memory]] = {}
        self._pools: dict[tuple[MemoryFilter, ...], list[Entry]] = {}

    def __call__(self, flt: MemoryFilter) -> list[Memory]:
        """The active memories matching ``flt`` (``store.scroll`` order)."""
        generation = int(getattr(self._store, "generation", -1))
        with self._lock:
            if generation != self._generation:
                self._cached.clear()
                self._pools.clear()
                self._generation = generation
            hit = self._cached.get(flt)
        if hit is None:
            hit = list(self._store.scroll(flt))
            with self._lock:
                if self._generation == generation:  # no write began since: keep it
                    self._cached[flt] = hit
        return hit

    def pool(self, flts: Sequence[MemoryFilter]) -> list[Entry]:
        """:func:`candidate_pool` of ``flts``, kept until the store is written."""
        key = tuple(flts)
        generation = int(getattr(self._store, "generation", -1))
        with self._lock:
            hit = self._pools.get(key) if generation == self._generation else None
        if hit is None:
            hit = candidate_pool(self, flts)
            with self._lock:
                if self._generation == generation:
                    self._pools[key] = hit
        return hit


def is_correction_of(memory: Memory) -> str | None:
    """The id of the memory that superseded ``memory`` (a correction: the user said the
    project or they changed, or a dream settled it), or ``None`` (active, merged, a
    duplicate, forgotten)."""
    if memory.status != RETIRED or not memory.superseded_by:
        return None
    return memory.superseded_by if (memory.retired_reason or "").startswith(
        "superseded") else None


def candidate_pool(read: Callable[[MemoryFilter], Iterable[Memory]],
                   flts: Sequence[MemoryFilter]) -> list[Entry]:
    """The :func:`ordered_pool` of the active memories ``read`` gives for ``flts``, read
    with their tombstones (each memory once, every ``session-summary`` but each project's
    newest left out); the tombstones say which memories are corrections."""
    candidates: dict[str, Memory] = {}
    corrections: set[str] = set()
    for flt in flts:
        for m in read(replace(flt, include_retired=True)):
            if m.status == RETIRED:
                corrections.add(is_correction_of(m) or "")
            else:
                candidates.setdefault(m.id, m)
    return ordered_pool(newest_summaries_only(candidates.values()), corrections)


def agents_notes(pool: Sequence[Entry], scroll: Callable[[MemoryFilter], Iterable[Memory]],
                  user_flt: MemoryFilter) -> int:
    """How many of the agent's notes a search of the block's scopes can return: those of
    ``pool`` and the pending ones of the user scope (which no pool holds)."""
    return (sum(m.provenance == "agent" for _, m, _ in pool)
            + sum(m.pending for m in scroll(user_flt)))


