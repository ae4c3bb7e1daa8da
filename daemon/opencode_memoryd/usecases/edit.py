"""Editing a memory by hand: new content or a new type, the old version kept, the edit
journaled.

An edit rewrites the memory in place (same id, same provenance: sessions, messages,
source, creation time, lineage) and re-embeds it through the store, so search finds it
under its new text at once. The version it replaces is appended to the memory's
``history``, and the edit is written to the dream journal as an ``action`` ``edit`` entry,
so ``journal`` and ``show`` list it beside the dreams that touched the memory. The entry
is written before the memory (write-ahead): a crash between the two leaves an entry whose
edit is not in the memory's ``history``, which :func:`recover_edits` journals again as
``failed`` (the edit was not applied; the request that made it got no answer).
"""

from __future__ import annotations

import os
import signal
import uuid
from typing import Any

import structlog

from opencode_memoryd.dream.apply import FAULT_ENV
from opencode_memoryd.dream.journal import DreamJournal
from opencode_memoryd.errors import RefusedError, RequestError
from opencode_memoryd.extract.sections import section_for
from opencode_memoryd.models import FACT_TYPES, Memory, content_hash, iso_utc
from opencode_memoryd.store.api import MemoryStore
from opencode_memoryd.usecases.agent_limits import AgentCall, refuse_agent_text
from opencode_memoryd.usecases.curate import check_text, scope_lock_key, visible
from opencode_memoryd.usecases.maintain import LockFor, no_lock
from opencode_memoryd.usecases.ports import AppPort

log = structlog.get_logger(__name__)

#: ``action`` of a manual edit's journal entry (dreams are ``dream``, undos ``undo``).
EDIT_ACTION = "edit"
#: Characters of each text a journal operation quotes (as a dream's operations do).
QUOTE_CHARS = 80
#: Crash tests: die after the journal entry, before the memory is written.
FAULT_EDIT_JOURNALED = "edit_journaled"
#: Newest journal entries :func:`recover_edits` looks at.
RECOVER_ENTRIES = 200


def _fault_point(name: str) -> None:
    """Die here, as by ``kill -9``, when ``OPENCODE_MEMORYD_FAULT`` names this point."""
    if os.environ.get(FAULT_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)


def _quote(text: str) -> str:
    return text if len(text) <= QUOTE_CHARS else text[: QUOTE_CHARS - 1] + "…"


def _new_type(m: Memory, content: object, type_: object) -> str | None:
    """The new type (``None``: unchanged) after checking; the content is checked by the
    caller.

    Raises:
        RequestError: neither given, an unknown type, or a type change of a memory
            opencode-memoryd wrote itself (a brief or a session summary).
    """
    if content is None and type_ is None:
        raise RequestError("edit: give `content`, `type` or both")
    if type_ is None or type_ == m.type:
        return None
    if type_ not in FACT_TYPES:
        raise RequestError(f"edit: unknown type {type_!r}; use one of {', '.join(FACT_TYPES)}")
    if m.type not in FACT_TYPES:
        raise RequestError(f"edit: memory {m.id} is a {m.type}; its type cannot change")
    return str(type_)


