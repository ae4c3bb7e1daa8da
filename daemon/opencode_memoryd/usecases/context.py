"""The context block: the memories an OpenCode session starts with.

One Markdown block per session, asked for once by the OpenCode plugin (which then sends the
identical text with every model request of the session, so the provider's prompt cache
stays valid), by ``opencode-memoryd context`` and by the MCP server.

Shape (sections in this fixed order; empty ones left out)::

    <!-- opencode-memoryd context -->
    ## Memory from past sessions
    <one framing line: quoted notes that may be out of date, never instructions>

    ### Project brief
    ### Architecture and tech
    ### Conventions and feedback
    ### Progress and last session
    ### User preferences
    ### References
    ### Relevant to the task
    ### Noted by the agent (unconfirmed)

    - 2026-11-20: "<memory text, quoted>" (may be out of date: "<X>" changed on ...)
    <!-- opencode-memoryd context end <hash of the lines between> -->

The date of an entry is when the user said it (``Memory.said``: the time of the message it
comes from, UTC), not when it was stored or last changed.

Memory text is quoted data inside a fence (:mod:`opencode_memoryd.usecases.fence`): it
cannot end the notes, open or close a tag, fake the marker, a header or the closing line,
or add a line. The agent's own notes (``provenance`` ``agent``) are shown apart, last, and
spent last; a pending note (the agent's user-scope note the user has not confirmed) is in
no block.

Each memory is shown in its own section (``Memory.section``, chosen when it was written;
:func:`section_of`), a correction (a memory that superseded another) among the conventions
(:mod:`~opencode_memoryd.usecases.block_pool`). Of a project's session summaries only the
newest is a candidate: it is where the last session stopped (older ones can still come up
as relevant to the task).

Selection: the entries are chosen most important first (:data:`PRIORITY`: conventions and
feedback, then user preferences, the brief, progress, architecture and references; inside
each, said last first: ``said_at``, else ``updated_at``), until ``[context] max_entries``
entries or ``max_chars`` characters are used. Search hits for the query (the session's
first user message) come first, at most ``relevant_entries`` of them (the agent's notes
never), because they are about the task at hand. The same store, scope and query always
give the same bytes (ties are broken by memory id). An empty selection gives an empty
string, with no header; so does a sub-agent session (its parent already has the block) and
a directory with no known project.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from opencode_memoryd.config.paths import normalize_dir
from opencode_memoryd.conversation.transcript import human_text, strip_cli_quotes
from opencode_memoryd.errors import SourceError
from opencode_memoryd.models import Memory
from opencode_memoryd.store.api import MemoryFilter, MemoryStore
from opencode_memoryd.usecases.block_pool import PRIORITY as PRIORITY
from opencode_memoryd.usecases.block_pool import SECTIONS as SECTIONS
from opencode_memoryd.usecases.block_pool import Entry as Entry
from opencode_memoryd.usecases.block_pool import ScrollCache as ScrollCache
from opencode_memoryd.usecases.block_pool import agents_notes as agents_notes
from opencode_memoryd.usecases.block_pool import candidate_pool as candidate_pool
from opencode_memoryd.usecases.block_pool import line_of
from opencode_memoryd.usecases.block_pool import newest_summaries_only as newest_summaries_only
from opencode_memoryd.usecases.block_pool import ordered_pool as ordered_pool
from opencode_memoryd.usecases.block_pool import section_of as section_of
from opencode_memoryd.usecases.fence import FENCE_CHARS, seal
from opencode_memoryd.usecases.fence import FRAMING as FRAMING
from opencode_memoryd.usecases.fence import HEADER as HEADER
from opencode_memoryd.usecases.fence import MARKER as MARKER
from opencode_memoryd.usecases.ports import AppPort
from opencode_memoryd.usecases.projects import project_keys_for_dir, resolve_dir
from opencode_memoryd.usecases.relevance import task_hits

if TYPE_CHECKING:
    from opencode_memoryd.source.reader import OpenCodeDB

#: Messages read from the start of a session to find its first user message.
FIRST_READ = 20
#: The longest query searched for "Relevant to the task", in characters.
MAX_QUERY_CHARS = 2000


@dataclass(frozen=True)
class ContextBlock:
    """A rendered context block.

    Attributes:
        text: the Markdown block, or ``""`` when there is nothing to give.
        entries: memory ids in the order shown, per section key.
        project_keys: the project scopes the block was drawn from.
        reason: why the block is empty (``None`` when it is not).
    """

    text: str
    entries: dict[str, list[str]]
    project_keys: list[str]
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form: ``{"text", "chars", "entries": n, "sections": {key: [ids]},
        "project_keys", "reason"}``."""
        return {"text": self.text, "chars": len(self.text),
                "entries": sum(len(v) for v in self.entries.values()),
                "sections": self.entries, "project_keys": self.project_keys,
                "reason": self.reason}


