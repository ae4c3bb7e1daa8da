"""The journal of manual changes: every memory a person or the agent added, edited,
forgot or restored (CLI, web page, MCP tool), with the memory's full payload after the
change, so ``rebuild`` can bring those memories back when the store is lost.

One JSON line per change in ``<state dir>/manual-journal.jsonl``, written through
:class:`~opencode_memoryd.dream.journal.DreamJournal` (appended with ``O_APPEND``,
``fsync``-ed, ``flock``-ed; a torn tail is set aside)::

    {"run_id": str (unique per change), "status": "ok", "op": "add" | "edit" | "forget" |
     "restore" | "confirm" | "reject" | "supersede" | "export" | "import", "at": ISO-8601
     UTC str, "memory": Memory payload}

    {"run_id": str, "status": "ok", "op": "purge", "at": str, "memory_id": str}

``import``: the memories one ``import`` request wrote, in one entry (``"memories":
[Memory payload, ...]`` in place of ``memory``: one ``fsync`` for many). ``purge``: a
memory deleted for good (``forget --purge``); it holds the id alone, the journals' copies
of its text were replaced, and :func:`manual_memories` and ``rebuild`` leave it out.

``supersede``: a fact a manual ``add`` retired (its tombstone), so a rebuild keeps it
retired.

``export`` entries are written by ``rebuild``: the ``manual`` memories an old store still
gave that the journal did not hold (written before it existed), so a rebuild that is
interrupted and run again still has them.

Memories written by extraction are not journaled: ``rebuild`` extracts them again from
OpenCode's databases (an edit or a forget of one is journaled, and replayed over it).
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import structlog

from opencode_memoryd.dream.journal import DreamJournal
from opencode_memoryd.errors import MemorydError
from opencode_memoryd.models import Memory
from opencode_memoryd.store.api import MemoryStore

log = structlog.get_logger(__name__)

#: The file, next to the dream journal.
MANUAL_JOURNAL_FILE = "manual-journal.jsonl"
#: The changes journaled.
MANUAL_OPS = ("add", "edit", "forget", "restore", "confirm", "reject", "supersede",
              "export", "import")


def manual_journal(dream_journal_path: Path) -> DreamJournal:
    """The journal of manual changes in the folder of the dream journal at
    ``dream_journal_path``."""
    return DreamJournal(Path(dream_journal_path).with_name(MANUAL_JOURNAL_FILE))


def record_change(journal: DreamJournal, op: str, payload: dict[str, Any], at: str) -> None:
    """Append one change: ``op`` (one of :data:`MANUAL_OPS`) left the memory as
    ``payload`` (:meth:`Memory.to_payload`) at ``at`` (ISO 8601 UTC).

    Raises:
        StateError: the journal cannot be written.
    """
    journal.append({"run_id": uuid.uuid4().hex, "status": "ok", "op": op, "at": at,
                    "memory": payload})


def record_changes(journal: DreamJournal, op: str, payloads: list[dict[str, Any]],
                   at: str) -> None:
    """Append one entry for many memories changed at once (``"memories"``, see the
    module).

    Raises:
        StateError: the journal cannot be written.
    """
    journal.append({"run_id": uuid.uuid4().hex, "status": "ok", "op": op, "at": at,
                    "memories": payloads})


def journaled(journal: DreamJournal, op: str, result: dict[str, Any], at: str
              ) -> dict[str, Any]:
    """Record ``result["memory"]`` (a use case's answer) as change ``op`` at ``at`` and
    return ``result`` unchanged; a journal that cannot be written is logged
    (``manual_journal_failed``), and the change stands."""
    payload = result.get("memory")
    if isinstance(payload, dict):
        try:
            record_change(journal, op, payload, at)
        except MemorydError as exc:
            log.error("manual_journal_failed", op=op, id=payload.get("id"), error=str(exc))
    return result


def manual_memories(journal: DreamJournal) -> dict[str, Memory]:
    """Every journaled memory as its last change left it: id -> memory (a forgotten one
    as its tombstone). Entries without a readable payload are skipped.

    Raises:
        StateError: the journal cannot be read.
    """
    out: dict[str, Memory] = {}
    entries = journal.entries()
    gone = purged_ids(entries)
    for entry in reversed(entries):  # oldest first: the last change wins
        if entry.get("op") not in MANUAL_OPS:
            continue
        many = entry.get("memories")
        for payload in many if isinstance(many, list) else [entry.get("memory")]:
            if not isinstance(payload, dict):
                continue
            try:
                m = Memory.from_payload(payload)
            except (KeyError, TypeError, ValueError):
                continue
            if m.id not in gone:
                out[m.id] = m
    return out


def purged_ids(entries: list[dict[str, Any]]) -> set[str]:
    """The ids of the memories the journal entries ``entries`` record a purge of."""
    return {str(e["memory_id"]) for e in entries
            if e.get("op") == "purge" and e.get("memory_id")}


def journal_undone(journal: DreamJournal, store: MemoryStore, run_id: str, at: str) -> None:
    """Journal as ``restore`` (at ``at``, ISO 8601 UTC) each memory this journal last left
    retired by run ``run_id`` that an undo of the run made active again, so a rebuild
    keeps it active; a journal that cannot be read or written is logged and the undo
    stands."""
    try:
        held = manual_memories(journal)
    except MemorydError as exc:
        log.error("manual_journal_failed", op="restore", run_id=run_id, error=str(exc))
        return
    ids = [m.id for m in held.values() if m.retired_by_run == run_id]
    for m in store.get(ids) if ids else []:
        if m.is_active:
            journaled(journal, "restore", {"memory": m.to_payload()}, at)
