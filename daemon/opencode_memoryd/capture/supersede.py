"""Supersession at write time: a correction retires the memories it replaces.

When a memory just written says it replaces a term (``replaces`` of its candidate: the
extractor's terms, grounded in the user's words, see
:mod:`opencode_memoryd.extract.supersede`), every older active fact of the same scope that
states that term as its choice (:func:`~opencode_memoryd.extract.supersede.states_use`) is
retired: ``status`` ``retired``, ``superseded_by`` the correction's id, ``retired_reason``
``superseded: <the user's words>``. Nothing is deleted.

The change is recorded as a run of the state file's ``dream_runs`` (trigger ``supersede``,
the payloads before and after, ``applying`` before the store is written, then
``applied``), exactly as a dream applies, so crash recovery rolls it forward and
``dream --undo RUN`` restores the retired facts; its entry (``action`` ``supersede``) is
appended to the dream journal through ``record``, so ``journal`` and the page list it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import structlog

from opencode_memoryd.extract.facts import fold
from opencode_memoryd.extract.slots import slot_change, slot_value
from opencode_memoryd.extract.supersede import mentions, same_subject, states_use
from opencode_memoryd.models import FACT_TYPES, Memory, iso_utc, scope_key
from opencode_memoryd.state.db import StateDB
from opencode_memoryd.store.api import MemoryFilter, MemoryStore

log = structlog.get_logger(__name__)

#: ``trigger`` and ``action`` of a write-time supersession's run and journal entry.
SUPERSEDE = "supersede"
#: Longest quote of the user's words in ``retired_reason``.
MAX_CUE_CHARS = 200

Record = Callable[[dict[str, Any]], None]


def _quote(text: str, most: int = MAX_CUE_CHARS) -> str:
    """``text`` with whitespace folded, cut to ``most`` characters (the last one ``…``)."""
    text = " ".join(text.split())
    return text if len(text) <= most else text[: most - 1] + "…"


def superseded(store: MemoryStore, new: Memory, terms: Sequence[str], *,
               said_as: str | None = None) -> list[Memory]:
    """The active facts of ``new``'s scope that ``new`` replaces: each states one of
    ``terms`` as its choice (:func:`~opencode_memoryd.extract.supersede.states_use`) and
    names the subject ``new`` names (:func:`~opencode_memoryd.extract.supersede.
    same_subject`), was created no later than ``new`` and is not ``new``, oldest first.

    Briefs and session summaries are never superseded. Empty when ``terms`` is and
    ``new`` changes no value slot (:func:`replaced_by`).
    """
    if new.type not in FACT_TYPES:
        return []
    return replaced_by(store, new.content, terms, scope=new.scope, project_id=new.project_id,
                       user_id=new.user_id, said=new.created_at, own_id=new.id,
                       said_as=said_as)


def replaced_by(store: MemoryStore, content: str, terms: Sequence[str], *, scope: str,
                project_id: str | None, user_id: str | None, said: datetime,
                own_id: str | None = None, said_as: str | None = None) -> list[Memory]:
    """The active facts a text ``content`` of ``scope`` would replace (the rule of
    :func:`superseded`, for a memory not written yet): each states one of ``terms`` as
    its choice, names the subject ``content`` names, was created no later than ``said``
    (an aware datetime) and is not ``own_id``; or ``content`` gives a value slot a new
    value the fact gives another (:func:`~opencode_memoryd.extract.slots.slot_change`:
    "The staging URL is now …"), read in ``said_as`` when given (the user's words a
    model's memory was drawn from; ``""``: no value change). Oldest first; empty when
    ``terms`` is and no value changes."""
    change = slot_change(content if said_as is None else said_as)
    if not terms and change is None:
        return []
    flt = (MemoryFilter(scope="user", user_id=user_id, types=FACT_TYPES)
           if scope == "user"
           else MemoryFilter(project_id=project_id, include_user_scope=False,
                             scope="project", types=FACT_TYPES))
    wanted = {fold(t) for t in terms}
    out = []
    for m in store.scroll(flt):
        if m.id == own_id or m.created_at > said:
            continue
        if change is not None and slot_value(m.content, change[0]) not in (None, change[1]):
            out.append(m)  # "The staging URL is now …" replaces the URL it gave
            continue
        text = fold(m.content)
        if not any(t in text for t in wanted):  # a substring test before the word match
            continue
        if (any(states_use(m.content, t) for t in wanted if mentions(m.content, t))
                and same_subject(content, m.content, terms)):
            out.append(m)
    return sorted(out, key=lambda m: (m.created_at, m.id))


def supersede(store: MemoryStore, state: StateDB, new: Memory, terms: Sequence[str],
              cue: str, *, now: datetime, record: Record | None = None,
              said_as: str | None = None, olds: Sequence[Memory] | None = None) -> list[str]:
    """Retire what ``new`` replaces (see :func:`superseded`), as one recorded run.

    Args:
        new: the correction, already stored.
        terms: the terms it replaces (grounded in the user's words).
        cue: the user's words that say so (quoted in ``retired_reason``, cut to
            :data:`MAX_CUE_CHARS`).
        record: appends the run's journal entry to the dream journal (``None``: the
            state file's run alone).
        said_as: where a value change is read (:func:`replaced_by`; ``None``: in
            ``new``'s text).
        olds: what ``new`` replaces, when the caller looked it up already
            (:func:`replaced_by` before ``new`` was written); ``None``: looked up here.

    Returns:
        The ids retired (none: nothing recorded).

    Raises:
        StoreError, StateError: the store or the state file failed; a run left
            ``applying`` is finished by dream recovery.
    """
    olds = (superseded(store, new, terms, said_as=said_as) if olds is None
            else [m for m in olds if m.id != new.id])
    if not olds:
        return []
    run_id = uuid.uuid4().hex[:12]
    at = iso_utc(now)
    reason = f"superseded: {_quote(cue)}"
    before = [m.to_payload() for m in olds]
    for m in olds:
        m.status, m.superseded_by, m.retired_reason = "retired", new.id, reason
        m.retired_by_run, m.updated_at = run_id, now
    entry = _entry(run_id, new, olds, reason, at)
    key = scope_key(new.scope, new.project_id)
    state.runs.dream_start(run_id, scope_key=key, project_root=new.project_root,
                           trigger=SUPERSEDE, dry_run=False, now=at)
    state.runs.dream_applying(run_id, before=before, after=[m.to_payload() for m in olds],
                              counts=entry["counts"], model=None, tokens_in=0, tokens_out=0,
                              result=entry)
    store.upsert(olds)
    state.runs.dream_finish(run_id, "applied", now=at, result=entry, expect=("applying",))
    if record is not None:
        record(entry)
    ids = [m.id for m in olds]
    log.info("memories_superseded", run_id=run_id, by=new.id, ids=ids,
             project=new.project_id)
    return ids


def _entry(run_id: str, new: Memory, olds: Sequence[Memory], reason: str, at: str
           ) -> dict[str, Any]:
    """The dream-journal entry of a write-time supersession (the keys of a dream's)."""
    ids = [m.id for m in olds]
    return {
        "run_id": run_id, "action": SUPERSEDE, "trigger": SUPERSEDE, "dry_run": False,
        "scope": new.scope, "project_key": new.project_id, "project_root": new.project_root,
        "status": "ok", "reason": reason, "started_at": at, "ended_at": at,
        "counts": {"superseded": len(olds)},
        "operations": [{"op": "supersede", "memory_ids": ids, "superseded_ids": ids,
                        "new_id": new.id, "texts": [_quote(m.content, 80) for m in olds],
                        "new_text": _quote(new.content, 80), "reason": reason}],
        "rejected": [], "model": None, "tokens_in": 0, "tokens_out": 0,
        "duration_ms": 0.0, "mode": "capture",
    }