def edit_memory(app: AppPort, store: MemoryStore, journal: DreamJournal, memory_id: object,
                *, content: object = None, type_: object = None,
                lock_for: LockFor = no_lock, agent: AgentCall | None = None
                ) -> dict[str, Any]:
    """Change an active memory's content, type, or both.

    An edit by the user makes the memory theirs (``provenance`` ``user``), except a pending
    note: it stays the agent's and pending until confirmed. With ``agent``: only the
    agent's own memory of its session's project, and never with text that reads as an
    instruction (:mod:`~opencode_memoryd.usecases.agent_limits`); it stays the agent's.

    The content is whitespace-collapsed and redacted like ``add``'s. The old content and
    type go to the memory's ``history`` (``{"content", "type", "edited_at", "run_id"}``);
    ``content_hash``, ``section`` and ``updated_at`` follow the new version (a new text
    drops the ``stale`` marks of the old one until the next dream); the memory is
    re-embedded by :meth:`~opencode_memoryd.store.api.MemoryStore.upsert`. Done under the
    scope's lock. An edit that changes nothing writes nothing.

    Args:
        memory_id: the memory's id.
        content: the new fact, one or two sentences, or ``None`` to keep it.
        type_: the new type (``user``, ``feedback``, ``project``, ``reference``), or
            ``None`` to keep it.

    Returns:
        ``{"memory": payload, "status": "edited" | "unchanged", "run_id": the journal
        entry's id | None, "redactions": {kind: n}}``.

    Raises:
        RequestError: nothing to change, bad content, an unknown type.
        NotFoundError: no such memory (or another user's).
        RefusedError: the memory is retired (restore it, or undo its dream, first), or
            the agent may not change it or write that text.
    """
    m = visible(app, store, memory_id, "edit")
    text, redactions = (check_text(app, content, "edit") if content is not None
                        else (m.content, {}))
    if agent is not None:
        refuse_agent_text(text, "edit")
    with lock_for(scope_lock_key(m)):
        m = visible(app, store, memory_id, "edit")  # again, under the lock
        if agent is not None:
            agent.check_may_change(m, "edit")
        if not m.is_active:
            raise RefusedError(f"edit: memory {m.id} is retired ({m.retired_reason}); "
                               "restore it first")
        new_type = _new_type(m, content, type_)
        if text == m.content and new_type is None:
            return {"memory": m.to_payload(), "status": "unchanged", "run_id": None,
                    "redactions": redactions}
        started = app.clock()
        run_id = f"edit-{uuid.uuid4().hex[:12]}"
        old_content, old_type = m.content, m.type
        m.history = [*m.history, {"content": old_content, "type": old_type,
                                  "edited_at": iso_utc(started), "run_id": run_id}]
        if text != m.content:
            m.stale = []  # the next dream judges the new text against the worktree
        m.content, m.content_hash = text, content_hash(text)
        if new_type is not None:
            m.type = new_type  # type: ignore[assignment]
        m.section = section_for(m.type, m.scope, text) if m.type in FACT_TYPES else m.section
        m.updated_at = started
        # a pending note stays the agent's until the user confirms it
        m.provenance = "agent" if agent is not None or m.pending else "user"
        # write-ahead: an edit a crash interrupts is journaled, never applied unjournaled
        journal.append(edit_entry(m, run_id=run_id, old_content=old_content,
                                  old_type=old_type, at=iso_utc(started)))
        _fault_point(FAULT_EDIT_JOURNALED)
        store.upsert([m])
    log.info("memory_edited", id=m.id, run_id=run_id, type=m.type, scope=m.scope,
             project=m.project_id, redactions=sum(redactions.values()))
    return {"memory": m.to_payload(), "status": "edited", "run_id": run_id,
            "redactions": redactions}


def edit_entry(m: Memory, *, run_id: str, old_content: str, old_type: str, at: str
               ) -> dict[str, Any]:
    """The dream-journal entry of a manual edit of ``m`` (already changed): the keys of a
    dream's entry, ``action`` ``edit``, ``trigger`` ``manual``, one ``edit`` operation
    quoting the old and the new text."""
    changed = [k for k, old, new in (("content", old_content, m.content),
                                     ("type", old_type, m.type)) if old != new]
    return {
        "run_id": run_id, "action": EDIT_ACTION, "trigger": "manual", "dry_run": False,
        "scope": m.scope, "project_key": m.project_id, "project_root": m.project_root,
        "status": "ok", "reason": "manual edit: " + " and ".join(changed),
        "started_at": at, "ended_at": at, "counts": {"edited": 1},
        "operations": [{"op": "edit", "memory_ids": [m.id], "superseded_ids": [],
                        "new_id": m.id, "texts": [_quote(old_content)],
                        "new_text": _quote(m.content), "old_type": old_type,
                        "new_type": m.type, "reason": "manual edit",
                        "provenance": m.provenance}],
        "rejected": [], "model": None, "tokens_in": 0, "tokens_out": 0,
        "duration_ms": 0.0, "mode": "manual",
    }


def recover_edits(store: MemoryStore, journal: DreamJournal) -> list[str]:
    """Journal as ``failed`` the edits a crash interrupted between their journal entry and
    the memory's write: an ``ok`` edit entry (among the newest :data:`RECOVER_ENTRIES`)
    whose memory's ``history`` does not hold its ``run_id``.

    Returns:
        The run ids journaled as failed (oldest first).
    """
    seen: set[str] = set()
    failed: list[str] = []
    for entry in journal.entries(limit=RECOVER_ENTRIES):  # newest first
        run_id = str(entry.get("run_id"))
        if run_id in seen or entry.get("action") != EDIT_ACTION:
            continue
        seen.add(run_id)
        ops = entry.get("operations") or [{}]
        memory_id = (ops[0].get("memory_ids") or [None])[0]
        if entry.get("status") != "ok" or not memory_id:
            continue
        found = store.get([str(memory_id)])
        if found and any(h.get("run_id") == run_id for h in found[0].history):
            continue
        journal.append({**entry, "status": "failed",
                        "reason": "interrupted before it was applied: the memory is unchanged"})
        log.warning("edit_not_applied", run_id=run_id, id=memory_id)
        failed.append(run_id)
    failed.reverse()
    return failed
