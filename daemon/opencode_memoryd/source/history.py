"""Bounded queries behind the read-only history browser, over one OpenCode database.

A project's recent top-level sessions, their message counts by role and their sub-agent
counts, a session's messages a page at a time, a text search over their text, and a
session's compaction checkpoints. Each session is read from the storage that holds its
turns: ``session_message`` when it has rows there (:mod:`~.history_v2`), else the 1.x
``message``/``part`` tables; sessions are listed from ``session_v2`` union ``session``.
The SQL runs through :meth:`OpenCodeDB.select` (read-only, one short statement each);
every statement is bounded by a ``LIMIT`` or by a list of session ids of bounded length,
and none loads a whole table into memory. JSON fields are read with SQLite's
``json_extract`` behind a ``json_valid`` guard, so a corrupt row never fails a query.

A project is given as memory project keys (:attr:`SessionRow.project_key`): an OpenCode
project id for a git project, ``dir:<folder>`` for a folder of OpenCode's ``global``
project (not a git repository).
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from opencode_memoryd.models import STORAGE_SESSION_MESSAGE
from opencode_memoryd.source import history_v2
from opencode_memoryd.source.rows import MessageRow, SessionRow, decode_object, session_from_row
from opencode_memoryd.source.transcript import Readable, is_compaction_summary, readable

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
    out = []
    for r in history_v2.recent_sessions(db, cond, params, limit=limit):
        row = session_from_row(r[:12])
        if row is not None:
            out.append((row, int(r[12])))
    return out


def role_counts(db: OpenCodeDB, session_ids: Sequence[str]) -> dict[str, tuple[int, int]]:
    """``{session_id: (user messages, assistant messages)}``; sessions without messages
    are left out. A session with ``session_message`` rows is counted there (its
    ``user``/``assistant`` rows, :func:`history_v2.role_counts`); the others read the
    ``data`` of every 1.x message of theirs."""
    out = history_v2.role_counts(db, session_ids)
    rest = [sid for sid in session_ids if sid not in out]
    if not rest or not db.schema.has_v1_messages:
        return out
    role = _json_field("data", "$.role")
    for names, params in _batches(rest):
        for sid, users, assistants in db.select(
            f"SELECT session_id, sum({role} = 'user'), sum({role} = 'assistant') "
            f"FROM message WHERE session_id IN ({names}) GROUP BY session_id", params):
            out[str(sid)] = (int(users or 0), int(assistants or 0))
    return out


def subagent_counts(db: OpenCodeDB, session_ids: Sequence[str]) -> dict[str, int]:
    """``{session_id: number of sub-agent sessions it started}`` (sessions with none are
    left out), from both session tables through their ``parent_id`` indexes (a session
    in both is counted once)."""
    tables = [t for t, present in (("session", db.schema.has_v1_sessions),
                                   ("session_v2", db.schema.has_v2_sessions)) if present]
    out: dict[str, int] = {}
    for names, params in _batches(session_ids):
        union = " UNION ".join(f"SELECT id, parent_id FROM {t} WHERE parent_id IN ({names})"
                               for t in tables)
        if not union:
            return out
        for sid, n in db.select(f"SELECT parent_id, count(*) FROM ({union}) "
                                "GROUP BY parent_id", params):
            out[str(sid)] = int(n)
    return out


def last_activity(db: OpenCodeDB, session: SessionRow) -> int:
    """The session's activity (ms): the later of its ``time_updated`` and its newest
    ``session_message`` row's ``time_created``."""
    return max(session.time_updated,
               history_v2.last_activity(db, [session.id]).get(session.id, 0))


def _in_v2(db: OpenCodeDB, session_id: str) -> bool:
    return db.storage_of(session_id) == STORAGE_SESSION_MESSAGE


def message_count(db: OpenCodeDB, session_id: str) -> int:
    """How many messages :func:`message_page` pages over (counted on an index): 1.x
    ``message`` rows, or the session's ``session_message`` rows of
    :data:`history_v2.VISIBLE_KINDS`."""
    if _in_v2(db, session_id):
        return history_v2.message_count(db, session_id)
    if not db.schema.has_v1_messages:
        return 0
    return db.message_count(session_id)


def message_page(db: OpenCodeDB, session_id: str, *, offset: int, limit: int
                 ) -> list[MessageRow]:
    """Messages ``offset`` … ``offset + limit - 1`` of a session, with their parts, in
    the storage it is read from: ``(time_created, id)`` order in ``message``, ``seq``
    order in ``session_message``."""
    if _in_v2(db, session_id):
        return history_v2.message_page(db, session_id, offset=offset, limit=limit)
    if not db.schema.has_v1_messages:
        return []
    return db.message_page(session_id, offset=offset, limit=limit)


