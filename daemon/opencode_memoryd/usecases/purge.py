"""A real delete of one memory (``forget --purge``), for a text that must not stay
anywhere, such as a leaked secret.

``forget`` leaves a tombstone; a purge removes the point from the store, and replaces the
memory's text (and the texts of its earlier versions) wherever the dream journal and the
journal of manual changes hold it, with :data:`PURGED_TEXT`: in a payload, in a dream's
before-set, inside a longer string. The journal of manual changes then records that a
purge happened (the id and the time, no text); :func:`~.manual_log.manual_memories` and
``rebuild`` leave a purged memory out (``rebuild`` deletes it again when extraction from
OpenCode's database, which still holds the words said, brings it back).

A journal is rewritten whole: read under its lock, written to a temporary file beside it,
``fsync``-ed and renamed over it, so a crash leaves the old file or the new one.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Any

import structlog

from opencode_memoryd.dream.journal import DreamJournal
from opencode_memoryd.errors import StateError
from opencode_memoryd.models import iso_utc
from opencode_memoryd.store.api import MemoryStore
from opencode_memoryd.usecases.curate import scope_lock_key, visible
from opencode_memoryd.usecases.maintain import LockFor, no_lock
from opencode_memoryd.usecases.ports import AppPort

log = structlog.get_logger(__name__)

#: What replaces a purged text in the journals.
PURGED_TEXT = "[purged]"


def _replace(value: Any, texts: list[str]) -> tuple[Any, int]:
    """``value`` with every occurrence of ``texts`` in its strings replaced (nested dicts
    and lists), and how many strings changed."""
    if isinstance(value, str):
        out = value
        for t in texts:
            out = out.replace(t, PURGED_TEXT)
        return out, int(out != value)
    if isinstance(value, list):
        pairs = [_replace(v, texts) for v in value]
        return [v for v, _ in pairs], sum(n for _, n in pairs)
    if isinstance(value, dict):
        changed = 0
        new: dict[str, Any] = {}
        for k, v in value.items():
            new[k], n = _replace(v, texts)
            changed += n
        return new, changed
    return value, 0


def scrub_journal(path: Path, texts: list[str]) -> int:
    """Replace ``texts`` in every entry of the JSON-lines journal at ``path`` (see the
    module); returns how many entries changed (0: the file is left as it was, also when
    it does not exist). Lines that are not JSON are kept as they are.

    Raises:
        StateError: the journal cannot be read or written.
    """
    texts = sorted({t for t in texts if t}, key=len, reverse=True)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return 0
    except OSError as exc:
        raise StateError(f"cannot open {path} to purge a memory's text: {exc}") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # the lock DreamJournal appends under
        with os.fdopen(os.dup(fd), "rb") as f:
            lines = f.read().split(b"\n")
        changed = 0
        out: list[bytes] = []
        for raw in lines:
            try:
                entry = json.loads(raw) if raw.strip() else None
            except ValueError:
                entry = None
            if entry is None:
                out.append(raw)
                continue
            new, n = _replace(entry, texts)
            changed += int(n > 0)
            out.append(json.dumps(new, ensure_ascii=False).encode() if n else raw)
        if changed:
            tmp = path.with_name(f".{path.name}.purge")
            tfd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
            try:
                os.write(tfd, b"\n".join(out))
                os.fsync(tfd)
            finally:
                os.close(tfd)
            os.replace(tmp, path)
            dfd = os.open(path.parent, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
        return changed
    except OSError as exc:
        raise StateError(f"cannot rewrite {path} to purge a memory's text: {exc}") from exc
    finally:
        os.close(fd)


def purge_memory(app: AppPort, store: MemoryStore, journal: DreamJournal,
                 manual: DreamJournal, memory_id: object, *,
                 lock_for: LockFor = no_lock) -> dict[str, Any]:
    """Delete the memory ``memory_id`` (active or retired; a unique prefix will do) for
    good: its point, and its texts in both journals; then journal the purge (see the
    module). Done under the scope's lock.

    Returns:
        ``{"id": the full id, "status": "purged", "scrubbed": {"journal": entries changed
        in the dream journal, "manual_journal": entries changed in the journal of manual
        changes}}``.

    Raises:
        RequestError: ``memory_id`` is not a non-empty string, or an ambiguous prefix.
        NotFoundError: no such memory for this user.
        StateError: a journal cannot be rewritten (the point is not deleted yet: run the
            purge again).
    """
    m = visible(app, store, memory_id, "purge")
    with lock_for(scope_lock_key(m)):
        texts = [m.content] + [str(h.get("content") or "") for h in m.history]
        scrubbed = {"journal": scrub_journal(journal.path, texts),
                    "manual_journal": scrub_journal(manual.path, texts)}
        store.delete([m.id])
        manual.append({"run_id": f"purge-{m.id}", "status": "ok", "op": "purge",
                       "at": iso_utc(app.clock()), "memory_id": m.id})
    log.info("memory_purged", id=m.id, scope=m.scope, project=m.project_id, **scrubbed)
    return {"id": m.id, "status": "purged", "scrubbed": scrubbed}
