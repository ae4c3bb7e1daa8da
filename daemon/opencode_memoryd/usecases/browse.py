"""Browsing the store: memories by filter a page at a time, the projects with their
counts, store-wide counts, and the dream journal a page at a time (what the web page and
its REST API show)."""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

from opencode_memoryd.dream.journal import DreamJournal
from opencode_memoryd.errors import RequestError
from opencode_memoryd.models import MEMORY_TYPES, SCOPES, Memory
from opencode_memoryd.store.api import MemoryFilter, MemoryStore
from opencode_memoryd.usecases.ports import AppPort

#: ``status`` filters of :func:`browse_memories`.
STATUSES: tuple[str, ...] = ("active", "retired", "all")
#: The most memories or journal entries one page holds.
MAX_PAGE = 500


def check_page(offset: object, limit: object, verb: str) -> tuple[int, int]:
    """``(offset, limit)`` after checking.

    Raises:
        RequestError: not integers, a negative offset, a limit outside 1 to
            :data:`MAX_PAGE`.
    """
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        raise RequestError(f"{verb}: `offset` must be an integer of 0 or more")
    if (not isinstance(limit, int) or isinstance(limit, bool)
            or not 1 <= limit <= MAX_PAGE):
        raise RequestError(f"{verb}: `limit` must be an integer from 1 to {MAX_PAGE}")
    return offset, limit


def memory_filter(user_id: str, *, project: str | None = None, scope: str | None = None,
                  types: tuple[str, ...] = (), include_retired: bool = False
                  ) -> MemoryFilter:
    """The store filter of a project key and/or scope, for this user.

    ``project`` alone: that project's memories (not the user scope); ``scope`` ``user``:
    this user's user-scope memories.

    Raises:
        RequestError: an unknown scope or type, or ``project`` with scope ``user``.
    """
    if scope is not None and scope not in SCOPES:
        raise RequestError(f"unknown scope {scope!r}; use one of {', '.join(SCOPES)}")
    bad = [t for t in types if t not in MEMORY_TYPES]
    if bad:
        raise RequestError(f"unknown type {bad[0]!r}; use one of {', '.join(MEMORY_TYPES)}")
    if project is not None and scope == "user":
        raise RequestError("a project's memories are of scope `project`, not `user`")
    if project is not None:
        return MemoryFilter(project_id=project, include_user_scope=False, types=types,
                            include_retired=include_retired, user_id=user_id)
    return MemoryFilter(scope=scope, types=types, include_retired=include_retired,
                        user_id=user_id)


def browse_memories(app: AppPort, store: MemoryStore, *, project: str | None = None,
                    scope: str | None = None, type_: str | None = None,
                    status: str = "active", text: str | None = None, offset: int = 0,
                    limit: int = 50) -> dict[str, Any]:
    """One page of memories, most recently changed first.

    Args:
        project: a project key: that project's memories only.
        scope: ``user`` or ``project``.
        type_: one memory type.
        status: ``active``, ``retired`` (tombstones only) or ``all``.
        text: keep the memories whose content contains this, case-insensitively.
        offset, limit: the page (``limit`` 1 to :data:`MAX_PAGE`).

    Returns:
        ``{"total": matching memories, "offset", "limit", "memories": [payloads]}``.

    Raises:
        RequestError: an unknown scope, type or status, or a bad page.
    """
    offset, limit = check_page(offset, limit, "memories")
    if status not in STATUSES:
        raise RequestError(f"unknown status {status!r}; use one of {', '.join(STATUSES)}")
    flt = memory_filter(app.user_id, project=project, scope=scope,
                        types=(type_,) if type_ else (), include_retired=status != "active")
    needle = (text or "").casefold().strip()
    found: list[Memory] = [
        m for m in store.scroll(flt)
        if (status != "retired" or not m.is_active)
        and (not needle or needle in m.content.casefold())]
    found.sort(key=lambda m: (m.updated_at, m.id), reverse=True)
    return {"total": len(found), "offset": offset, "limit": limit,
            "memories": [m.to_payload() for m in found[offset:offset + limit]]}


