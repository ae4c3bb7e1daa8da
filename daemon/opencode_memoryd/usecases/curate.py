"""Memories by hand: ``add`` a fact (deduplicated like every extracted one), ``forget``
one (a tombstone, never a hard delete) and ``restore`` a forgotten one; by the user, or by
the agent within :mod:`~opencode_memoryd.usecases.agent_limits`."""

from __future__ import annotations

from typing import Any

import structlog

from opencode_memoryd.capture.supersede import supersede
from opencode_memoryd.capture.writer import write_memory
from opencode_memoryd.errors import NotFoundError, RefusedError, RequestError
from opencode_memoryd.extract.slots import slot_change
from opencode_memoryd.extract.supersede import replaced_terms
from opencode_memoryd.models import FACT_TYPES, SCOPES, Memory
from opencode_memoryd.redaction.engine import scrub
from opencode_memoryd.state.db import StateDB
from opencode_memoryd.store.api import MemoryStore
from opencode_memoryd.usecases.agent_limits import AgentCall, refuse_agent_text
from opencode_memoryd.usecases.ids import resolve_id
from opencode_memoryd.usecases.maintain import LockFor, journal_record, no_lock
from opencode_memoryd.usecases.ports import AppPort
from opencode_memoryd.usecases.projects import (
    DirProjects,
    dir_within,
    resolve_dir,
    store_projects,
)

log = structlog.get_logger(__name__)

#: ``retired_reason`` of a memory retired by :func:`forget_memory`.
FORGOTTEN = "forgotten"


def check_text(app: AppPort, content: object, verb: str = "add"
               ) -> tuple[str, dict[str, int]]:
    """The content with whitespace collapsed and secrets redacted, and the redaction
    counts by kind; ``verb`` starts the error messages.

    Raises:
        RequestError: not a string, empty, or longer than ``extraction.max_memory_chars``.
    """
    if not isinstance(content, str):
        raise RequestError(f"{verb}: `content` must be a string: the fact to remember")
    text = " ".join(content.split())
    if not text:
        raise RequestError(f"{verb}: `content` is empty; give the fact to remember in one "
                           "or two sentences")
    red = scrub(text)
    most = app.config.extraction.max_memory_chars
    if len(red.text) > most:
        raise RequestError(f"{verb}: `content` is {len(red.text)} characters long; the most "
                           f"is {most} (extraction.max_memory_chars): split it into "
                           "separate facts")
    return red.text, dict(red.counts)


def _one_project(found: DirProjects) -> tuple[str, str | None]:
    """The single project a folder is in: the only one found, else the one whose root
    is the folder or its nearest parent.

    Raises:
        NotFoundError: no project.
        RequestError: several projects and none (or more than one) contains the folder.
    """
    d = found.directory
    if not found.projects:
        known = ("; the store has memories for: " + ", ".join(found.store_roots)
                 if found.store_roots else "")
        raise NotFoundError(
            f"add: no project found for {d}: no OpenCode session ran there and no stored "
            f"memory belongs to it or a parent folder{known}. Run OpenCode there once (or "
            "pass the project's folder), or add it to the user scope instead")
    if len(found.projects) == 1:
        key, root = next(iter(found.projects.items()))
        return key, root
    containing = sorted(((len(r), k, r) for k, r in found.projects.items()
                         if r and dir_within(d, r)), reverse=True)
    if containing and (len(containing) == 1 or containing[0][0] > containing[1][0]):
        return containing[0][1], containing[0][2]
    roots = ", ".join(sorted(r or k for k, r in found.projects.items()))
    raise RequestError(f"add: {d} holds sessions of {len(found.projects)} projects "
                       f"({roots}); give the folder of one of them")


