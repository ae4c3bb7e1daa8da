"""Reading memories: list, search and show (with lineage)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from opencode_memoryd.dream.journal import DreamJournal
from opencode_memoryd.errors import NotFoundError
from opencode_memoryd.models import Memory
from opencode_memoryd.store.api import MemoryFilter, MemoryStore
from opencode_memoryd.usecases.ids import resolve_id
from opencode_memoryd.usecases.ports import AppPort
from opencode_memoryd.usecases.projects import filters_for_dir


def list_memories(app: AppPort, store: MemoryStore, *, user: bool = False,
                  directory: str | None = None, db: str | None = None,
                  include_retired: bool = False) -> list[dict[str, Any]]:
    """Memories as payload dicts, oldest first: all, user scope, or DIR's project.

    With ``include_retired`` the tombstones a dream or ``forget`` left (``status``
    ``retired``, ``superseded_by``, ``retired_reason``) are listed too. User-scope
    memories are this user's only (``app.user_id``); DIR's project is resolved by
    :func:`~opencode_memoryd.usecases.projects.resolve_dir` (the store's own project roots
    when no OpenCode database knows DIR).
    """
    if user:
        flts: list[MemoryFilter] = [MemoryFilter(scope="user", user_id=app.user_id)]
    elif directory:
        flts = filters_for_dir(app, directory, db, include_user=False, store=store)
    else:
        flts = [MemoryFilter(user_id=app.user_id)]
    seen: dict[str, Memory] = {}
    for flt in flts:
        for m in store.scroll(replace(flt, include_retired=include_retired)):
            seen.setdefault(m.id, m)
    ordered = sorted(seen.values(), key=lambda m: (m.created_at, m.id))
    return [m.to_payload() for m in ordered]


def search(app: AppPort, store: MemoryStore, query: str, *, directory: str | None = None,
           db: str | None = None, limit: int = 10, include_retired: bool = False,
           project: str | None = None) -> list[dict[str, Any]]:
    """Search results as payload dicts with a ``score``, best first.

    With ``directory``: DIR's project memories and this user's user-scope memories only;
    with ``project`` (a project key) instead: that project's and this user's user-scope
    memories. With ``include_retired``: tombstones can match too (they say ``status:
    retired``).
    """
    if directory:
        flts = filters_for_dir(app, directory, db, include_user=True, store=store)
    elif project:
        flts = [MemoryFilter(project_id=project, user_id=app.user_id)]
    else:
        flts = [MemoryFilter(user_id=app.user_id)]
    hits: dict[str, tuple[Memory, float]] = {}
    for flt in flts:
        for m, score in store.search(query, flt=replace(flt, include_retired=include_retired),
                                     limit=limit):
            if m.id not in hits or hits[m.id][1] < score:
                hits[m.id] = (m, score)
    ranked = sorted(hits.values(), key=lambda h: -h[1])[:limit]
    return [{**m.to_payload(), "score": round(score, 6)} for m, score in ranked]


def show_memory(store: MemoryStore, journal: DreamJournal, memory_id: str,
                user_id: str | None = None) -> dict[str, Any] | None:
    """One memory (retired ones too) with its lineage, or ``None`` when there is none (or
    it is a user-scope memory of another identity than ``user_id``); ``memory_id`` may be
    a unique prefix (:func:`~opencode_memoryd.usecases.ids.resolve_id`).

    Raises:
        RequestError: an ambiguous or too short prefix.

    Returns:
        ``{"memory": payload, "lineage": {"sessions", "message_ids", "merged_from":
        [payloads], "superseded_by", "dreams": [journal entries]}}``: where it came from
        and the dreams that merged or superseded it.
    """
    try:
        memory_id = resolve_id(store, memory_id, user_id)
    except NotFoundError:
        return None
    found = store.get([memory_id])
    if not found or (user_id is not None and found[0].scope == "user"
                     and found[0].user_id not in (None, user_id)):
        return None
    m = found[0]
    payload = m.to_payload()
    runs = set(m.dream_runs or [])
    if m.retired_by_run:
        runs.add(str(m.retired_by_run))
    dreams = [e for e in journal.entries()
              if e.get("run_id") in runs or any(
                  memory_id in (op.get("memory_ids") or []) or memory_id == op.get("new_id")
                  for op in e.get("operations") or [])]
    return {"memory": payload,
            "lineage": {"sessions": payload.get("session_ids"),
                        "message_ids": payload.get("message_ids"),
                        "merged_from": [x.to_payload() for x in store.get(list(m.merged_from))],
                        "superseded_by": m.superseded_by,
                        "dreams": dreams}}
