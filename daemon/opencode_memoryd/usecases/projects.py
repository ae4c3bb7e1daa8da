"""Which memory scopes a folder selects: the OpenCode projects of its sessions."""

from __future__ import annotations

import os

import structlog

from opencode_memoryd.errors import SourceError
from opencode_memoryd.store.api import MemoryFilter
from opencode_memoryd.usecases.ports import AppPort

log = structlog.get_logger(__name__)


def normalize_dir(directory: str) -> str:
    """An absolute, normalised folder path (``~`` expanded); the folder need not exist."""
    return os.path.normpath(os.path.abspath(os.path.expanduser(directory)))


def project_keys_for_dir(app: AppPort, directory: str, db_override: str | None = None,
                         *, strict: bool = False) -> set[str]:
    """The memory scopes (project keys) of the sessions ``--dir DIR`` selects.

    Args:
        directory: a normalised folder (:func:`normalize_dir`).
        db_override: ``--db PATH``, else the configured or discovered databases.
        strict: raise instead of skipping a database that is missing or unreadable.

    Returns:
        The project keys; empty when no database is found (unless ``strict``) or none has
        a session there. An unreadable database is logged and skipped (unless ``strict``).

    Raises:
        SourceError: only with ``strict``: no database, or one that cannot be read.
    """
    keys: set[str] = set()
    try:
        paths = app.database_paths(db_override)
    except SourceError:
        if strict:
            raise
        return keys
    for path in paths:
        try:
            with app.open_source(path) as db:
                keys.update(s.project_key for s in db.sessions(directory=directory,
                                                               include_subagents=True))
        except SourceError as exc:
            if strict:
                raise
            log.warning("source_unreadable", db=str(path), error=str(exc))
    return keys


def filters_for_dir(app: AppPort, directory: str, db: str | None, *, include_user: bool
                    ) -> list[MemoryFilter]:
    """Store filters for DIR's project(s), optionally with user-scope memories.

    With no project found, only the user scope (when ``include_user``), else nothing.
    """
    keys = project_keys_for_dir(app, normalize_dir(directory), db)
    if not keys:
        return [MemoryFilter(scope="user")] if include_user else []
    return [MemoryFilter(project_id=k, include_user_scope=include_user) for k in sorted(keys)]