def add_memory(app: AppPort, store: MemoryStore, *, content: object, type_: object,
               scope: object, directory: str | None = None, db: str | None = None,
               project: str | None = None, lock_for: LockFor = no_lock,
               agent: bool = False, state: StateDB | None = None) -> dict[str, Any]:
    """Store a manual memory (``source`` ``manual``), deduplicated like extracted ones.

    The user's (``provenance`` ``user``), or with ``agent`` the agent's (``provenance``
    ``agent``): its text must not read as an instruction
    (:func:`~opencode_memoryd.usecases.agent_limits.refuse_agent_text`), its project comes
    from ``directory`` only, and a user-scope note is kept *pending* (in no context block)
    until the user confirms it. The same fact already held by the user stays theirs.

    The content is whitespace-collapsed and redacted (a secret becomes a
    ``[REDACTED:<kind>]`` placeholder: no secret is ever stored), then written with
    :func:`~opencode_memoryd.capture.writer.write_memory` under the scope's lock: the same
    fact (same normalised text, type and scope) or a near-identical one that says all it
    says is not stored twice. A ``user``-scope memory belongs to ``app.user_id``.

    The user's fact that says it replaces a term ("use uv instead of Poetry") then retires
    the older active facts of its scope that state that term, as capture does
    (:func:`~opencode_memoryd.capture.supersede.supersede`: recorded in ``state``,
    journaled, undone by ``dream --undo``). The agent's never retires anything: its notes
    are not the user's word.

    Args:
        content: the fact, one or two sentences.
        type_: ``user``, ``feedback``, ``project`` or ``reference``.
        scope: ``project`` (``directory`` names the project's folder) or ``user``
            (``directory`` is ignored).
        directory: a folder of the project (resolved by
            :func:`~opencode_memoryd.usecases.projects.resolve_dir`).
        db: ``--db PATH`` used to resolve ``directory``.
        project: instead of ``directory``, the key of a project the store holds memories
            of (its most used root becomes the memory's ``project_root``).

    Returns:
        ``{"memory": payload, "status": "added" | "pending" | "duplicate", "redactions":
        {kind: n}, "superseded": [id, …]}``; for ``duplicate`` the payload is the memory
        already holding the fact (its id); ``pending``: the agent's user-scope note,
        awaiting the user; ``superseded``: the ids the fact retired.

    Raises:
        RequestError: content not a non-empty string or too long, an unknown type or scope,
            a project scope without ``directory``, a folder of several projects, or the
            agent naming a ``project`` key.
        RefusedError: the agent's text reads as an instruction (nothing was written).
        NotFoundError: no project found for ``directory``, or no memory of ``project``.
    """
    if type_ not in FACT_TYPES:
        raise RequestError(f"add: unknown type {type_!r}; use one of {', '.join(FACT_TYPES)}")
    if scope not in SCOPES:
        raise RequestError(f"add: unknown scope {scope!r}; use `project` (with the project's "
                           "folder) or `user`")
    text, redactions = check_text(app, content)
    if agent:
        refuse_agent_text(text, "add")
        if project:
            raise RequestError("add: the agent adds to its session's project only (by "
                               "`directory`), never to another project by key")
    key: str | None = None
    root: str | None = None
    if scope == "project" and project:
        roots = store_projects(store).get(project)
        if roots is None:
            raise NotFoundError(f"add: the store holds no memory of project {project!r}")
        key, root = project, (roots[0] if roots else None)
    elif scope == "project":
        if not directory:
            raise RequestError("add: scope `project` needs `directory`, the project's folder "
                               "(or use scope `user`)")
        key, root = _one_project(resolve_dir(app, store, directory, db))
    pending = agent and scope == "user"
    candidate = {"content": text, "type": type_, "scope": scope, "message_ids": [],
                 "source": "manual", "provenance": "agent" if agent else "user",
                 "pending": pending}
    with lock_for(key or "user"):
        outcome = write_memory(
            store, candidate, session_id=None, project_key=key, project_root=root,
            message_times={}, now=app.clock(),
            near_duplicate_similarity=app.config.dedup.near_duplicate_similarity,
            user_id=app.user_id)
        retired: list[str] = []
        terms = replaced_terms(text)
        if ((terms or slot_change(text)) and state is not None and not agent
                and outcome.memory.is_active):
            retired = supersede(store, state, outcome.memory, terms, text, now=app.clock(),
                                record=journal_record(app))
    status = ("duplicate" if not outcome.added
              else "pending" if outcome.memory.pending else "added")
    log.info("memory_added", id=outcome.memory.id, status=status, type=type_, scope=scope,
             project=key, redactions=sum(redactions.values()),
             provenance=outcome.memory.provenance)
    return {"memory": outcome.memory.to_payload(), "status": status,
            "redactions": redactions, "superseded": retired}