def render(message: MessageRow, *, tool_output_chars: int) -> Readable:
    """A message of either storage as readable text (:func:`~.transcript.readable` or
    :func:`history_v2.readable_v2`)."""
    if message.kind is None:
        return readable(message, tool_output_chars=tool_output_chars)
    return history_v2.readable_v2(message, tool_output_chars=tool_output_chars)


def role_of(message: MessageRow) -> str:
    """``user`` or ``assistant`` for a message of either storage (``""`` for a 1.x row
    without a role)."""
    return message.role if message.kind is None else history_v2.role_of(message)


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
    """Text of the scope's top-level sessions whose JSON contains every term (SQLite
    ``LIKE``: case-insensitive for ASCII letters only), newest message first: the
    non-synthetic text parts of 1.x messages, and the ``session_message`` rows of
    :data:`history_v2.SEARCH_KINDS` (one :class:`TextPart` per row, its ``part_id`` the
    row id, its text :func:`history_v2.search_text`), merged by message time.

    Candidates only: a term may have matched a JSON key rather than the text, so the
    caller checks :attr:`TextPart.text` itself. Rows are fetched ``batch`` at a time
    (keyset paging on ``(message time, id)``), ``max_rows`` at most in all per storage.

    Cost: each batch is one pass over the ``part`` (or ``session_message``) rows of the
    scope's top-level sessions (found through the ``project_id`` and ``session_id``
    indexes), matching every blob against the patterns, then a sort of the matches; no
    index helps a substring search.
    """
    if not scope or not terms:
        return
    cond, params = scope.condition()
    patterns = [like_pattern(t) for t in terms]
    v2 = (TextPart(m.session_id, title, m.id, m.id, history_v2.role_of(m), m.time_created,
                   history_v2.search_text(m), m.kind == "compaction")
          for title, m in history_v2.text_rows_like(db, cond, params, patterns,
                                                    batch=batch, max_rows=max_rows))
    yield from heapq.merge(_v1_text_parts(db, cond, params, patterns, batch=batch,
                                          max_rows=max_rows), v2,
                           key=lambda p: p.time_created, reverse=True)


def _v1_text_parts(db: OpenCodeDB, cond: str, params: dict[str, Any],
                   patterns: Sequence[str], *, batch: int, max_rows: int
                   ) -> Iterator[TextPart]:
    """The 1.x half of :func:`text_parts_like`: sessions with ``session_message`` rows
    are left out (their turns are read there)."""
    if not (db.schema.has_v1_messages and db.schema.has_v1_sessions):
        return
    params = dict(params)
    read_v2 = (" AND NOT EXISTS (SELECT 1 FROM session_message sm WHERE sm.session_id = s.id)"
               if db.schema.has_session_message else "")
    likes = []
    for i, pattern in enumerate(patterns):
        params[f"t{i}"] = pattern
        likes.append(f"p.data LIKE :t{i} ESCAPE '\\'")
    summary = ("(CASE WHEN json_valid(m.data) THEN json_type(m.data, '$.summary') = 'true' "
               "OR json_extract(m.data, '$.agent') = 'compaction' END)")
    sql = (f"SELECT p.id, p.message_id, p.session_id, m.time_created, s.title, "
           f"{_json_field('m.data', '$.role')}, {summary}, p.data "
           "FROM session s JOIN part p ON p.session_id = s.id "
           "JOIN message m ON m.id = p.message_id "
           f"WHERE s.parent_id IS NULL AND {cond}{read_v2} AND {' AND '.join(likes)} "
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
    wrote (``None`` until it is written, or when it was deleted). In ``session_message``
    one ``compaction`` row is both: the request and, once its ``summary`` is written, the
    summary (render it with :func:`render`)."""

    request_id: str
    request_time: int
    part: dict[str, Any]
    summary: MessageRow | None


def compactions(db: OpenCodeDB, session_id: str, *, limit: int) -> list[Checkpoint]:
    """A session's compaction checkpoints, oldest first, at most ``limit``.

    1.x: requests are found among the session's parts (``part.session_id`` index); each
    summary is the first compaction-summary message among the :data:`SUMMARY_LOOKAHEAD`
    messages after its request, preferring the one whose ``parentID`` is the request.
    ``session_message``: the session's ``compaction`` rows (``reason``, ``summary``).
    """
    if _in_v2(db, session_id):
        return [Checkpoint(m.id, m.time_created, history_v2.compaction_part(m),
                           m if history_v2.search_text(m).strip() else None)
                for m in history_v2.compaction_rows(db, session_id, limit=limit)]
    if not db.schema.has_v1_messages:
        return []
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
