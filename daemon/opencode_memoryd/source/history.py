"""Bounded queries behind the read-only history browser, over one OpenCode database.

A project's recent top-level sessions, their message counts by role and their sub-agent
counts, a text search over their text parts, and a session's compaction checkpoints.
The SQL runs through :meth:`OpenCodeDB.select` (read-only, one short statement each);
every statement is bounded by a ``LIMIT`` or by a list of session ids of bounded length,
and none loads a whole table into memory. JSON fields are read with SQLite's
``json_extract`` behind a ``json_valid`` guard, so a corrupt row never fails a query.

A project is given as memory project keys (:attr:`SessionRow.project_key`): an OpenCode
project id for a git project, ``dir:<folder>`` for a folder of OpenCode's ``global``
project (not a git repository).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from opencode_memoryd.source.rows import MessageRow, SessionRow, decode_object
from opencode_memoryd.source.transcript import is_compaction_summary

if TYPE_CHECKING:
    from opencode_memoryd.source.reader import OpenCodeDB

#: Most session ids in one ``IN (…)`` list.
IN_BATCH = 500
#: How many messages after a compaction request are looked at for its summary.
SUMMARY_LOOKAHEAD = 6


def _json_field(column: str, path: str) -> str:
    """``json_extract`` that yields NULL for a row whose JSON is corrupt."""
    return f"(CASE WHEN json_valid({column}) THEN json_extract({column}, '{path}') END)"


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


def _batches(ids: Sequence[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    for start in range(0, len(ids), IN_BATCH):
        params: dict[str, Any] = {}
        yield _names("i", ids[start:start + IN_BATCH], params), params


def recent_sessions(db: OpenCodeDB, scope: ProjectScope, *, limit: int) -> list[SessionRow]:
    """The scope's top-level sessions (``parent_id`` NULL; archived ones included), most
    recently updated first, at most ``limit``. Forks are top-level sessions too."""
    if not scope:
        return []
    cond, params = scope.condition()
    rows = db.select(f"{db.session_select()} WHERE s.parent_id IS NULL AND {cond} "
                     "ORDER BY s.time_updated DESC, s.id DESC LIMIT :limit",
                     {**params, "limit": limit})
    return [SessionRow(*r) for r in rows]


def role_counts(db: OpenCodeDB, session_ids: Sequence[str]) -> dict[str, tuple[int, int]]:
    """``{session_id: (user messages, assistant messages)}``; sessions without messages
    are left out. Reads the ``data`` of every message of the given sessions."""
    role = _json_field("data", "$.role")
    out: dict[str, tuple[int, int]] = {}
    for names, params in _batches(session_ids):
        for sid, users, assistants in db.select(
            f"SELECT session_id, sum({role} = 'user'), sum({role} = 'assistant') "
            f"FROM message WHERE session_id IN ({names}) GROUP BY session_id", params):
            out[str(sid)] = (int(users or 0), int(assistants or 0))
    return out


def subagent_counts(db: OpenCodeDB, session_ids: Sequence[str]) -> dict[str, int]:
    """``{session_id: number of sub-agent sessions it started}`` (sessions with none are
    left out), through the ``session.parent_id`` index."""
    out: dict[str, int] = {}
    for names, params in _batches(session_ids):
        for sid, n in db.select(f"SELECT parent_id, count(*) FROM session WHERE parent_id "
                                f"IN ({names}) GROUP BY parent_id", params):
            out[str(sid)] = int(n)
    return out


@dataclass(frozen=True, slots=True)
class TextPart:
    """A text part found by :func:`text_parts_like`: its text and where it was said.

    ``time_created`` is the message's (ms since the epoch); ``role`` ``user`` or
    ``assistant``; ``summary`` is set for a compaction summary's text.
    """

    session_id: str
    session_title: str
    message_id: str
    part_id: str
    role: str
    time_created: int
    text: str
    summary: bool


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
    """Non-synthetic text parts of the scope's top-level sessions whose JSON contains
    every term (SQLite ``LIKE``: case-insensitive for ASCII letters only), newest message
    first.

    Candidates only: a term may have matched a JSON key rather than the text, so the
    caller checks :attr:`TextPart.text` itself. Rows are fetched ``batch`` at a time
    (keyset paging on ``(message time, part id)``), ``max_rows`` at most in all.

    Cost: each batch is one pass over the ``part`` rows of the scope's top-level
    sessions (found through the ``session.project_id`` and ``part.session_id`` indexes),
    matching every blob against the patterns, then a sort of the matches; no index helps
    a substring search.
    """
    if not scope or not terms:
        return
    cond, params = scope.condition()
    likes = []
    for i, term in enumerate(terms):
        params[f"t{i}"] = like_pattern(term)
        likes.append(f"p.data LIKE :t{i} ESCAPE '\\'")
    summary = ("(CASE WHEN json_valid(m.data) THEN json_type(m.data, '$.summary') = 'true' "
               "OR json_extract(m.data, '$.agent') = 'compaction' END)")
    sql = (f"SELECT p.id, p.message_id, p.session_id, m.time_created, s.title, "
           f"{_json_field('m.data', '$.role')}, {summary}, p.data "
           "FROM session s JOIN part p ON p.session_id = s.id "
           "JOIN message m ON m.id = p.message_id "
           f"WHERE s.parent_id IS NULL AND {cond} AND {' AND '.join(likes)} "
           f"AND {_json_field('p.data', '$.type')} = 'text' {{after}} "
           "ORDER BY m.time_created DESC, p.id DESC LIMIT :batch")
    after = ""
    seen = 0
    while seen < max_rows:
        rows = db.select(sql.format(after=after),
                         {**params, "batch": min(batch, max_rows - seen)})
        for pid, mid, sid, t, title, role, is_summary, raw in rows:
            data, corrupt = decode_object(raw)
            if corrupt or data.get("synthetic") or data.get("ignored"):
                continue
            yield TextPart(str(sid), str(title), str(mid), str(pid), str(role or ""),
                           int(t), str(data.get("text") or ""), bool(is_summary))
        seen += len(rows)
        if len(rows) < batch:
            return
        params["at"], params["ap"] = int(rows[-1][3]), rows[-1][0]
        after = "AND (m.time_created < :at OR (m.time_created = :at AND p.id < :ap))"


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """One compaction of a session: the user message that asked for it (id, time in ms),
    its ``compaction`` part (``auto``, ``overflow``), and the summary message OpenCode
    wrote (``None`` until it is written, or when it was deleted)."""

    request_id: str
    request_time: int
    part: dict[str, Any]
    summary: MessageRow | None


def compactions(db: OpenCodeDB, session_id: str, *, limit: int) -> list[Checkpoint]:
    """A session's compaction checkpoints, oldest first, at most ``limit``.

    Requests are found among the session's parts (``part.session_id`` index); each
    summary is the first compaction-summary message among the :data:`SUMMARY_LOOKAHEAD`
    messages after its request, preferring the one whose ``parentID`` is the request.
    """
    rows = db.select(
        "SELECT m.id, m.time_created, p.data FROM part p JOIN message m "
        "ON m.id = p.message_id WHERE p.session_id = :sid AND p.data LIKE '%compaction%' "
        f"AND {_json_field('p.data', '$.type')} = 'compaction' "
        "GROUP BY m.id ORDER BY m.time_created, m.id LIMIT :limit",
        {"sid": session_id, "limit": limit})
    out: list[Checkpoint] = []
    for mid, t, raw in rows:
        later = [m for m in db.messages_after(session_id, (int(t), str(mid)),
                                              limit=SUMMARY_LOOKAHEAD)
                 if m.role != "user" and is_compaction_summary(m)]
        summary = next((m for m in later if m.data.get("parentID") == mid),
                       later[0] if later else None)
        out.append(Checkpoint(str(mid), int(t), decode_object(raw)[0], summary))
    return out
