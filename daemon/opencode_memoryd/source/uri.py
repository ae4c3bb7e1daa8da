"""The URI the reader opens an OpenCode database with.

``file:…?mode=ro``: a reader that never writes, sees a writer's commits and takes part in
WAL locking. A database in WAL mode on a folder SQLite cannot write to (a read-only
mount, a folder of another user's with mode 0555) does not open that way when its
``-shm`` file is absent: SQLite must create it ("unable to open database file"). Such a
database is opened with ``immutable=1`` instead (see https://www.sqlite.org/uri.html):
nothing can write to that folder, OpenCode included, so the file cannot change under it;
what only a leftover ``-wal`` file holds is not read.
"""

from __future__ import annotations

import os
import sqlite3
from contextlib import closing
from pathlib import Path
from urllib.parse import quote

import structlog

log = structlog.get_logger(__name__)

__all__ = ["read_uri"]


def _opens(uri: str) -> bool:
    try:
        with closing(sqlite3.connect(uri, uri=True, timeout=1)) as conn:
            conn.execute("PRAGMA schema_version").fetchone()
    except sqlite3.Error:
        return False
    return True


def read_uri(path: Path) -> str:
    """The ``file:`` URI to open ``path`` read-only: ``?mode=ro``, or, when that fails on
    a folder that cannot be written and ``immutable=1`` opens it, ``?mode=ro&immutable=1``
    (logged as ``source_read_only_folder``). Never raises: a database that opens neither
    way gets ``?mode=ro``, and the reader reports its error."""
    base = f"file:{quote(os.path.abspath(path))}?mode=ro"
    if os.access(path.parent, os.W_OK) or _opens(base):
        return base
    immutable = f"{base}&immutable=1"
    if not _opens(immutable):
        return base
    log.warning("source_read_only_folder", db=str(path),
                detail="its folder cannot be written: the database is read as a file that "
                       "does not change (a leftover -wal file is not read)")
    return immutable
