"""Read-only conversation history over OpenCode's databases: a project's recent sessions,
one session's messages as readable text, a text search, and compaction checkpoints.

Nothing here touches the memory store or writes anywhere: every call opens the OpenCode
database(s) read-only (``--db PATH``, else the configured or discovered ones), runs a few
bounded queries (:mod:`opencode_memoryd.source.history`) and closes them. Every text that
leaves (titles, message texts, snippets, summaries) has gone through
:func:`~opencode_memoryd.redaction.engine.scrub` first, and a session's messages, snippets
and summaries are also cleared of every value the session revealed as a secret elsewhere
(:mod:`~opencode_memoryd.usecases.history_secrets`), so history never hands a secret to
the model that asks for it. Times are ISO 8601 UTC strings with milliseconds.

A folder's project is resolved as for memories
(:func:`~opencode_memoryd.usecases.projects.project_keys_for_dir`): the OpenCode projects
of the sessions whose project root is that folder or whose working directory is in it.

Errors: :class:`RequestError` for a bad argument (the message says what to pass),
:class:`NotFoundError` for a session id no database holds, :class:`SourceError` when no
OpenCode database can be read at all. An unreadable database among several is skipped
(logged). Empty results are empty lists, never errors.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING, Any

import structlog

from opencode_memoryd.config.paths import normalize_dir
from opencode_memoryd.conversation.rows import SessionRow
from opencode_memoryd.errors import NotFoundError, RequestError, SourceError
from opencode_memoryd.models import iso_utc, utc_from_ms
from opencode_memoryd.redaction.engine import scrub
from opencode_memoryd.redaction.known import SessionSecrets
from opencode_memoryd.source import history as queries
from opencode_memoryd.usecases import limits
from opencode_memoryd.usecases.history_secrets import session_secrets
from opencode_memoryd.usecases.ports import AppPort
from opencode_memoryd.usecases.projects import project_keys_for_dir

if TYPE_CHECKING:
    from opencode_memoryd.source.reader import OpenCodeDB

log = structlog.get_logger(__name__)

#: Upper bounds of ``limit`` (a larger one is lowered to these, not refused).
MAX_SESSIONS, MAX_MESSAGES, MAX_HITS = limits.MAX_SESSIONS, limits.MAX_MESSAGES, limits.MAX_HITS
MAX_COMPACTIONS = 100
#: Longest message text returned, in characters (after redaction), and a summary's.
MESSAGE_TEXT_CHARS = 4000
SUMMARY_TEXT_CHARS = 8000
#: Shell output kept on a tool line, in characters.
TOOL_OUTPUT_CHARS = 200
#: Characters of context on each side of a search match.
SNIPPET_CHARS = 80
#: Search: most terms, longest query, most candidate text parts read per database.
MAX_TERMS = 8
MAX_QUERY_CHARS = 500
SEARCH_MAX_ROWS = 2000


# -- arguments ------------------------------------------------------------------------

def _whole(name: str, value: object, *, minimum: int, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise RequestError(f"`{name}` must be a whole number, got {value!r}")
    if value < minimum:
        raise RequestError(f"`{name}` must be at least {minimum}, got {value}")
    return value if maximum is None else min(value, maximum)


def _text(name: str, value: object, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise RequestError(f"`{name}` is required: {what}")
    return value.strip()


# -- databases ------------------------------------------------------------------------

@contextmanager
def _databases(app: AppPort, db: str | None) -> Iterator[list[OpenCodeDB]]:
    """Every readable OpenCode database, open; closed on exit.

    Raises:
        SourceError: none is found, or none of them can be read (the first error).
    """
    with ExitStack() as stack:
        opened: list[OpenCodeDB] = []
        first: SourceError | None = None
        for path in app.database_paths(db):
            try:
                opened.append(stack.enter_context(app.open_source(path)))
            except SourceError as exc:
                log.warning("source_unreadable", db=str(path), error=str(exc))
                first = first or exc
        if not opened and first is not None:
            raise first
        yield opened


def _find_session(dbs: Sequence[OpenCodeDB], session_id: str
                  ) -> tuple[OpenCodeDB, SessionRow]:
    for source in dbs:
        row = source.session(session_id)
        if row is not None:
            return source, row
    raise NotFoundError(f"no OpenCode session {session_id!r}: take an id from the "
                        "recent sessions of the project (history sessions)")


# -- shapes ---------------------------------------------------------------------------

def _iso(ms: int) -> str:
    return iso_utc(utc_from_ms(ms))


def _clean(text: str, limit: int, known: SessionSecrets) -> tuple[str, bool]:
    """Redacted (also the session's ``known`` secrets), then cut to ``limit`` characters
    (cutting after redaction never leaves half a secret unrecognised)."""
    red = known.redact_known(scrub(text).text).text
    if len(red) <= limit:
        return red, False
    return red[: limit - 1] + "…", True


def session_info(s: SessionRow, active: int | None = None,
                 known: SessionSecrets | None = None) -> dict[str, Any]:
    """A session as JSON: ``{id, title (redacted, also of the ``known`` secrets),
    directory, project_id, created, updated (ISO 8601 UTC), parent_id, archived}``;
    ``updated`` is ``active`` (the session's newest activity in ms, see
    :func:`queries.last_activity`) when given, else its ``time_updated``."""
    title = scrub(s.title).text
    if known is not None:
        title = known.redact_known(title).text
    return {"id": s.id, "title": title, "directory": s.directory,
            "project_id": s.project_id, "created": _iso(s.time_created),
            "updated": _iso(s.time_updated if active is None else active),
            "parent_id": s.parent_id, "archived": s.archived}


def _scope(app: AppPort, directory: object, db: str | None) -> queries.ProjectScope:
    folder = normalize_dir(_text("directory", directory, "the project folder"))
    return queries.ProjectScope.from_keys(project_keys_for_dir(app, folder, db))


# -- use cases ------------------------------------------------------------------------

def sessions(app: AppPort, *, directory: str, limit: int = 20, db: str | None = None
             ) -> list[dict[str, Any]]:
    """The recent top-level sessions of DIR's project, newest activity first.

    Sub-agent sessions (the task tool's, ``parent_id`` set) are not listed: each session
    says how many it started (``subagents``); read one with :func:`messages` by its id.
    Forks are listed (their title ends ``(fork #N)``); archived sessions are listed with
    ``archived: true``. Sessions of both storages are listed: 1.x (``message``/``part``)
    and v2 (``session_message``, sessions in ``session`` or OpenCode 2.x's
    ``session_v2``); ``updated`` is the newest activity, the later of the session's
    ``time_updated`` and its newest ``session_message`` row (v2 turns do not bump
    ``time_updated``).

    Args:
        directory: the project folder (or any folder OpenCode ran in inside it).
        limit: most sessions returned, 1 to :data:`MAX_SESSIONS` (larger is lowered).
        db: an OpenCode database path instead of the configured/discovered ones.

    Returns:
        ``[{id, title, directory, project_id, created, updated, parent_id: null, archived,
        user_messages, assistant_messages, subagents}]``; ``[]`` when DIR has no
        OpenCode project. Message counts are rows by role (compaction requests and
        OpenCode's own continuations count as user messages; a v2 session counts its
        ``user`` and ``assistant`` rows, one assistant row per model step).

    Raises:
        RequestError: no directory, or a bad ``limit``.
        SourceError: no OpenCode database can be read.
    """
    limit = _whole("limit", limit, minimum=1, maximum=MAX_SESSIONS)
    scope = _scope(app, directory, db)
    found: dict[str, tuple[OpenCodeDB, SessionRow, int]] = {}
    with _databases(app, db) as dbs:
        for source in dbs:
            for row, active in queries.recent_sessions(source, scope, limit=limit):
                found.setdefault(row.id, (source, row, active))
        chosen = sorted(found.values(), key=lambda x: (x[2], x[1].id), reverse=True)[:limit]
        out: list[tuple[int, dict[str, Any]]] = []
        for source in dbs:
            mine = [(r, a) for d, r, a in chosen if d is source]
            if not mine:
                continue
            ids = [r.id for r, _ in mine]
            counts = queries.role_counts(source, ids)
            children = queries.subagent_counts(source, ids)
            for row, active in mine:
                users, assistants = counts.get(row.id, (0, 0))
                out.append((active, {**session_info(row, active), "user_messages": users,
                                     "assistant_messages": assistants,
                                     "subagents": children.get(row.id, 0)}))
    out.sort(key=lambda x: (x[0], x[1]["id"]), reverse=True)
    return [info for _, info in out]


def messages(app: AppPort, *, session_id: str, offset: int = 0, limit: int = 50,
             db: str | None = None) -> dict[str, Any]:
    """One session (sub-agent sessions too) as readable text, one page of messages.

    Each message: ``{id, role, time, kind, text, truncated}``. ``kind`` is ``text``,
    ``compaction`` (the user message asking for a compaction; text ``[compaction
    requested: automatic|manual]``), ``summary`` (the compaction summary OpenCode
    wrote) or ``synthetic`` (a user message OpenCode wrote itself, such as the
    continuation after an automatic compaction). User text is what the person typed
    plus ``[file: name]`` per attachment (OpenCode's synthetic file-read texts are left
    out); assistant text is the visible text, ``[tool] …`` per tool call and
    ``[error: Name]`` for a failed step (reasoning is left out). Texts are redacted and
    cut to :data:`MESSAGE_TEXT_CHARS` (``truncated``). Every message row is listed, in
    ``(time_created, id)`` order, so offsets are stable while nothing is reverted.

    A session whose turns are in ``session_message`` (v2) is read from there, in ``seq``
    order: its ``user`` and ``assistant`` rows rendered as above, ``synthetic`` rows
    (kind ``synthetic``, role ``user``), ``compaction`` rows (kind ``summary`` with the
    summary, role ``assistant``; ``compaction`` while it has none) and ``shell`` rows
    (kind ``shell``, role ``user``: ``[shell] bash COMMAND -> output``); its ``system``,
    ``idle`` and ``*-switched`` rows are not listed.

    Args:
        session_id: the session's id (``ses_…``).
        offset: messages to skip (0 or more).
        limit: most messages returned, 1 to :data:`MAX_MESSAGES` (larger is lowered).
        db: an OpenCode database path instead of the configured/discovered ones.

    Returns:
        ``{session: session_info, messages: [...], offset, limit, total,
        next_offset}``; ``next_offset`` is ``null`` on the last page.

    Raises:
        RequestError: no session id, or a bad ``offset``/``limit``.
        NotFoundError: no database holds that session.
        SourceError: no OpenCode database can be read.
    """
    sid = _text("session_id", session_id, "a session id such as ses_… (history sessions)")
    offset = _whole("offset", offset, minimum=0)
    limit = _whole("limit", limit, minimum=1, maximum=MAX_MESSAGES)
    with _databases(app, db) as dbs:
        source, row = _find_session(dbs, sid)
        storage = source.storage_for(sid)
        total = storage.message_count(source, sid)
        page = storage.message_page(source, sid, offset=offset, limit=limit)
        active = queries.last_activity(source, row)
        known = session_secrets(source, sid, row.title)
    out = []
    for m in page:
        r = storage.render(m, tool_output_chars=TOOL_OUTPUT_CHARS)
        text, cut = _clean(r.text, MESSAGE_TEXT_CHARS, known)
        out.append({"id": m.id, "role": storage.role_of(m), "time": _iso(m.time_created),
                    "kind": r.kind, "text": text, "truncated": cut})
    end = offset + len(page)
    return {"session": session_info(row, active, known), "messages": out, "offset": offset,
            "limit": limit, "total": total, "next_offset": end if end < total else None}


def _terms(query: object) -> list[str]:
    q = _text("query", query, "the words to look for")
    if len(q) > MAX_QUERY_CHARS:
        raise RequestError(f"`query` is too long ({len(q)} characters, at most "
                           f"{MAX_QUERY_CHARS}): search for a few distinctive words")
    terms = list(dict.fromkeys(t.lower() for t in q.split()))
    if len(terms) > MAX_TERMS:
        raise RequestError(f"`query` has {len(terms)} words, at most {MAX_TERMS}: "
                           "search for a few distinctive words")
    return terms


def _snippet(text: str, terms: Sequence[str]) -> str:
    low = text.lower()
    at, size = min(((low.find(t), len(t)) for t in terms if t in low), default=(0, 0))
    start, end = max(at - SNIPPET_CHARS, 0), at + size + SNIPPET_CHARS
    body = " ".join(text[start:end].split())
    return ("…" if start > 0 else "") + body + ("…" if end < len(text) else "")


def search(app: AppPort, *, query: str, directory: str, limit: int = 20,
           db: str | None = None) -> list[dict[str, Any]]:
    """Text search across the conversations of DIR's project, newest first.

    Looks at the text parts of user and assistant messages of the project's top-level
    sessions (OpenCode's synthetic texts, tool calls, reasoning and sub-agent sessions
    are not searched). A hit is a message whose text holds every word of ``query``,
    case-insensitively (``str.lower``), after redaction: a word that only occurs inside a
    secret does not match. One hit per message. In v2 sessions (``session_message``) the
    text of ``user`` rows, the text items of ``assistant`` rows and the summary of
    ``compaction`` rows are searched.

    Cost: SQLite ``LIKE`` on the ``part.data`` (and ``session_message.data``) JSON of the
    project's sessions (no index can serve a substring search), so one pass over the
    project's rows per batch of candidates; at most :data:`SEARCH_MAX_ROWS` candidates
    are read per database and storage, so matches older than that many candidates may
    be missed.

    Args:
        query: one or more words (at most :data:`MAX_TERMS`, :data:`MAX_QUERY_CHARS`
            characters).
        directory: the project folder.
        limit: most hits returned, 1 to :data:`MAX_HITS` (larger is lowered).
        db: an OpenCode database path instead of the configured/discovered ones.

    Returns:
        ``[{session_id, session_title, message_id, role, kind, time, snippet}]``: ``kind``
        is ``summary`` for a compaction summary, else ``text``; the snippet is about
        :data:`SNIPPET_CHARS` characters on each side of the first match, redacted.

    Raises:
        RequestError: no query, too many words, no directory or a bad ``limit``.
        SourceError: no OpenCode database can be read.
    """
    terms = _terms(query)
    limit = _whole("limit", limit, minimum=1, maximum=MAX_HITS)
    scope = _scope(app, directory, db)
    hits: dict[str, tuple[int, dict[str, Any]]] = {}
    with _databases(app, db) as dbs:
        for source in dbs:
            found = 0
            known: dict[str, SessionSecrets] = {}
            for part in queries.text_parts_like(source, scope, terms,
                                                batch=max(limit * 3, 60),
                                                max_rows=SEARCH_MAX_ROWS):
                if part.message_id in hits:
                    continue
                if part.session_id not in known:
                    known[part.session_id] = session_secrets(source, part.session_id,
                                                             part.session_title)
                secrets = known[part.session_id]
                text = secrets.redact_known(scrub(part.text).text).text
                low = text.lower()
                if not all(t in low for t in terms):
                    continue
                hits[part.message_id] = (part.time_created, {
                    "session_id": part.session_id,
                    "session_title": secrets.redact_known(
                        scrub(part.session_title).text).text,
                    "message_id": part.message_id, "role": part.role,
                    "kind": "summary" if part.summary else "text",
                    "time": _iso(part.time_created), "snippet": _snippet(text, terms)})
                found += 1
                if found >= limit:
                    break
    ranked = sorted(hits.values(), key=lambda h: (h[0], h[1]["message_id"]), reverse=True)
    return [h for _, h in ranked[:limit]]


def compactions(app: AppPort, *, session_id: str, db: str | None = None) -> dict[str, Any]:
    """A session's compaction checkpoints and their summaries, oldest first.

    OpenCode compacts a session (by request, or on its own near the model's context
    limit) by adding a user message with a ``compaction`` part and then an assistant
    message with ``summary: true`` holding the summary; the rows before it stay. In v2
    storage one ``compaction`` row is both the request and the summary: its id is
    ``request_message_id`` and, once its summary is written, ``summary_message_id``;
    ``auto`` is its ``reason`` being ``auto``.

    Args:
        session_id: the session's id (``ses_…``).
        db: an OpenCode database path instead of the configured/discovered ones.

    Returns:
        ``{session: session_info, compactions: [{request_message_id, time, auto,
        overflow, summary_message_id, summary_time, summary, truncated}]}``: ``auto`` is
        true for an automatic compaction, ``overflow`` as OpenCode recorded it (or
        ``null``); the summary fields are ``null`` while the summary is not written yet.
        Summaries are redacted and cut to :data:`SUMMARY_TEXT_CHARS`; at most
        :data:`MAX_COMPACTIONS` checkpoints.

    Raises:
        RequestError: no session id.
        NotFoundError: no database holds that session.
        SourceError: no OpenCode database can be read.
    """
    sid = _text("session_id", session_id, "a session id such as ses_… (history sessions)")
    with _databases(app, db) as dbs:
        source, row = _find_session(dbs, sid)
        storage = source.storage_for(sid)
        points = storage.compactions(source, sid, limit=MAX_COMPACTIONS)
        active = queries.last_activity(source, row)
        known = session_secrets(source, sid, row.title)
    out = []
    for p in points:
        item: dict[str, Any] = {
            "request_message_id": p.request_id, "time": _iso(p.request_time),
            "auto": bool(p.part.get("auto")), "overflow": p.part.get("overflow"),
            "summary_message_id": None, "summary_time": None, "summary": None,
            "truncated": False}
        if p.summary is not None:
            text = storage.render(p.summary, tool_output_chars=TOOL_OUTPUT_CHARS).text
            item["summary"], item["truncated"] = _clean(text, SUMMARY_TEXT_CHARS, known)
            item["summary_message_id"] = p.summary.id
            item["summary_time"] = _iso(p.summary.time_created)
        out.append(item)
    return {"session": session_info(row, active, known), "compactions": out}
