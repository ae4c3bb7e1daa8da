"""Recovery and undo of dream runs (the bodies of
:meth:`~opencode_memoryd.dream.dreamer.Dreamer.recover` and
:meth:`~opencode_memoryd.dream.dreamer.Dreamer.undo`); the writes themselves are
:class:`~opencode_memoryd.dream.apply.RunWriter`'s."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime

import structlog

from opencode_memoryd.dream.apply import RunWriter, undo_operations, undoable_run
from opencode_memoryd.dream.model import DreamResult, DreamScope
from opencode_memoryd.errors import DreamError
from opencode_memoryd.models import iso_utc, scope_project
from opencode_memoryd.state.db import StateDB
from opencode_memoryd.store.api import MemoryStore

log = structlog.get_logger(__name__)


def recover_runs(writer: RunWriter, state: StateDB, now: str) -> list[str]:
    """Finish what a crash interrupted (see :meth:`Dreamer.recover
    <opencode_memoryd.dream.dreamer.Dreamer.recover>`).

    Args:
        now: the time to record (ISO 8601 UTC).

    Returns:
        The ids of the runs rolled forward or undone to the end, oldest first.

    Raises:
        StoreError, StateError: the store or the state file failed (run again).
    """
    done: list[str] = []
    for row in state.runs.dream_runs(statuses=("planned", "applying", "undoing"),
                                     newest_first=False):
        rid = row["id"]
        if row["status"] == "planned":
            if row["ended_at"] is None:
                state.runs.dream_finish(rid, "failed", now=now, expect=("planned",),
                                        reason="interrupted while planning; nothing was changed")
            continue
        if row["status"] == "applying":
            writes = writer.roll_forward(row, now)
            log.warning("dream_rolled_forward", run_id=rid, writes=writes)
        else:
            writer.restore(row)
            state.runs.dream_mark_undo(rid, "undone", now, expect=("undoing",))
            log.warning("dream_undo_completed", run_id=rid)
        done.append(rid)
    return done


def undo_run(writer: RunWriter, store: MemoryStore, state: StateDB, run_id: str,
             clock: Callable[[], datetime], user_id: str | None = None) -> DreamResult:
    """Undo an applied dream (see :meth:`Dreamer.undo
    <opencode_memoryd.dream.dreamer.Dreamer.undo>`, which documents the result and errors).

    Raises:
        NotFoundError: no run has that id.
        DreamError: the run cannot be undone.
        StoreError, StateError: the store or state file failed.
    """
    row = undoable_run(state, run_id)
    started = clock()
    t0 = time.perf_counter()
    if row["status"] == "applied" and not state.runs.dream_mark_undo(
            run_id, "undoing", iso_utc(started), expect=("applied",)):
        raise DreamError(f"dream run {run_id} changed status meanwhile; try again")
    sc = DreamScope.of(scope_project(row["scope_key"]), user_id)
    drifted = writer.drifted(row)
    n_before = store.count(sc.filter())
    restored, deleted = writer.restore(row)
    ended = clock()
    state.runs.dream_mark_undo(run_id, "undone", iso_utc(ended), expect=("undoing",))
    prior = row.get("result") or {}
    reason = "undone"
    if drifted:
        reason += (f"; {drifted} of its memories had changed since the dream, and those "
                   "changes were discarded")
    res = DreamResult(
        run_id=run_id, trigger=row["trigger"], dry_run=False, scope=sc.scope,
        project_key=sc.project_id, project_root=row["project_root"], status="undone",
        reason=reason, started_at=iso_utc(started), ended_at=iso_utc(ended),
        counts={"restored": restored, "deleted": len(deleted), "before": n_before,
                "after": store.count(sc.filter())},
        operations=undo_operations(row, deleted),
        model=prior.get("model"), mode=prior.get("mode", "rules"), action="undo",
        duration_ms=(time.perf_counter() - t0) * 1000,
    )
    log.info("dream_undone", run_id=run_id, restored=restored, deleted=len(deleted),
             drifted=drifted)
    return res
