"""The history browser's statements over the 1.x ``message``/``part`` storage.

Run through the :class:`~.base.Reader` of an open database; each statement is bounded by a
``LIMIT`` or by a list of session ids of bounded length, and none loads a whole table into
memory. JSON fields are read with SQLite's ``json_extract`` behind a ``json_valid`` guard,
so a corrupt row never fails a query.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from opencode_memoryd.conversation.rows import decode_object
from opencode_memoryd.conversation.transcript import is_compaction_summary
from opencode_memoryd.source.storages.base import (
    Checkpoint,
    Reader,
    SearchScope,
    Storage,
    TextPart,
)

#: Most session ids in one ``IN (…)`` list.
IN_BATCH = 500
#: How many messages after a compaction request are looked at for its summary.
SUMMARY_LOOKAHEAD = 6


def json_field(column: str, path: str) -> str:
    """``json_extract`` that yields NULL for a row whose JSON is corrupt."""
    return f"(CASE WHEN json_valid({column}) THEN json_extract({column}, '{path}') END)"


def role_counts(db: Reader, session_ids: Sequence[str]) -> dict[str, tuple[int, int]]:
    """``{session_id: (user messages, assistant messages)}`` from the ``data`` of every
    message of the sessions (sessions without messages are left out)."""
    out: dict[str, tuple[int, int]] = {}
    role = json_field("data", "$.role")
    ids = list(session_ids)
    for start in range(0, len(ids), IN_BATCH):
        batch = ids[start:start + IN_BATCH]
        params = {f"i{k}": sid for k, sid in enumerate(batch)}
        names = ", ".join(f":i{k}" for k in range(len(batch)))
        for sid, users, assistants in db.rows(
            f"SELECT session_id, sum({role} = 'user'), sum({role} = 'assistant') "
            f"FROM message WHERE session_id IN ({names}) GROUP BY session_id", params):
            out[str(sid)] = (int(users or 0), int(assistants or 0))
    return out


def text_parts_like(db: Reader, scope: SearchScope, *, batch: int, max_rows: int
                    ) -> Iterator[TextPart]:
    """The non-synthetic, non-ignored ``text`` parts of the scope's top-level sessions
    whose ``part.data`` is ``LIKE`` every pattern, newest message first (keyset paging on
    ``(time_created, part id)``).

    Cost: each batch is one pass over the ``part`` rows of the scope's top-level sessions
    (found through the ``project_id`` and ``session_id`` indexes), matching every blob
    against the patterns, then a sort of the matches; no index helps a substring search.
    """
    params: dict[str, Any] = dict(scope.params)
    likes = []
    for i, pattern in enumerate(scope.patterns):
        params[f"t{i}"] = pattern
        likes.append(f"p.data LIKE :t{i} ESCAPE '\\'")
    summary = ("(CASE WHEN json_valid(m.data) THEN json_type(m.data, '$.summary') = 'true' "
               "OR json_extract(m.data, '$.agent') = 'compaction' END)")
    sql = (f"SELECT p.id, p.message_id, p.session_id, m.time_created, s.title, "
           f"{json_field('m.data', '$.role')}, {summary}, p.data "
           "FROM session s JOIN part p ON p.session_id = s.id "
           "JOIN message m ON m.id = p.message_id "
           f"WHERE s.parent_id IS NULL AND {scope.condition} AND {' AND '.join(likes)} "
           f"AND {json_field('p.data', '$.type')} = 'text' {{after}} "
           "ORDER BY m.time_created DESC, p.id DESC LIMIT :batch")
    after = ""
    seen = 0
    while seen < max_rows:
        rows = db.rows(sql.format(after=after), {**params, "batch": min(batch, max_rows - seen)})
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


def compactions(db: Reader, storage: Storage, session_id: str, *, limit: int
                ) -> list[Checkpoint]:
    """The session's compaction requests (a ``compaction`` part), oldest first, at most
    ``limit``, each with the first compaction-summary message among the
    :data:`SUMMARY_LOOKAHEAD` messages after it (read through ``storage``), preferring the
    one whose ``parentID`` is the request."""
    rows = db.rows(
        "SELECT m.id, m.time_created, p.data FROM part p JOIN message m "
        "ON m.id = p.message_id WHERE p.session_id = :sid AND p.data LIKE '%compaction%' "
        f"AND {json_field('p.data', '$.type')} = 'compaction' "
        "GROUP BY m.id ORDER BY m.time_created, m.id LIMIT :limit",
        {"sid": session_id, "limit": limit})
    out: list[Checkpoint] = []
    for mid, t, raw in rows:
        later = [m for m in storage.messages_after(db, session_id, (int(t), str(mid)),
                                                   limit=SUMMARY_LOOKAHEAD, max_rowid=None)
                 if m.role != "user" and is_compaction_summary(m)]
        summary = next((m for m in later if m.data.get("parentID") == mid),
                       later[0] if later else None)
        out.append(Checkpoint(str(mid), int(t), decode_object(raw)[0], summary))
    return out