def list_projects(app: AppPort, store: MemoryStore) -> dict[str, Any]:
    """Every project the store holds memories of, and this user's user scope, with counts.

    Returns:
        ``{"projects": [{"id", "root", "name", "counts": {"active", "retired",
        "types": {type: active count}}}], "user": {"counts": {...}}}``; projects sorted by
        name. ``root`` is the most used ``project_root`` (``None`` when unknown) and
        ``name`` its last folder name (else the key).
    """
    roots: dict[str, Counter[str]] = {}
    counts: dict[str | None, dict[str, Any]] = {}
    for m in store.scroll(MemoryFilter(user_id=app.user_id, include_retired=True)):
        key = m.project_id if m.scope == "project" else None
        if key is None and m.scope == "project":
            continue
        c = counts.setdefault(key, {"active": 0, "retired": 0, "types": {}})
        if m.is_active:
            c["active"] += 1
            c["types"][m.type] = c["types"].get(m.type, 0) + 1
        else:
            c["retired"] += 1
        if key is not None and m.project_root:
            roots.setdefault(key, Counter())[m.project_root] += 1
    projects = []
    for key, c in counts.items():
        if key is None:
            continue
        root = roots[key].most_common(1)[0][0] if key in roots else None
        name = os.path.basename(root.rstrip("/")) if root else key
        projects.append({"id": key, "root": root, "name": name or root or key, "counts": c})
    projects.sort(key=lambda p: (str(p["name"]).casefold(), p["id"]))
    return {"projects": projects,
            "user": {"counts": counts.get(None, {"active": 0, "retired": 0, "types": {}})}}


def store_stats(app: AppPort, store: MemoryStore, journal: DreamJournal) -> dict[str, Any]:
    """Counts over this user's view of the store and the journal.

    Returns:
        ``{"memories": {"active", "retired", "by_type": {type: n}, "by_scope": {scope: n},
        "by_source": {source: n}, "by_provenance": {provenance: n}, "pending": n (the
        agent's notes awaiting confirmation), "edited": n}, "projects": n, "journal":
        {"entries": n,
        "by_action": {action: n}, "tokens_in", "tokens_out"}}`` (the ``by_`` counts are of
        active memories).
    """
    active = retired = edited = 0
    by_type: Counter[str] = Counter()
    by_scope: Counter[str] = Counter()
    by_source: Counter[str] = Counter()
    by_provenance: Counter[str] = Counter()
    pending = 0
    projects: set[str] = set()
    for m in store.scroll(MemoryFilter(user_id=app.user_id, include_retired=True)):
        if m.project_id:
            projects.add(m.project_id)
        if not m.is_active:
            retired += 1
            continue
        active += 1
        by_type[m.type] += 1
        by_scope[m.scope] += 1
        by_source[m.source] += 1
        by_provenance[m.provenance] += 1
        pending += m.pending
        edited += bool(m.history)
    entries = journal.entries()
    return {"memories": {"active": active, "retired": retired, "by_type": dict(by_type),
                         "by_scope": dict(by_scope), "by_source": dict(by_source),
                         "by_provenance": dict(by_provenance), "pending": pending,
                         "edited": edited},
            "projects": len(projects),
            "journal": {"entries": len(entries),
                        "by_action": dict(Counter(str(e.get("action") or "dream")
                                                  for e in entries)),
                        "tokens_in": sum(int(e.get("tokens_in") or 0) for e in entries),
                        "tokens_out": sum(int(e.get("tokens_out") or 0) for e in entries)}}


def journal_page(journal: DreamJournal, *, project: str | None = None, user: bool = False,
                 offset: int = 0, limit: int = 50) -> dict[str, Any]:
    """One page of the dream journal, newest first, each dream with its operations.

    Each entry gains ``undone``: whether a later entry undid its run (a dream's ``ok``
    entry stays in the journal after its undo).

    Args:
        project: a project key: that project's entries (with ``user``: and the user
            scope's).
        user: the user scope's entries.

    Returns:
        ``{"total", "offset", "limit", "entries": [journal entries]}``.

    Raises:
        RequestError: a bad page.
    """
    offset, limit = check_page(offset, limit, "journal")
    entries = journal.entries(project_key=project, user=user)
    undone = {e.get("run_id") for e in entries if e.get("status") == "undone"}
    page = [{**e, "undone": e.get("action", "dream") == "dream" and e.get("run_id") in undone}
            for e in entries[offset:offset + limit]]
    return {"total": len(entries), "offset": offset, "limit": limit, "entries": page}
