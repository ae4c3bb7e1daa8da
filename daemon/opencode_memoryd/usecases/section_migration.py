"""Memories written before sections existed get one, without re-extraction."""

from __future__ import annotations

import structlog

from opencode_memoryd.extract.sections import section_for
from opencode_memoryd.store.api import MemoryFilter, MemoryStore

log = structlog.get_logger(__name__)

#: Memories updated per payload write by :func:`migrate_sections`.
SECTION_BATCH = 256


def migrate_sections(store: MemoryStore, *, batch_size: int = SECTION_BATCH) -> int:
    """Give every memory without a ``section`` (tombstones and every user's too) the one
    :func:`~opencode_memoryd.extract.sections.section_for` chooses from its type, scope
    and text.

    A payload-only update (:meth:`~opencode_memoryd.store.api.MemoryStore.set_fields`):
    nothing is extracted or embedded again, ids, texts and times stay as they are.
    Idempotent: once done, one filtered count finds nothing to do; a run cut short is
    finished by the next.

    Returns:
        The number of memories given a section.

    Raises:
        ValueError: ``batch_size`` is not positive.
        StoreError: from the store.
    """
    if batch_size <= 0:
        raise ValueError("batch_size must be positive")
    flt = MemoryFilter(without_section=True, include_retired=True)
    if store.count(flt) == 0:
        return 0
    todo = list(store.scroll(flt))
    by_section: dict[str, list[str]] = {}
    for m in todo:
        by_section.setdefault(section_for(m.type, m.scope, m.content), []).append(m.id)
    for section in sorted(by_section):
        ids = by_section[section]
        for i in range(0, len(ids), batch_size):
            store.set_fields(ids[i:i + batch_size], {"section": section})
    log.info("sections_migrated", memories=len(todo),
             sections={k: len(v) for k, v in sorted(by_section.items())})
    return len(todo)
