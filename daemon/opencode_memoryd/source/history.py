"""Bounded queries behind the read-only history browser, over one OpenCode database.

A project's recent top-level sessions, their message counts by role and their sub-agent
counts, a text search over their text, and a session's compaction checkpoints. Sessions are
listed from ``session_v2`` union ``session``; each session's turns are read from the
storage that holds them (:mod:`~opencode_memoryd.source.storages`), which also pages a
session's messages and renders them. The SQL runs through :meth:`OpenCodeDB.select`
(read-only, one short statement each); every statement is bounded by a ``LIMIT`` or by a
list of session ids of bounded length, and none loads a whole table into memory.

A project is given as memory project keys (:attr:`SessionRow.project_key`): an OpenCode
project id for a git project, ``dir:<folder>`` for a folder of OpenCode's ``global``
project (not a git repository).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from opencode_memoryd.conversation.rows import SessionRow, session_from_row
from opencode_memoryd.source.storages import registry
from opencode_memoryd.source.storages.base import Checkpoint, TextPart
from opencode_memoryd.source.storages.sessions import child_counts, session_union

if TYPE_CHECKING:
    from opencode_memoryd.source.reader import OpenCodeDB

__all__ = ["Checkpoint", "ProjectScope", "TextPart", "last_activity",
           "like_pattern", "recent_sessions", "role_counts", "subagent_counts",
           "text_parts_like"]

#: Most session ids in one ``IN (…)`` list.
IN_BATCH = 500

@dataclass(frozen=True, slots=True)
class ProjectScope:
    """The sessions of one or more projects, as an SQL condition on ``session s``.

    Build it with :meth:`from_keys`; ``project_ids`` are git project ids, ``folders`` the
    folders of ``global`` (non-git) project keys.
    """

    project_ids: tuple[str, ...]
    folders: tuple[str, ...]

    @classmethod
    def from_keys(cls, keys: Iterable[str]) -> ProjectScope:
        """The scope of memory project keys (``<project id>`` or ``dir:<folder>``)."""
        ks = sorted(set(keys))
        return cls(tuple(k for k in ks if not k.startswith("dir:") and k != "global"),
                   tuple(k[4:] for k in ks if k.startswith("dir:")))

    def __bool__(self) -> bool:
        return bool(self.project_ids or self.folders)

    def condition(self) -> tuple[str, dict[str, Any]]:
        """``(sql, params)``: a condition on the ``session s`` alias (``0`` when empty)."""
        ors: list[str] = []
        params: dict[str, Any] = {}
        if self.project_ids:
            names = _names("pk", self.project_ids, params)
            ors.append(f"s.project_id IN ({names})")
        if self.folders:
            names = _names("pd", self.folders, params)
            ors.append(f"(s.project_id = 'global' AND s.directory IN ({names}))")
        return ("(" + " OR ".join(ors) + ")" if ors else "0"), params


def _names(prefix: str, values: Sequence[str], params: dict[str, Any]) -> str:
    for i, v in enumerate(values):
        params[f"{prefix}{i}"] = v
    return ", ".join(f":{prefix}{i}" for i in range(len(values)))


def recent_sessions(db: OpenCodeDB, scope: ProjectScope, *, limit: int
                    ) -> list[tuple[SessionRow, int]]:
    """The scope's top-level sessions (``parent_id`` NULL; archived ones included) of
    ``session_v2`` union ``session``, newest activity first, at most ``limit``, each with
    its activity: the later of ``time_updated`` and its newest ``session_message`` row's
    ``time_created`` (ms; v2 turns do not bump ``time_updated``). Forks are top-level
    sessions too; a row whose id is not UTF-8 is left out."""
    if not scope:
        return []
    cond, params = scope.condition()
    union = session_union(db.schema, ["s.parent_id IS NULL", cond])
    if union is None:
        return []
    newest = registry.newest_row_sql(db.schema, "u.id")
    out = []
    for r in db.select(f"SELECT u.*, max(u.time_updated, {newest}) AS active FROM ({union}) u "
                       "ORDER BY active DESC, u.id DESC LIMIT :limit",
                       {**params, "limit": limit}):
        row = session_from_row(r[:12])
        if row is not None:
            out.append((row, int(r[12])))
    return out


def role_counts(db: OpenCodeDB, session_ids: Sequence[str]) -> dict[str, tuple[int, int]]:
    """``{session_id: (user messages, assistant messages)}``; sessions without messages
    are left out. Each session is counted in the storage it is read from (a v2 session's
    ``user``/``assistant`` rows on an index, a 1.x session's ``data`` of every message;
    one assistant row per model step, as 1.x writes one assistant message per step)."""
    return registry.role_counts(db, session_ids)


def subagent_counts(db: OpenCodeDB, session_ids: Sequence[str]) -> dict[str, int]:
    """``{session_id: number of sub-agent sessions it started}`` (sessions with none are
    left out), from every session table through its ``parent_id`` index (a session in
    two tables is counted once; :func:`~.storages.sessions.child_counts`)."""
    out: dict[str, int] = {}
    for start in range(0, len(session_ids), IN_BATCH):
        out.update(child_counts(db.rows, db.schema, session_ids[start:start + IN_BATCH]))
    return out


def last_activity(db: OpenCodeDB, session: SessionRow) -> int:
    """The session's activity (ms): the later of its ``time_updated`` and the newest time
    its rows show that ``time_updated`` may not (v2 turns do not bump it)."""
    newest = registry.newest_row_sql(db.schema, ":sid")
    return max(session.time_updated,
               int(db.select(f"SELECT {newest}", {"sid": session.id})[0][0] or 0))


def like_pattern(term: str) -> str:
    """The ``LIKE … ESCAPE '\\'`` pattern that finds ``term`` inside a ``part.data`` JSON
    blob: the term is JSON-escaped as OpenCode writes strings (quotes, backslashes and
    control characters escaped, other characters kept), then ``%``, ``_`` and ``\\``
    are escaped for ``LIKE``."""
    encoded = json.dumps(term, ensure_ascii=False)[1:-1]
    escaped = encoded.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def text_parts_like(db: OpenCodeDB, scope: ProjectScope, terms: Sequence[str], *,
                    batch: int, max_rows: int) -> Iterator[TextPart]:
    """Text of the scope's top-level sessions whose JSON contains every term (SQLite
    ``LIKE``: case-insensitive for ASCII letters only), newest message first: each
    session's texts from the storage it is read from (the non-synthetic text parts of 1.x
    messages; one :class:`TextPart` per ``session_message`` row of a user, an assistant or
    a compaction summary), merged by message time
    (:func:`~opencode_memoryd.source.storages.registry.text_parts_like`).

    Candidates only: a term may have matched a JSON key rather than the text, so the
    caller checks :attr:`TextPart.text` itself. Rows are fetched ``batch`` at a time
    (keyset paging on ``(message time, id)``), ``max_rows`` at most in all per storage.

    Cost: each batch is one pass over the rows of the scope's top-level sessions in a
    storage, matching every blob against the patterns, then a sort of the matches; no
    index helps a substring search.
    """
    if not scope or not terms:
        return
    cond, params = scope.condition()
    yield from registry.text_parts_like(db, cond, params, [like_pattern(t) for t in terms],
                                        batch=batch, max_rows=max_rows)