def select(candidates: Sequence[Memory], relevant: Sequence[Memory], *, max_chars: int,
           max_entries: int, pool: Sequence[Entry] | None = None) -> dict[str, list[Memory]]:
    """Spend the budget: relevant hits first, then :data:`PRIORITY` order, newest first.

    Args:
        candidates: the active memories of the scope (any order); ignored when ``pool``
            is given.
        relevant: search hits for the query, best first (already capped); the agent's
            notes and pending notes among them are left out (the agent's come with their
            section, last).
        max_chars: the block's budget in characters, headers included.
        max_entries: the most entries.
        pool: :func:`ordered_pool` of the candidates, when already made.

    Returns:
        Section key -> the chosen memories, in the order they are shown.
    """
    chosen: dict[str, list[Memory]] = {key: [] for key, _ in SECTIONS}
    used = FENCE_CHARS
    count = 0
    seen: set[str] = set()
    ordered = ordered_pool(candidates) if pool is None else pool
    queue = itertools.chain((("relevant", m, line_of(m)) for m in relevant
                             if not m.pending and m.provenance != "agent"), ordered)
    for key, m, line in queue:
        if count >= max_entries:
            break
        if m.id in seen:
            continue
        cost = len(line) + 1 + (0 if chosen[key] else len(_title(key)) + 2)
        if used + cost > max_chars:
            continue  # a shorter one further on may still fit
        chosen[key].append(m)
        seen.add(m.id)
        used += cost
        count += 1
    return chosen


def _title(key: str) -> str:
    return "### " + dict(SECTIONS)[key]


def render(chosen: dict[str, list[Memory]]) -> str:
    """The Markdown block for :func:`select`'s choice; ``""`` when it chose nothing."""
    if not any(chosen.values()):
        return ""
    lines = [HEADER, FRAMING]
    for key, _ in SECTIONS:
        if chosen.get(key):
            lines += ["", _title(key)]
            lines += [line_of(m) for m in chosen[key]]
    return seal(lines)


@dataclass(frozen=True)
class SessionFacts:
    """What OpenCode's database says about a session: whether it is a sub-agent, and the
    human text of its first user message (``""`` when unknown)."""

    is_subagent: bool = False
    first_message: str = ""


def read_session_facts(dbs: Iterable[OpenCodeDB], session_id: str) -> SessionFacts:
    """Look ``session_id`` up in the open databases ``dbs`` (unknown: the defaults; a
    database that fails to answer is skipped)."""
    for db in dbs:
        try:
            row = db.session(session_id)
            if row is None:
                continue
            if row.is_subagent:
                return SessionFacts(is_subagent=True)
            first = next((m for m in db.messages_after(session_id, None, limit=FIRST_READ)
                          if m.role == "user"), None)
        except SourceError:
            continue
        text = human_text(first) if first else ""
        return SessionFacts(first_message=text[:MAX_QUERY_CHARS])
    return SessionFacts()


def _session_facts(app: AppPort, session_id: str) -> SessionFacts:
    """Look ``session_id`` up in OpenCode's databases, opened for this look-up."""
    try:
        paths = app.database_paths()
    except SourceError:
        return SessionFacts()
    with ExitStack() as stack:
        dbs = []
        for path in paths:
            try:
                dbs.append(stack.enter_context(app.open_source(path)))
            except SourceError:
                continue
        return read_session_facts(dbs, session_id)


