"""Dreams: consolidation of one scope of the memory store that never loses a fact.

A *dream* looks at the active memories of one scope (the user scope, or one project),
finds groups of memories that say the same thing or talk about the same subject
(:mod:`opencode_memoryd.dream.grouping`), and consolidates each group
(:mod:`opencode_memoryd.dream.planning`):

* **rules mode** (no LLM): exact and near-exact duplicates (word similarity at least
  ``near_duplicate_similarity``, same type and scope, and one says all the other says:
  every content word and identifier, :func:`~opencode_memoryd.extract.facts.restates`) collapse
  into the member that restates the most others (the oldest on a tie);
* **LLM mode**: a chat model proposes, per group, a plan of ``merge`` (one new memory
  holding the facts of several), ``supersede`` (a newer memory replaces older ones on the
  same subject) and ``keep`` operations
  (:data:`~opencode_memoryd.dream.planning.PLAN_SCHEMA`).

Every plan is checked before anything changes (:mod:`opencode_memoryd.dream.checks`: ids,
fact survival, the retire cap); a group whose plan fails a check is rejected — with its
reason in :attr:`~opencode_memoryd.dream.model.DreamResult.rejected` — and the rest of the
dream goes on. A dream never deletes a memory: the ones it retires become tombstones.

Plans are recorded as they arrive (:mod:`opencode_memoryd.llm.recorded`: a dream killed
while planning never pays for them twice); accepted changes are applied through a redo log
in the state file (:mod:`opencode_memoryd.dream.apply`): :meth:`Dreamer.recover` rolls a
run left ``applying`` forward, and :meth:`Dreamer.undo` writes back what a run changed.

Callers keep other writers of the scope (extraction) out while a dream applies: the
``apply_lock`` of :meth:`Dreamer.dream` (the daemon's per-project lock) is held from the
last check to the last write, not while the model plans, so an extraction or a command
never waits for a dream's LLM calls; a dream refuses to apply when a touched memory
changed while it was planning. ``should_stop`` is asked between groups: a dream told to
stop changes nothing and ends ``failed`` (so the gate stays open for the next start).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence, Set
from contextlib import AbstractContextManager, nullcontext
from datetime import UTC, datetime
from typing import Any

import structlog

from opencode_memoryd.dream.apply import RunWriter, write_order
from opencode_memoryd.dream.checks import GroupChange, PlanChecker, RetireCap
from opencode_memoryd.dream.grouping import Grouping, candidate_groups
from opencode_memoryd.dream.model import TRIGGERS, DreamResult, DreamScope, DreamSettings
from opencode_memoryd.dream.planning import Operation, Planner
from opencode_memoryd.dream.planrun import GroupLoop, Planned
from opencode_memoryd.dream.terms import SalientTerms
from opencode_memoryd.dream.undo import recover_runs, undo_run
from opencode_memoryd.errors import MemorydError
from opencode_memoryd.llm.recorded import RecordedChat
from opencode_memoryd.models import FACT_TYPES, Memory, iso_utc
from opencode_memoryd.redaction.engine import redact
from opencode_memoryd.state.db import StateDB
from opencode_memoryd.store.api import MemoryStore
from opencode_memoryd.store.bm25 import Bm25Encoder

log = structlog.get_logger(__name__)

#: The reason of a dream ended by ``should_stop`` (the daemon stopping).
STOPPED = "stopped: the daemon is shutting down; nothing was changed"


class Dreamer:
    """Plans, checks, applies, recovers and undoes dreams of one store.

    Args:
        store: the memory store.
        state: the state file (``dream_runs`` table).
        planner: a chat model with ``complete_json``
            (:class:`~opencode_memoryd.llm.chat.ChatClient`) for LLM mode, or ``None``
            for rules mode.
        settings: thresholds and caps.
        clock: returns the current aware UTC time.
        bm25: the tokenizer of salient terms (default: the shared default encoder, the
            tokenizer the store indexes with).
        user_id: whose user scope a user-scope dream consolidates (``None``: every
            user-scope memory, as before user identities existed).

    Not thread-safe; callers serialise dreams and extractions of one scope.
    """

    def __init__(
        self,
        store: MemoryStore,
        state: StateDB,
        *,
        planner: Planner | None = None,
        settings: DreamSettings | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        bm25: Bm25Encoder | None = None,
        user_id: str | None = None,
    ) -> None:
        self.store = store
        self.user_id = user_id
        self.state = state
        self.planner = planner
        self._asker = (RecordedChat(planner, state.replies, clock=clock)
                       if planner is not None else None)
        self.settings = settings or DreamSettings()
        self.clock = clock
        self._terms = SalientTerms(bm25)
        self._checker = PlanChecker(store, self.settings, self._terms)
        self._writer = RunWriter(store, state)

    @property
    def mode(self) -> str:
        """``llm`` with a planner, else ``rules``."""
        return "rules" if self.planner is None else "llm"

    def shares_subject(self, old: str, new: str) -> bool:
        """Whether ``new`` shares the subject of ``old`` (check 2 of
        :mod:`~opencode_memoryd.dream.checks`)."""
        return self._checker.shares_subject(old, new)

    def groups(self, active: Sequence[Memory], settled: Set[str] = frozenset()) -> Grouping:
        """Candidate groups of the scope's active memories
        (:func:`~opencode_memoryd.dream.grouping.candidate_groups`; subject groups in LLM
        mode only), leaving out those whose signature is in ``settled``."""
        return candidate_groups(active, settled, settings=self.settings, terms=self._terms,
                                by_subject=self.planner is not None)

    def check(self, group: Sequence[Memory], ops: Sequence[Operation], sc: DreamScope,
              run_id: str, now: datetime, produced: set[str]) -> GroupChange | str:
        """The change a group's plan makes, or why it is rejected (checks 1-2 of
        :mod:`~opencode_memoryd.dream.checks`)."""
        return self._checker.check(group, ops, sc, run_id, now, produced)

    # -- dreaming ------------------------------------------------------------------------

    def dream(self, project_key: str | None, *, project_root: str | None = None,
              trigger: str = "forced", dry_run: bool = False,
              should_stop: Callable[[], bool] = lambda: False,
              apply_lock: AbstractContextManager[Any] | None = None) -> DreamResult:
        """Consolidate one scope: group, plan, check, then apply (unless ``dry_run``).

        Args:
            project_key: the project's key (``project_id`` of its memories), or ``None``
                for the user scope.
            project_root: the project's directory, shown to the planner and journaled.
            trigger: ``auto`` (schedule), ``forced`` (asked for) or ``catch-up`` (missed
                schedule).
            dry_run: plan and check only; the store is not changed. Counts and operations
                are those the dream would apply. The run is recorded with status
                ``planned``.
            should_stop: asked before each group is planned; true ends the dream at once,
                ``failed`` with the reason ``stopped``, nothing changed.
            apply_lock: held while the plan is checked against the store and written
                (not while planning).

        Returns:
            The :class:`~opencode_memoryd.dream.model.DreamResult`: status ``ok``
            (applied, or planned for a dry run), ``skipped`` (fewer than two active
            memories, or no candidate group) or ``failed`` (the store or the state file
            failed; the planner failed for every group planned; or a touched memory
            changed while planning — nothing changed). A failure while writing leaves the
            run ``applying``: :meth:`recover` finishes it.

        Raises:
            ValueError: an unknown trigger.
            StateError: the run cannot be recorded in the state file.
        """
        if trigger not in TRIGGERS:
            raise ValueError(f"trigger must be one of {', '.join(TRIGGERS)}, not {trigger!r}")
        sc = DreamScope.of(project_key, self.user_id)
        run_id = uuid.uuid4().hex[:12]
        started = self.clock()
        t0 = time.perf_counter()
        res = DreamResult(
            run_id=run_id, trigger=trigger, dry_run=dry_run, scope=sc.scope,
            project_key=project_key, project_root=project_root, status="ok", reason=None,
            started_at=iso_utc(started), ended_at=iso_utc(started),
            model="rules" if self.planner is None else None, mode=self.mode,
        )
        self.state.runs.dream_start(run_id, scope_key=sc.key, project_root=project_root,
                                    trigger=trigger, dry_run=dry_run, now=res.started_at)
        try:
            self._begin()
            pending = self.state.runs.dream_runs(statuses=("applying", "undoing"))
            if pending:
                res.status = "failed"
                res.reason = (f"dream run {pending[0]['id']} was interrupted and awaits "
                              "recovery; nothing was changed")
                return self._finish(res, t0, "failed")
            settled: list[str] = []
            plan = self._plan_all(res, sc, started, project_root, settled, should_stop)
            if plan.end == ("failed", STOPPED):
                res.status, res.reason = plan.end
                return self._finish(res, t0, "failed")
            if not dry_run:  # the next dreams of the scope do not plan these again
                self.state.runs.dream_settle(sc.key, settled, run_id, res.started_at)
            if plan.end is not None:  # skipped or failed before anything was planned
                res.status, res.reason = plan.end
                return self._finish(res, t0, "skipped" if plan.end[0] == "skipped" else "failed")
            if dry_run:
                return self._finish(res, t0, "planned")
            if not plan.writes:
                return self._finish(res, t0, "applied")
            with apply_lock or nullcontext():
                return self._apply(res, plan, t0)
        except MemorydError as exc:
            res.status = "failed"
            res.reason = f"{type(exc).__name__}: {redact(str(exc)).text}"
            try:
                return self._finish(res, t0, "failed", expect=("planned",))
            except MemorydError:
                return res

    def _begin(self) -> None:
        """A dream starts: the planner's recorded answers are made ready."""
        if self._asker is not None:
            self._asker.begin()

    def _apply(self, res: DreamResult, plan: Planned, t0: float) -> DreamResult:
        """Apply a checked ``plan`` (its ``before`` and ``writes``) unless a memory it
        touches changed while planning; journaled first, so a failure while writing
        leaves the run ``applying`` for :meth:`recover`.

        Raises:
            MemorydError: the check or the journal record failed (nothing changed).
        """
        changed = self._writer.changed_since(plan.before, plan.writes)
        if changed:
            res.status = "failed"
            res.reason = (f"{changed} memories changed while the dream was "
                          "planning; nothing was changed")
            return self._finish(res, t0, "failed")
        self._writer.record(res, plan.before, plan.writes)
        try:
            self._writer.write(plan.writes)
            return self._finish(res, t0, "applied", expect=("applying",))
        except MemorydError as exc:
            res.status = "failed"
            res.reason = (f"{type(exc).__name__} while applying: {redact(str(exc)).text}; "
                          "the run stays "
                          "'applying' and is completed by recovery")
            log.error("dream_apply_failed", run_id=res.run_id, error=str(exc))
            res.ended_at = iso_utc(self.clock())
            res.duration_ms = (time.perf_counter() - t0) * 1000
            return res

    def _finish(self, res: DreamResult, t0: float, row_status: str,
                expect: tuple[str, ...] = ("planned",)) -> DreamResult:
        res.ended_at = iso_utc(self.clock())
        res.duration_ms = (time.perf_counter() - t0) * 1000
        if row_status == "applied" and self._asker is not None:
            self._asker.forget_used()  # its plans are spent: not needed again
        self.state.runs.dream_finish(res.run_id, row_status, now=res.ended_at, reason=res.reason,
                                     counts=res.counts, model=res.model, tokens_in=res.tokens_in,
                                     tokens_out=res.tokens_out, result=res.to_journal(),
                                     expect=expect)
        log.info("dream_finished", run_id=res.run_id, scope=res.scope,
                 project=res.project_key, status=res.status, row_status=row_status,
                 dry_run=res.dry_run, **res.counts)
        return res

    def _plan_all(self, res: DreamResult, sc: DreamScope, now: datetime,
                  project_root: str | None, settled: list[str],
                  should_stop: Callable[[], bool]) -> Planned:
        """Group, plan and check; fill ``res`` and ``settled`` (the signatures of the
        groups kept whole or rejected by a check). Ends ``("failed", STOPPED)`` as soon as
        ``should_stop()`` is true."""
        # briefs and session summaries are rewritten from their source, never consolidated;
        # the agent's notes are never merged into the user's facts (nor pending ones at all)
        active = [m for m in self.store.scroll(sc.filter())
                  if m.type in FACT_TYPES and m.provenance != "agent"]
        n_before = len(active)
        res.counts = {"before": n_before, "after": n_before, "merged": 0, "superseded": 0,
                      "created": 0, "updated": 0, "kept": n_before, "rejected_plans": 0,
                      "groups": 0, "groups_deferred": 0, "groups_settled": 0}
        if n_before < 2:
            return Planned(end=("skipped", "fewer than two active memories"))
        grouping = self.groups(active, self.state.runs.dream_settled(sc.key))
        res.counts["groups"] = len(grouping.groups)
        res.counts["groups_deferred"] = grouping.deferred
        res.counts["groups_settled"] = grouping.settled
        if not grouping.groups:
            return Planned(end=("skipped", "no candidate groups"))
        loop = GroupLoop(self._asker, self.check, self.settings, res, sc, now, project_root,
                         RetireCap(n_before, self.settings.max_retire_share), settled,
                         should_stop)
        loop.run(grouping.groups)
        if loop.stopped:
            return Planned(end=("failed", STOPPED))
        plan, planner_errors = loop.plan, loop.planner_errors
        c = res.counts
        c["rejected_plans"] = len(res.rejected)
        c["after"] = n_before - c["merged"] - c["superseded"] + c["created"]
        c["kept"] = n_before - c["merged"] - c["superseded"] - c["updated"]
        if planner_errors:
            res.reason = "stopped early: " + planner_errors[0]
            if not res.operations and loop.replies == 0:
                return Planned(end=("failed", "the planner failed: " + planner_errors[0]))
        plan.writes = write_order(loop.after.values())
        return plan

    # -- recovery and undo ---------------------------------------------------------------

    def recover(self) -> list[str]:
        """Finish what a crash interrupted; call at start-up, before any dream starts.

        * ``applying`` runs are rolled forward: every ``after`` payload is upserted again
          (idempotent), then the run is ``applied``;
        * ``undoing`` runs are undone to the end (as :meth:`undo`);
        * ``planned`` runs without ``ended_at`` (a crash while planning; nothing was
          written) become ``failed``.

        Returns:
            The ids of the runs rolled forward or undone to the end, oldest first.

        Raises:
            StoreError, StateError: the store or the state file failed (run again).
        """
        return recover_runs(self._writer, self.state, iso_utc(self.clock()))

    def result_of(self, run_id: str) -> DreamResult | None:
        """The recorded result of a run (as planned or finished), or ``None``."""
        row = self.state.runs.dream_run(run_id)
        if not row or not row.get("result"):
            return None
        return DreamResult.from_journal(row["result"])

    def undo(self, run_id: str) -> DreamResult:
        """Undo an applied dream: write back exactly the ``before`` payloads and delete the
        memories the run created (in ``after``, not in ``before``); the run becomes
        ``undone``. Changes made to those memories after the dream (e.g. provenance merged
        by a later extraction) are discarded with it; the result's reason counts them.

        Returns:
            A :class:`~opencode_memoryd.dream.model.DreamResult` with ``action="undo"``,
            ``status="undone"``, counts ``restored``, ``deleted``, ``before``/``after``
            (active memories of the scope).

        Raises:
            NotFoundError: no run has that id.
            DreamError: the run is a dry run, already undone, not applied (e.g. still
                ``applying``: run :meth:`recover`), or a later applied dream changed the
                same memories (undo that one first).
            StoreError, StateError: the store or state file failed; the run stays
                ``undoing`` and :meth:`recover` (or another ``undo``) completes it.
        """
        return undo_run(self._writer, self.store, self.state, run_id, self.clock,
                        self.user_id)
