"""The history browser's statements over OpenCode's v2 storage (``session_message``).

Sessions are listed from ``session_v2`` union ``session``
(:func:`~.sessions.session_union`). Every statement runs through the :class:`~.base.Reader`
of an open database and is bounded by a ``LIMIT``, a
single session or a list of at most :data:`IN_BATCH` session ids, through the
``(session_id, seq)``, ``(session_id, type, seq)`` and ``(session_id, time_created, id)``
indexes of ``session_message``. JSON is decoded in Python (:func:`message_from_v2`), where a
corrupt row reads as empty.

Which rows a person sees (:data:`VISIBLE_KINDS`): ``user`` and ``assistant`` rows, and the
notes that carry text of the conversation: ``synthetic`` (text OpenCode wrote itself),
``compaction`` (its ``summary``) and ``shell`` (a command the person ran, and its output).
``system``, ``idle`` and the ``*-switched`` rows are bookkeeping and are left out.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from opencode_memoryd.conversation.rows import MessageRow
from opencode_memoryd.conversation.transcript import Readable, readable, tool_line
from opencode_memoryd.source.storages.base import Reader, SearchScope
from opencode_memoryd.source.storages.sessions import session_union
from opencode_memoryd.source.storages.v2rows import message_from_v2

#: Most session ids in one ``IN (…)`` or ``VALUES`` list.
IN_BATCH = 500
#: The ``session_message`` kinds the history browser lists, in ``seq`` order.
VISIBLE_KINDS = ("user", "assistant", "synthetic", "compaction", "shell")
#: The kinds whose text a search looks at (a compaction's summary included).
SEARCH_KINDS = ("user", "assistant", "compaction")
_COLUMNS = "id, session_id, type, seq, time_created, time_updated, data"
_VISIBLE = "type IN (" + ", ".join(f"'{k}'" for k in VISIBLE_KINDS) + ")"


def _values(ids: Sequence[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(VALUES list, params)`` per batch of at most :data:`IN_BATCH` ids."""
    for start in range(0, len(ids), IN_BATCH):
        batch = ids[start:start + IN_BATCH]
        yield (", ".join(f"(:i{k})" for k in range(len(batch))),
               {f"i{k}": sid for k, sid in enumerate(batch)})


def role_counts(db: Reader, session_ids: Sequence[str]) -> dict[str, tuple[int, int]]:
    """``{session_id: (user rows, assistant rows)}`` of the sessions that have
    ``session_message`` rows (the others are left out); one assistant row per model
    step, as 1.x writes one assistant message per step. Reads the ``(session_id, type,
    seq)`` index only."""
    out: dict[str, tuple[int, int]] = {}
    if not db.schema.has_session_message:
        return out
    for values, params in _values(list(session_ids)):
        for sid, users, assistants in db.rows(
                f"WITH ids(sid) AS (VALUES {values}) SELECT m.session_id, "
                "sum(m.type = 'user'), sum(m.type = 'assistant') FROM ids "
                "JOIN session_message m ON m.session_id = ids.sid GROUP BY m.session_id",
                params):
            out[str(sid)] = (int(users or 0), int(assistants or 0))
    return out


def message_count(db: Reader, session_id: str) -> int:
    """How many rows of :data:`VISIBLE_KINDS` the session has in ``session_message``."""
    return int(db.rows(f"SELECT count(*) FROM session_message WHERE session_id = :sid "
                         f"AND {_VISIBLE}", {"sid": session_id})[0][0])


def message_page(db: Reader, session_id: str, *, offset: int, limit: int
                 ) -> list[MessageRow]:
    """Rows ``offset`` … ``offset + limit - 1`` of :data:`VISIBLE_KINDS` of a session, in
    ``seq`` order, as :class:`MessageRow` values (see :mod:`~.v2rows`). The page's ids
    are picked on the index first, so skipped rows' ``data`` is never read."""
    rows = db.rows(
        f"SELECT {_COLUMNS} FROM session_message WHERE id IN (SELECT id FROM "
        f"session_message WHERE session_id = :sid AND {_VISIBLE} ORDER BY seq "
        "LIMIT :limit OFFSET :offset) ORDER BY seq",
        {"sid": session_id, "limit": limit, "offset": offset})
    return [message_from_v2(*r) for r in rows]


def compaction_rows(db: Reader, session_id: str, *, limit: int) -> list[MessageRow]:
    """A session's ``compaction`` rows (``reason``, ``summary``, 2.x ``status``), oldest
    first, at most ``limit``, through the ``(session_id, type, seq)`` index."""
    rows = db.rows(f"SELECT {_COLUMNS} FROM session_message WHERE session_id = :sid "
                     "AND type = 'compaction' ORDER BY seq LIMIT :limit",
                     {"sid": session_id, "limit": limit})
    return [message_from_v2(*r) for r in rows]


