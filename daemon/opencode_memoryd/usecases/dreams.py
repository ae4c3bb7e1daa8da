"""Dreams as use cases: which scopes to dream, the gate, a forced or scheduled dream, undo
and crash recovery, each journaled once."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import structlog

from opencode_memoryd.dream.freshness import check_freshness
from opencode_memoryd.dream.journal import DreamJournal
from opencode_memoryd.errors import MemorydError
from opencode_memoryd.models import FACT_TYPES, parse_iso, scope_project
from opencode_memoryd.redaction.engine import redact
from opencode_memoryd.state.db import StateDB
from opencode_memoryd.store.api import MemoryFilter, MemoryStore
from opencode_memoryd.usecases.maintain import LockFor
from opencode_memoryd.usecases.ports import AppPort

if TYPE_CHECKING:
    from opencode_memoryd.dream.dreamer import Dreamer

log = structlog.get_logger(__name__)


def dream_scopes(store: MemoryStore, user_id: str | None = None
                 ) -> dict[str | None, str | None]:
    """Every scope that holds memories: project key -> project root (``None`` = the user
    scope of ``user_id``; ``None``: of anyone)."""
    scopes: dict[str | None, str | None] = {}
    for m in store.scroll(MemoryFilter(user_id=user_id)):
        if m.scope == "user":
            scopes.setdefault(None, None)
        else:
            scopes.setdefault(m.project_id, m.project_root)
    return scopes


def dream_gate(app: AppPort, journal: DreamJournal, store: MemoryStore,
               project_key: str | None) -> tuple[bool, str]:
    """Whether a scope's dream gate is open, and why not.

    Open when at least ``dream.min_hours_between_dreams`` passed since the scope's last
    dream (journal status ``ok``, or ``skipped``: nothing to consolidate then is a dream
    done; not a dry run, not a failed or interrupted one) and at least
    ``dream.min_new_memories`` facts (briefs and session summaries do not count) were
    added or changed since then.
    """
    d = app.config.dream
    entries = (journal.entries(user=True) if project_key is None
               else journal.entries(project_key=project_key))
    last = next((e for e in entries if e.get("status") in ("ok", "skipped")
                 and not e.get("dry_run") and e.get("action", "dream") == "dream"), None)
    since = None
    if last is not None:
        since = parse_iso(str(last.get("ended_at") or last.get("started_at")))
        hours = (app.clock() - since).total_seconds() / 3600
        if hours < d.min_hours_between_dreams:
            return False, (f"last dream {hours:.1f} h ago; the minimum is "
                           f"{d.min_hours_between_dreams:g} h")
    # facts only: briefs and session summaries are never consolidated
    flt = (MemoryFilter(scope="user", user_id=app.user_id, types=FACT_TYPES)
           if project_key is None
           else MemoryFilter(project_id=project_key, include_user_scope=False,
                             types=FACT_TYPES))
    new = sum(1 for m in store.scroll(flt) if since is None or m.updated_at > since)
    if new < d.min_new_memories:
        return False, (f"{new} new memories since the last dream; the minimum is "
                       f"{d.min_new_memories}")
    return True, "gate open"


def run_dream(dreamer: Dreamer, journal: DreamJournal, project_key: str | None,
              project_root: str | None, *, trigger: str, dry_run: bool = False,
              lock_for: LockFor | None = None,
              should_stop: Callable[[], bool] = lambda: False,
              freshness: bool = False) -> dict[str, Any]:
    """Dream one scope and append the result to the journal; return the journal entry.

    ``lock_for(scope)`` is held while the dream applies (not while it plans), so work on
    the scope waits seconds, never for the model; ``should_stop`` ends it between groups.
    With ``freshness`` (and not ``dry_run``), a project's facts are then checked against
    its worktree (:func:`refresh_freshness`) and the entry gets ``freshness``: its counts,
    or ``{"error": ...}`` when the store failed (the dream's entry is journaled anyway).
    """
    scope = project_key or "user"
    result = dreamer.dream(project_key, project_root=project_root, trigger=trigger,
                           dry_run=dry_run, should_stop=should_stop,
                           apply_lock=lock_for(scope) if lock_for else None)
    entry = dict(result.to_journal())
    if freshness and not dry_run and project_key is not None and not should_stop():
        try:
            entry["freshness"] = refresh_freshness(dreamer.store, project_key,
                                                   dreamer.clock(), lock_for=lock_for,
                                                   should_stop=should_stop)
        except MemorydError as exc:
            reason = f"{type(exc).__name__}: {redact(str(exc)).text}"
            log.error("freshness_failed", project=project_key, error=reason)
            entry["freshness"] = {"error": reason}
    journal.append(entry)
    log.info("dream_finished", run_id=entry.get("run_id"), status=entry.get("status"),
             trigger=trigger, dry_run=dry_run, counts=entry.get("counts"))
    return entry


def refresh_freshness(store: MemoryStore, project_key: str, now: datetime, *,
                      lock_for: LockFor | None = None,
                      should_stop: Callable[[], bool] = lambda: False) -> dict[str, int]:
    """Mark or clear the ``stale`` marks of a project's active facts against its worktree
    (:func:`~opencode_memoryd.dream.freshness.check_freshness`; briefs and session
    summaries are not checked), writing under the project's lock; a payload-only write.
    ``should_stop`` ends it between memories (the daemon stopping).

    Returns:
        The counts of :meth:`~opencode_memoryd.dream.freshness.FreshnessReport.to_dict`.

    Raises:
        StoreError: the store failed.
    """
    flt = MemoryFilter(project_id=project_key, include_user_scope=False, types=FACT_TYPES)
    facts = list(store.scroll(flt))

    def set_stale(memory_id: str, marks: list[dict[str, str]]) -> None:
        with lock_for(project_key) if lock_for else nullcontext():
            store.set_fields([memory_id], {"stale": marks})

    return check_freshness(facts, now, set_stale, should_stop=should_stop).to_dict()


def undo_dream(dreamer: Dreamer, journal: DreamJournal, state: StateDB, run_id: str, *,
               lock_for: LockFor) -> dict[str, Any]:
    """Undo an applied dream run; journal the run's ``undone`` entry beside its ``ok`` one.

    The undo rewrites memories of the run's scope, so it holds that scope's lock.

    Raises:
        DreamError: no such run, a dry run, or a run already undone.
    """
    row = state.runs.dream_run(run_id)
    project = scope_project(str(row["scope_key"])) if row else None
    with lock_for(project or "user"):
        entry = dict(dreamer.undo(run_id).to_journal())
    journal.append(entry)
    return entry


def recover_dreams(dreamer: Dreamer, journal: DreamJournal) -> list[str]:
    """Finish the dreams a crash interrupted mid-apply and journal each once.

    Returns:
        The run ids rolled forward (oldest first).
    """
    recovered = dreamer.recover()
    for run_id in recovered:
        log.warning("dream_recovered", run_id=run_id)
        result = dreamer.result_of(run_id)
        if result is not None:
            journal.append(dict(result.to_journal()))
    return recovered


def _fresh_between_dreams(app: AppPort, store: MemoryStore, project_key: str,
                          fresh_at: dict[str, datetime], lock_for: LockFor,
                          should_stop: Callable[[], bool]) -> None:
    """Check a project whose gate is closed, when its last check is old enough."""
    now, last = app.clock(), fresh_at.get(project_key)
    hours = app.config.dream.min_hours_between_dreams
    if not app.config.dream.check_freshness or (
            last is not None and (now - last).total_seconds() < hours * 3600):
        return
    fresh_at[project_key] = now
    try:
        counts = refresh_freshness(store, project_key, now, lock_for=lock_for,
                                   should_stop=should_stop)
    except MemorydError as exc:
        log.error("freshness_failed", project=project_key, error=redact(str(exc)).text)
        return
    log.info("freshness_between_dreams", project=project_key, **counts)


@dataclass(frozen=True)
class ScopeDream:
    """The outcome of one scope in :func:`dream_open_scopes`.

    Attributes:
        scope: the project key, or ``"user"``.
        entry: the journal entry, or ``None`` when the dream crashed.
        error: the crash message, or ``None``.
    """

    scope: str
    entry: dict[str, Any] | None
    error: str | None = None


def dream_open_scopes(app: AppPort, dreamer: Dreamer, journal: DreamJournal,
                      store: MemoryStore, *, trigger: str, lock_for: LockFor,
                      should_stop: Callable[[], bool] = lambda: False,
                      fresh_at: dict[str, datetime] | None = None) -> list[ScopeDream]:
    """Dream every scope whose gate is open; one scope's crash never ends the others.

    A project whose gate is closed still has its freshness checked
    (:func:`refresh_freshness`, with ``dream.check_freshness``) when ``fresh_at`` (project
    key -> when this process last checked it; updated here) says it was not checked for
    ``dream.min_hours_between_dreams``: a project that no longer changes still learns
    what its worktree dropped.

    Args:
        trigger: ``auto`` or ``catch-up`` (journaled).
        should_stop: checked before each scope and each group; true ends the pass (a
            dream it interrupts changes nothing and is journaled ``failed``).
        fresh_at: the daemon's record of freshness checks (``None``: none between dreams).
    """
    outcomes: list[ScopeDream] = []
    for project_key, project_root in dream_scopes(store, app.user_id).items():
        if should_stop():
            break
        scope = project_key or "user"
        is_open, why = dream_gate(app, journal, store, project_key)
        if not is_open:
            log.debug("dream_gate_closed", project=scope, reason=why)
            if project_key is not None and fresh_at is not None:
                _fresh_between_dreams(app, store, project_key, fresh_at, lock_for,
                                      should_stop)
            continue
        if project_key is not None and fresh_at is not None:
            fresh_at[project_key] = app.clock()
        try:
            entry = run_dream(dreamer, journal, project_key, project_root, trigger=trigger,
                              lock_for=lock_for, should_stop=should_stop,
                              freshness=app.config.dream.check_freshness)
        except Exception as exc:  # one scope's failure must not end the others' dreams
            log.exception("dream_crashed", project=scope)
            outcomes.append(ScopeDream(scope, None, f"dream of {scope}: {exc}"))
            continue
        outcomes.append(ScopeDream(scope, entry))
    return outcomes
