"""``rebuild``: a new store, made again from OpenCode's databases and the journal of
manual changes, for a store that is lost or damaged.

1. The memories to bring back by hand are gathered first: every memory the journal of
   manual changes (:mod:`~opencode_memoryd.usecases.manual_log`) holds, as its last change
   left it, and, when the old store can still be read, its other ``manual`` memories (an
   export of what was written before that journal existed, appended to the journal as
   ``export`` entries before anything moves).
2. The old store's folder is moved aside (``<store>.broken-<UTC time>``), never deleted.
3. Every high-water mark is reset, and ``maintain`` reads every session again from its
   start: a chunk whose extraction result the state file recorded is replayed from that
   record (no second LLM call); the rest is extracted.
4. The gathered memories are written last, over what extraction wrote, so an edit or a
   forget stands (a forgotten memory stays forgotten).

It must own the store and the state file: the CLI runs it only when no daemon runs. It is
not a control route. A store on a Qdrant server is not rebuilt here.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import structlog

from opencode_memoryd.config.paths import store_dir
from opencode_memoryd.errors import RefusedError, StoreError, StoreInUseError, UpstreamError
from opencode_memoryd.models import Memory, iso_utc
from opencode_memoryd.store.api import MemoryFilter
from opencode_memoryd.usecases.maintain import Progress
from opencode_memoryd.usecases.manual_log import (
    manual_journal,
    manual_memories,
    purged_ids,
    record_change,
)
from opencode_memoryd.usecases.ports import AppPort

log = structlog.get_logger(__name__)

#: The suffix of a store folder moved aside: ``<store>.broken-<YYYYmmddTHHMMSSZ>``.
MOVED_SUFFIX = ".broken-"


def _salvage(app: AppPort) -> tuple[dict[str, Memory], str | None]:
    """The ``manual`` memories (tombstones too) the old store still gives, and why it gave
    none (``None``: it was read).

    Raises:
        StoreInUseError: another process holds the store.
    """
    try:
        old = app.open_store(allow_mismatch=True)
    except StoreInUseError:
        raise
    except (StoreError, UpstreamError) as exc:
        return {}, str(exc)
    try:
        return {m.id: m for m in old.scroll(MemoryFilter(include_retired=True))
                if m.source == "manual"}, None
    except StoreError as exc:
        return {}, str(exc)
    finally:
        try:
            old.close()
        except StoreError as exc:
            log.warning("rebuild_old_store_close_failed", error=str(exc))


def _move_aside(path: Path, now: datetime) -> Path | None:
    """Rename the store folder ``path`` to ``<path>.broken-<time>``; ``None`` when there
    is no folder.

    Raises:
        StoreError: it cannot be renamed.
    """
    if not path.exists():
        return None
    target = path.with_name(f"{path.name}{MOVED_SUFFIX}{now.strftime('%Y%m%dT%H%M%SZ')}")
    n = 1
    while target.exists():
        n += 1
        target = target.with_name(f"{path.name}{MOVED_SUFFIX}"
                                  f"{now.strftime('%Y%m%dT%H%M%SZ')}-{n}")
    try:
        path.rename(target)
    except OSError as exc:
        raise StoreError(f"cannot move the memory store {path} aside: {exc}") from exc
    return target


def rebuild(app: AppPort, *, progress: Progress | None = None) -> dict[str, Any]:
    """Move the embedded store aside and make it again (see the module's description).

    Args:
        app: the configured application.
        progress: wraps each database's session list (a progress bar on a terminal).

    Returns:
        ``{"store": str, "moved_to": str | None (None: there was no store folder),
        "old_store_read": bool, "old_store_error": str | None, "marks_reset": int,
        "sessions": int, "added": int (memories extraction added), "failed": int
        (sessions that ended in an error; their marks did not move),
        "manual_restored": int, "points": int (live and retired)}``.

    Raises:
        RefusedError: the store is on a Qdrant server (``[qdrant] url``).
        StoreInUseError: another process holds the embedded store (nothing changed).
        StoreError, StateError: the store cannot be moved aside, created or written.
        SourceError: no OpenCode database, or one that cannot be opened (the store is
            new and the marks are reset: run it again once the database is back).
    """
    if app.config.qdrant.url:
        raise RefusedError(
            "rebuild makes the embedded store again; a store on a Qdrant server "
            f"({app.config.qdrant.url}) is not rebuilt here: nothing was changed")
    from opencode_memoryd.usecases.service import open_local

    path = store_dir(app.config, app.env)
    journal = manual_journal(app.journal_path)
    manual = manual_memories(journal)
    salvaged, old_error = _salvage(app) if path.exists() else ({}, "no store")
    for mid, m in salvaged.items():
        if mid not in manual:  # journaled before the store moves: a second run has it too
            record_change(journal, "export", m.to_payload(), iso_utc(app.clock()))
            manual[mid] = m
    moved = _move_aside(path, app.clock())
    log.info("rebuild_started", store=str(path), moved_to=str(moved) if moved else None,
             manual=len(manual), old_store_error=old_error)
    state = app.open_state()
    try:
        marks = state.marks.reset_marks()
    finally:
        state.close()
    with open_local(app, progress=progress) as service:
        summary = service.maintain(directory=None)
        if manual:
            service.store.upsert(list(manual.values()))
        gone = purged_ids(journal.entries())  # extracted again from the words said
        if gone:
            service.store.delete(sorted(gone))
        points = service.store.count(MemoryFilter(include_retired=True))
    totals = summary["totals"]
    report = {"store": str(path), "moved_to": str(moved) if moved else None,
              "old_store_read": old_error is None, "old_store_error": old_error,
              "marks_reset": marks, "sessions": int(totals.get("sessions", 0)),
              "added": int(totals.get("added", 0)),
              "failed": int(summary.get("failed", 0)),
              "manual_restored": len(manual), "points": points}
    log.info("rebuild_finished", **report)
    return report
