"""Export and import: every memory of the store with its provenance, as one JSON document
that a later import (here or on another machine) brings back as it was.

The document (``format`` and ``version`` say what it is)::

    {"format": "opencode-memoryd-export", "version": 1, "exported_at": ISO-8601 UTC str,
     "memories": [Memory payload, ...]}

Each payload is :meth:`~opencode_memoryd.models.Memory.to_payload`: id, text, type, scope,
project, ``said_at``, ``provenance``, sessions and messages, ``status`` with
``superseded_by``/``retired_reason``/``merged_from``, edit ``history``. Tombstones are
exported too, so supersede links survive. A user-scope memory becomes the importing user's
(its ``user_id`` is this identity's): an export is your own memories.

Import validates the whole document first against :data:`EXPORT_SCHEMA` (JSON Schema,
with ``jsonschema``: each memory's id is a UUID, its type, scope and status are known
values, its times are RFC 3339) and writes nothing when any memory is invalid; the error
names each place. It deduplicates by point id: a memory the
store already holds (active or retired) is left as it is, so importing a file twice adds
nothing the second time. Texts are redacted as ``add`` redacts them. The memories imported
are journaled in the journal of manual changes (one ``import`` entry per request), so
``rebuild`` keeps them.
"""

from __future__ import annotations

from typing import Any

from opencode_memoryd.dream.journal import DreamJournal
from opencode_memoryd.errors import RequestError
from opencode_memoryd.models import Memory, iso_utc
from opencode_memoryd.redaction.engine import scrub
from opencode_memoryd.store.api import MemoryFilter, MemoryStore
from opencode_memoryd.usecases.manual_log import record_changes
from opencode_memoryd.usecases.ports import AppPort

#: ``format`` of an export document.
EXPORT_FORMAT = "opencode-memoryd-export"
#: ``version`` of the document this code writes and reads.
EXPORT_VERSION = 1
#: At most this many invalid memories are named in an import's error.
SHOWN_PROBLEMS = 10


#: The JSON Schema (draft 2020-12) of an export document: what import requires of it
#: (other keys of a memory are kept as they are).
EXPORT_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["format", "version", "memories"],
    "properties": {
        "format": {"const": EXPORT_FORMAT},
        "version": {"const": EXPORT_VERSION},
        "exported_at": {"type": "string"},
        "memories": {"type": "array", "items": {
            "type": "object",
            "required": ["id", "content", "type", "scope", "created_at", "updated_at"],
            "properties": {
                "id": {"type": "string", "format": "uuid"},
                "content": {"type": "string", "minLength": 1},
                "type": {"enum": ["user", "feedback", "project", "reference",
                                  "project-brief", "session-summary"]},
                "scope": {"enum": ["user", "project"]},
                "status": {"enum": ["active", "retired"]},
                "created_at": {"type": "string", "format": "date-time"},
                "updated_at": {"type": "string", "format": "date-time"},
                "said_at": {"type": ["string", "null"], "format": "date-time"},
                "session_ids": {"type": "array", "items": {"type": "string"}},
                "message_ids": {"type": "array", "items": {"type": "string"}},
            },
        }},
    },
}


def _problems(document: object) -> list[str]:
    """One line per place ``document`` breaks :data:`EXPORT_SCHEMA` (``at `path`: why``),
    then per memory :meth:`Memory.from_payload` refuses."""
    from jsonschema import Draft202012Validator

    checker = Draft202012Validator(EXPORT_SCHEMA,
                                   format_checker=Draft202012Validator.FORMAT_CHECKER)
    found = [f"at `{'.'.join(str(x) for x in e.absolute_path) or 'document'}`: {e.message}"
             for e in sorted(checker.iter_errors(document), key=lambda e: list(e.path))]
    if found or not isinstance(document, dict):
        return found
    for n, payload in enumerate(document["memories"]):
        try:
            Memory.from_payload(payload)
        except (KeyError, TypeError, ValueError) as exc:
            found.append(f"at `memories.{n}`: {exc}")
    return found


def export_memories(app: AppPort, store: MemoryStore) -> dict[str, Any]:
    """Every memory of the store (tombstones too; another identity's user-scope memories
    left out), oldest first, as the export document (see the module)."""
    memories = [m.to_payload() for m in store.scroll(MemoryFilter(include_retired=True))
                if not (m.scope == "user" and m.user_id not in (None, app.user_id))]
    return {"format": EXPORT_FORMAT, "version": EXPORT_VERSION,
            "exported_at": iso_utc(app.clock()), "memories": memories}


def check_document(document: object) -> None:
    """Refuse ``document`` unless it is a valid export (see :data:`EXPORT_SCHEMA`).

    Raises:
        RequestError: each problem named (up to :data:`SHOWN_PROBLEMS`).
    """
    bad = _problems(document)
    if bad:
        more = f"; and {len(bad) - SHOWN_PROBLEMS} more" if len(bad) > SHOWN_PROBLEMS else ""
        raise RequestError(f"import: not a valid opencode-memoryd export (format "
                           f"{EXPORT_FORMAT!r}, version {EXPORT_VERSION}): "
                           f"{'; '.join(bad[:SHOWN_PROBLEMS])}{more}; nothing was imported")


def import_memories(app: AppPort, store: MemoryStore, manual: DreamJournal,
                    document: object) -> dict[str, Any]:
    """Import an export document (see the module): the memories the store does not hold
    yet are written, each journaled as ``import``; the others are left alone.

    Returns:
        ``{"memories": n in the document, "added": n written, "present": n already
        stored, "ids": [ids written]}``.

    Raises:
        RequestError: not an export document of a version this code reads, or one of its
            memories is invalid (each named, up to :data:`SHOWN_PROBLEMS`); nothing was
            written.
    """
    check_document(document)
    memories: list[dict[str, Any]] = document["memories"]  # type: ignore[index]
    good = [Memory.from_payload(p) for p in memories]
    by_id = {m.id: m for m in good}
    held = {m.id for m in store.get(list(by_id))}
    fresh = [m for mid, m in by_id.items() if mid not in held]
    for m in fresh:
        m.content = scrub(m.content).text
        if m.scope == "user":
            m.user_id = app.user_id
    if fresh:
        store.upsert(fresh)
    if fresh:
        record_changes(manual, "import", [m.to_payload() for m in fresh], iso_utc(app.clock()))
    added = [m.id for m in fresh]
    return {"memories": len(memories), "added": len(added),
            "present": len(by_id) - len(added), "ids": added}