def text_rows_like(db: Reader, scope: SearchScope, *, batch: int, max_rows: int
                   ) -> Iterator[tuple[str, MessageRow]]:
    """``(session title, row)`` for the :data:`SEARCH_KINDS` rows of the top-level
    sessions matching ``scope.condition`` whose ``data`` JSON is ``LIKE`` every pattern
    (``ESCAPE '\\'``), newest first (keyset paging on ``(time_created, id)``), ``batch``
    rows a statement and ``max_rows`` in all. Candidates only: the caller checks the
    text (:func:`search_text`).

    Cost: each batch is one pass over the ``session_message`` rows of the matching
    sessions (the ``(session_id, …)`` index), matching every blob against the patterns.
    """
    union = session_union(db.schema, ["s.parent_id IS NULL", scope.condition])
    if union is None or not db.schema.has_session_message or not scope.patterns:
        return
    params: dict[str, Any] = dict(scope.params)
    likes = []
    for i, pattern in enumerate(scope.patterns):
        params[f"t{i}"] = pattern
        likes.append(f"m.data LIKE :t{i} ESCAPE '\\'")
    kinds = ", ".join(f"'{k}'" for k in SEARCH_KINDS)
    sql = (f"SELECT s.title, {', '.join('m.' + c for c in _COLUMNS.split(', '))} "
           f"FROM ({union}) s JOIN session_message m ON m.session_id = s.id "
           f"WHERE m.type IN ({kinds}) AND {' AND '.join(likes)} {{after}} "
           "ORDER BY m.time_created DESC, m.id DESC LIMIT :batch")
    after = ""
    seen = 0
    while seen < max_rows:
        rows = db.rows(sql.format(after=after),
                         {**params, "batch": min(batch, max_rows - seen)})
        for title, *columns in rows:
            yield str(title or ""), message_from_v2(*columns)
        seen += len(rows)
        if len(rows) < batch:
            return
        params["at"], params["ai"] = int(rows[-1][5]), rows[-1][1]
        after = "AND (m.time_created < :at OR (m.time_created = :at AND m.id < :ai))"


def search_text(message: MessageRow) -> str:
    """The text a search looks at in a v2 row: a user's ``text``, an assistant's text
    items (not reasoning, not tools), a compaction's ``summary``; ``""`` otherwise."""
    if message.corrupt:
        return ""
    if message.kind == "compaction":
        return str(message.data.get("summary") or "")
    if message.kind not in ("user", "assistant"):
        return ""
    return "\n".join(str(p.data.get("text") or "") for p in message.parts
                     if p.data.get("type") == "text")


def role_of(message: MessageRow) -> str:
    """The role a v2 row is shown with: ``assistant`` for assistant and compaction rows,
    ``user`` for the rest (a user prompt, a ``shell`` command the person ran, OpenCode's
    ``synthetic`` text, as 1.x stores that as a user message)."""
    return "assistant" if message.kind in ("assistant", "compaction") else "user"


def readable_v2(message: MessageRow, *, tool_output_chars: int) -> Readable:
    """A v2 row as readable text, as
    :func:`~opencode_memoryd.conversation.transcript.readable` renders a 1.x message.

    ``user``: the human text, then ``[file: name]`` per attachment (``files[]``);
    ``assistant``: as 1.x (text, ``[tool] …`` lines, ``[error: type]``); ``synthetic``:
    its text (kind ``synthetic``); ``compaction``: its summary (kind ``summary``), or
    ``[compaction requested: automatic|manual]`` (kind ``compaction``) while it has none;
    ``shell``: ``[shell] command -> output`` (kind ``shell``). Corrupt rows read as empty.
    """
    data = message.data
    if message.corrupt or message.kind in ("user", "assistant"):
        base = readable(message, tool_output_chars=tool_output_chars)
        files = data.get("files") if message.kind == "user" else None
        names = [f"[file: {f.get('name') or f.get('uri') or '?'}]"
                 for f in (files if isinstance(files, list) else []) if isinstance(f, dict)]
        if not names:
            return base
        return Readable("text", "\n".join(x for x in (base.text, *names) if x))
    if message.kind == "synthetic":
        return Readable("synthetic", str(data.get("text") or "").strip())
    if message.kind == "compaction":
        summary = str(data.get("summary") or "").strip()
        if summary:
            return Readable("summary", summary)
        how = "automatic" if data.get("reason") == "auto" else "manual"
        return Readable("compaction", f"[compaction requested: {how}]")
    if message.kind == "shell":
        part = {"tool": "bash", "state": {"input": {"command": data.get("command") or ""},
                                          "output": data.get("output") or ""}}
        return Readable("shell", "[shell] " + tool_line(part, tool_output_chars))
    return Readable("text", "")


def compaction_part(message: MessageRow) -> dict[str, Any]:
    """A v2 compaction row as the 1.x ``compaction`` part fields the browser reports:
    ``{auto, overflow}`` (``overflow`` as the row records it, else ``None``: the rows
    observed so far have ``reason`` only)."""
    return {"auto": message.data.get("reason") == "auto",
            "overflow": message.data.get("overflow")}
