"""Which memory scopes a folder selects: the OpenCode projects of its sessions, else the
projects the store itself remembers for that folder or a parent of it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import structlog

from opencode_memoryd.config.paths import normalize_dir
from opencode_memoryd.errors import SourceError
from opencode_memoryd.store.api import MemoryFilter, MemoryStore
from opencode_memoryd.usecases.ports import AppPort

log = structlog.get_logger(__name__)


def _db_projects(app: AppPort, directory: str, db_override: str | None, *,
                 strict: bool = False) -> dict[str, str]:
    """Project key -> project root of the sessions ``directory`` selects in the databases
    (none when no database is found; an unreadable one is logged and skipped; both raise
    :class:`SourceError` instead when ``strict``)."""
    found: dict[str, str] = {}
    try:
        paths = app.database_paths(db_override)
    except SourceError:
        if strict:
            raise
        return found
    for path in paths:
        try:
            with app.open_source(path) as db:
                for s in db.sessions(directory=directory, include_subagents=True):
                    found.setdefault(s.project_key, s.project_root)
        except SourceError as exc:
            if strict:
                raise
            log.warning("source_unreadable", db=str(path), error=str(exc))
    return found


def project_keys_for_dir(app: AppPort, directory: str, db_override: str | None = None,
                         *, strict: bool = False) -> set[str]:
    """The memory scopes (project keys) of the sessions ``--dir DIR`` selects in the
    OpenCode databases only (no store fallback: see :func:`resolve_dir`).

    Args:
        directory: a normalised folder (:func:`normalize_dir`).
        db_override: ``--db PATH``, else the configured or discovered databases.
        strict: raise instead of skipping a database that is missing or unreadable.

    Returns:
        The project keys; empty when no database is found or none has a session there.
        An unreadable database is logged and skipped.

    Raises:
        SourceError: only with ``strict``: no database, or one that cannot be read.
    """
    return set(_db_projects(app, directory, db_override, strict=strict))


def store_projects(store: MemoryStore) -> dict[str, list[str]]:
    """Every project the store holds memories of (tombstones too): project key -> its
    distinct ``project_root`` values, sorted. Reads every project memory's payload."""
    roots: dict[str, set[str]] = {}
    for m in store.scroll(MemoryFilter(scope="project", include_retired=True)):
        if m.project_id is not None:
            roots.setdefault(m.project_id, set())
            if m.project_root:
                roots[m.project_id].add(m.project_root)
    return {k: sorted(v) for k, v in sorted(roots.items())}


def dir_within(directory: str, root: str) -> bool:
    """Whether the normalised folder ``directory`` is ``root`` or below it (``/``
    contains only itself, so the root folder never claims every directory)."""
    root = root.rstrip("/") or "/"
    if directory == root:
        return True
    return root != "/" and directory.startswith(root + "/")


@dataclass(frozen=True)
class DirProjects:
    """The projects a folder selects.

    Attributes:
        directory: the normalised folder.
        projects: project key -> project root (for a match in the store: the stored
            ``project_root`` that contains the folder).
        via: ``database`` (OpenCode sessions there), ``store`` (no session there; the
            store's memories of that folder or of the nearest parent folder), or ``None``
            (nothing found).
        store_roots: when nothing was found, every project root the store knows (so a
            caller can say which folders do have memories); else empty.
    """

    directory: str
    projects: dict[str, str | None] = field(default_factory=dict)
    via: str | None = None
    store_roots: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """JSON-safe: ``{"directory", "projects": [{"project_id", "project_root"}],
        "via", "store_roots"}``."""
        return {"directory": self.directory,
                "projects": [{"project_id": k, "project_root": r}
                             for k, r in sorted(self.projects.items())],
                "via": self.via, "store_roots": list(self.store_roots)}


def resolve_dir(app: AppPort, store: MemoryStore, directory: str,
                db: str | None = None) -> DirProjects:
    """The projects ``--dir DIR`` selects.

    First the OpenCode databases: the projects of the sessions whose worktree is DIR or
    whose directory is DIR or below it. When none has a session there (or no database is
    at hand), the store's own memories: the projects whose ``project_root`` is DIR or the
    nearest parent folder of DIR that is one.

    Args:
        directory: any folder path (normalised here; it need not exist).
        db: ``--db PATH``, else the configured or discovered databases.
    """
    d = normalize_dir(directory)
    found = _db_projects(app, d, db)
    if found:
        return DirProjects(d, dict(found), "database")
    known = store_projects(store)
    best: dict[str, str | None] = {}
    depth = -1
    for key, roots in known.items():
        for root in roots:
            if not dir_within(d, root):
                continue
            n = len(root.rstrip("/"))
            if n > depth:
                best, depth = {}, n
            if n == depth:
                best[key] = root
    if best:
        return DirProjects(d, best, "store")
    every = sorted({r for roots in known.values() for r in roots})
    return DirProjects(d, {}, None, every)


def filters_for_dir(app: AppPort, directory: str, db: str | None, *, include_user: bool,
                    store: MemoryStore) -> list[MemoryFilter]:
    """Store filters for DIR's project(s) (:func:`resolve_dir`), optionally with this
    user's user-scope memories (``app.user_id``).

    With no project found, only the user scope (when ``include_user``), else nothing.
    """
    found = resolve_dir(app, store, directory, db)
    if not found.projects:
        return [MemoryFilter(scope="user", user_id=app.user_id)] if include_user else []
    return [MemoryFilter(project_id=k, include_user_scope=include_user, user_id=app.user_id)
            for k in sorted(found.projects)]