def visible(app: AppPort, store: MemoryStore, memory_id: object, verb: str = "forget"
            ) -> Memory:
    """The memory ``memory_id`` (tombstones too) as this user may see it (a user-scope
    memory of another identity is not); ``verb`` starts the error message.

    Raises:
        RequestError: ``memory_id`` is not a non-empty string, or an ambiguous or too
            short prefix (:func:`~opencode_memoryd.usecases.ids.resolve_id`).
        NotFoundError: no such memory for this user.
    """
    if not isinstance(memory_id, str) or not memory_id:
        raise RequestError(f"{verb}: `memory_id` must be a memory id, as `list` shows it")
    found = store.get([resolve_id(store, memory_id, app.user_id)])
    if not found or (found[0].scope == "user"
                     and found[0].user_id not in (None, app.user_id)):
        raise NotFoundError(f"no memory with id {memory_id}; `list` or `search` shows the "
                            "ids")
    return found[0]


def forget_memory(app: AppPort, store: MemoryStore, memory_id: object, *,
                  lock_for: LockFor = no_lock, agent: AgentCall | None = None
                  ) -> dict[str, Any]:
    """Retire a memory: a tombstone (``status`` ``retired``, ``retired_reason``
    ``forgotten``), never a hard delete. It leaves search, ``list`` and the context block,
    stays visible with ``list --all`` and ``show``, and comes back if the same fact is
    added or extracted again. Done under the scope's lock.

    With ``agent``: only the agent's own memory of its session's project, within its
    forget rate limit (:class:`~opencode_memoryd.usecases.agent_limits.AgentCall`).

    Returns:
        ``{"memory": the tombstone's payload, "status": "forgotten"}``.

    Raises:
        RequestError: ``memory_id`` is not a non-empty string.
        NotFoundError: no such memory (or another user's), or it is already retired;
            nothing was changed.
        RefusedError: the agent may not forget it, or reached its limit; nothing was
            changed.
    """
    m = visible(app, store, memory_id)
    with lock_for(m.project_id if m.scope == "project" and m.project_id else "user"):
        m = visible(app, store, memory_id)  # again, under the lock
        if agent is not None:
            agent.check_may_change(m, "forget")
        if not m.is_active:
            why = f" ({m.retired_reason})" if m.retired_reason else ""
            raise NotFoundError(f"memory {m.id} is already retired{why}; `list --all` "
                                "shows it")
        if agent is not None:
            agent.spend_forget(m.id)
        m.status, m.retired_reason = "retired", FORGOTTEN
        m.superseded_by = m.retired_by_run = None
        m.updated_at = app.clock()
        store.upsert([m])
    log.info("memory_forgotten", id=m.id, scope=m.scope, project=m.project_id)
    return {"memory": m.to_payload(), "status": "forgotten"}


def scope_lock_key(m: Memory) -> str:
    """The lock of a memory's scope: its project key, or ``user``."""
    return m.project_id if m.scope == "project" and m.project_id else "user"


def restore_memory(app: AppPort, store: MemoryStore, memory_id: object, *,
                   lock_for: LockFor = no_lock, agent: AgentCall | None = None
                   ) -> dict[str, Any]:
    """Bring a forgotten memory back: ``status`` ``active`` again, ``retired_reason``
    cleared, ``updated_at`` now. Done under the scope's lock.

    A memory a dream retired (merged, superseded, a duplicate) is not restored here: its
    fact lives on in the memory that replaced it, and undoing that dream brings it back.

    Returns:
        ``{"memory": payload, "status": "restored"}``.

    Raises:
        RequestError: ``memory_id`` is not a non-empty string.
        NotFoundError: no such memory (or another user's).
        RefusedError: it is active, or a dream retired it (the message names the run to
            undo), or ``agent`` may not change it; nothing was changed.
    """
    m = visible(app, store, memory_id, "restore")
    with lock_for(scope_lock_key(m)):
        m = visible(app, store, memory_id, "restore")
        if agent is not None:
            agent.check_may_change(m, "restore")
        if m.is_active:
            raise RefusedError(f"restore: memory {m.id} is active; only a forgotten memory "
                               "can be restored")
        if m.retired_reason != FORGOTTEN:
            run = f" `dream --undo {m.retired_by_run}`" if m.retired_by_run else " its dream"
            raise RefusedError(f"restore: memory {m.id} was retired by a dream "
                               f"({m.retired_reason}); undo{run} to bring it back")
        m.status, m.retired_reason = "active", None
        m.updated_at = app.clock()
        store.upsert([m])
    log.info("memory_restored", id=m.id, scope=m.scope, project=m.project_id)
    return {"memory": m.to_payload(), "status": "restored"}