def project_keys(app: AppPort, store: MemoryStore, directory: str | None,
                 project: str | None, *,
                 keys_of_dir: Callable[[str], set[str]] | None = None) -> list[str]:
    """The project scopes of a session: from OpenCode's sessions in ``directory``, else the
    OpenCode project id the plugin passed (not ``global``, which is no project), else the
    store's own project roots containing ``directory``. ``keys_of_dir`` gives a normalised
    folder's OpenCode project keys (default: the databases opened for this look-up)."""
    keys: set[str] = set()
    if directory:
        folder = normalize_dir(directory)
        keys = (keys_of_dir(folder) if keys_of_dir is not None
                else project_keys_for_dir(app, folder))
    if not keys and project and project != "global":
        keys = {project}
    if not keys and directory:
        keys = set(resolve_dir(app, store, directory).projects)
    return sorted(keys)


def build_context(app: AppPort, store: MemoryStore, *, directory: str | None = None,
                  project: str | None = None, session: str | None = None,
                  query: str | None = None, user_filter: MemoryFilter | None = None,
                  scroll: Callable[[MemoryFilter], Sequence[Memory]] | None = None,
                  facts_of: Callable[[str], SessionFacts] | None = None,
                  keys_of_dir: Callable[[str], set[str]] | None = None) -> ContextBlock:
    """The context block of a session.

    Args:
        directory: the session's folder (OpenCode's ``directory``).
        project: OpenCode's project id, used when no session of ``directory`` is known yet.
        session: the session id; a sub-agent session gets an empty block.
        query: the task, for "Relevant to the task". When OpenCode's database knows
            ``session``, the human text of its first user message is used instead, so
            every process that asks for the session's block (``opencode run --session``
            starts a new one, whose plugin first sees a later message) gets the same bytes.
        user_filter: the user-scope memories to include (default: this user's).
        scroll: reads a filter's memories (default ``store.scroll``; the daemon passes a
            :class:`ScrollCache`).
        facts_of: a session's :class:`SessionFacts` (default: read from the databases,
            opened for this call); the daemon keeps them
            (:class:`~opencode_memoryd.usecases.context_cache.ContextCache`).
        keys_of_dir: a normalised folder's OpenCode project keys (see
            :func:`project_keys`).

    Returns:
        The block (``text`` ``""`` with a ``reason`` when there is nothing to give).
    """
    if not session:
        facts = SessionFacts()
    else:
        facts = facts_of(session) if facts_of is not None else _session_facts(app, session)
    if facts.is_subagent:
        return ContextBlock("", {}, [], "sub-agent session")
    # the plugin's text of the first message, asked before OpenCode saves it, is read as
    # OpenCode's database gives it later, so the session's later requests get the same block
    query = facts.first_message or (strip_cli_quotes(query) if query else query)
    keys = project_keys(app, store, directory, project, keys_of_dir=keys_of_dir)
    cfg = app.config.context
    user_flt = user_filter or MemoryFilter(scope="user", user_id=app.user_id)
    flts = [MemoryFilter(project_id=k, include_user_scope=False) for k in keys] + [user_flt]
    pool_of = getattr(scroll, "pool", None)
    pool = (pool_of(flts) if callable(pool_of)
            else candidate_pool(scroll or store.scroll, flts))
    if not pool:
        return ContextBlock("", {}, keys, "no memories for this project or user")
    relevant: list[Memory] = []
    if query and query.strip() and cfg.relevant_entries:
        # what the block shows without a task: the task's places go to other hits
        shown = {m.id for ms in select((), (), max_chars=cfg.max_chars,
                                       max_entries=cfg.max_entries, pool=pool).values()
                 for m in ms}
        # enough hits that the user's best are found however many notes the agent wrote,
        # and past those the block shows anyway
        limit = (cfg.relevant_entries + len(shown)
                 + agents_notes(pool, scroll or store.scroll, user_flt))
        relevant = task_hits(store, flts, query.strip()[:MAX_QUERY_CHARS], limit=limit,
                             exclude=shown, entries=cfg.relevant_entries)
    chosen = select((), relevant, max_chars=cfg.max_chars, max_entries=cfg.max_entries,
                    pool=pool)
    text = render(chosen)
    return ContextBlock(text, {k: [m.id for m in v] for k, v in chosen.items() if v}, keys,
                        None if text else "nothing fits the budget")
