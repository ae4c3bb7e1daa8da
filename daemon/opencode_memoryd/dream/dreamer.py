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

Accepted changes are applied through a redo log in the state file
(:mod:`opencode_memoryd.dream.apply`): :meth:`Dreamer.recover` rolls a run left
``applying`` forward, and :meth:`Dreamer.undo` writes back what a run changed.

Callers must keep other writers of the scope (extraction) out while a dream applies (the
daemon's per-project lock); a dream refuses to apply when a touched memory changed while
it was planning.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence, Set
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import structlog

from opencode_memoryd.dream.apply import RunWriter, undo_operations, undoable_run, write_order
from opencode_memoryd.dream.checks import GroupChange, PlanChecker, RetireCap
from opencode_memoryd.dream.grouping import Grouping, candidate_groups, group_signature
from opencode_memoryd.dream.model import TRIGGERS, DreamResult, DreamScope, DreamSettings
from opencode_memoryd.dream.planning import Operation, Planner, plan_of, request_plan, rules_plan
from opencode_memoryd.dream.terms import SalientTerms
from opencode_memoryd.errors import DreamError, ExtractionError, MemorydError, UpstreamError
from opencode_memoryd.models import Memory, iso_utc, scope_project
from opencode_memoryd.state.db import StateDB
from opencode_memoryd.store.api import MemoryStore
from opencode_memoryd.store.bm25 import Bm25Encoder

log = structlog.get_logger(__name__)


@dataclass
class _Planned:
    """What planning a dream produced: the payloads of the memories it rewrites as they
    are (by id), the memories to write (in
    :func:`~opencode_memoryd.dream.apply.write_order`), and ``(status, reason)`` when the
    dream ends before applying anything."""

    before: dict[str, dict[str, Any]] = field(default_factory=dict)
    writes: list[Memory] = field(default_factory=list)
    end: tuple[str, str] | None = None


def _tally(counts: dict[str, int], change: GroupChange) -> None:
    counts["merged"] += change.merged
    counts["superseded"] += change.superseded
    counts["created"] += change.created
    counts["updated"] += change.updated


class Dreamer:
    """Plans, checks, applies, recovers and undoes dreams of one store.

    Args:
        store: the memory store.
        state: the state file (``dream_runs`` table).
        planner: a chat model with ``complete_json``
            (:class:`~opencode_memoryd.extract.chat.ChatClient`) for LLM mode, or ``None``
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
              trigger: str = "forced", dry_run: bool = False) -> DreamResult:
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
        self.state.dream_start(run_id, scope_key=sc.key, project_root=project_root,
                               trigger=trigger, dry_run=dry_run, now=res.started_at)
        applying = False
        try:
            pending = self.state.dream_runs(statuses=("applying", "undoing"))
            if pending:
                res.status = "failed"
                res.reason = (f"dream run {pending[0]['id']} was interrupted and awaits "
                              "recovery; nothing was changed")
                return self._finish(res, t0, "failed")
            settled: list[str] = []
            plan = self._plan_all(res, sc, started, project_root, settled)
            if not dry_run:  # the next dreams of the scope do not plan these again
                self.state.dream_settle(sc.key, settled, run_id, res.started_at)
            if plan.end is not None:  # skipped or failed before anything was planned
                res.status, res.reason = plan.end
                return self._finish(res, t0, "skipped" if plan.end[0] == "skipped" else "failed")
            if dry_run:
                return self._finish(res, t0, "planned")
            if not plan.writes:
                return self._finish(res, t0, "applied")
            changed = self._writer.changed_since(plan.before, plan.writes)
            if changed:
                res.status = "failed"
                res.reason = (f"{changed} memories changed while the dream was planning; "
                              "nothing was changed")
                return self._finish(res, t0, "failed")
            self._writer.record(res, plan.before, plan.writes)
            applying = True
            self._writer.write(plan.writes)
            return self._finish(res, t0, "applied", expect=("applying",))
        except MemorydError as exc:
            res.status = "failed"
            if applying:
                res.reason = (f"{type(exc).__name__} while applying: {exc}; the run stays "
                              "'applying' and is completed by recovery")
                log.error("dream_apply_failed", run_id=run_id, error=str(exc))
                res.ended_at = iso_utc(self.clock())
                res.duration_ms = (time.perf_counter() - t0) * 1000
                return res
            res.reason = f"{type(exc).__name__}: {exc}"
            try:
                return self._finish(res, t0, "failed", expect=("planned",))
            except MemorydError:
                return res

    def _finish(self, res: DreamResult, t0: float, row_status: str,
                expect: tuple[str, ...] = ("planned",)) -> DreamResult:
        res.ended_at = iso_utc(self.clock())
        res.duration_ms = (time.perf_counter() - t0) * 1000
        self.state.dream_finish(res.run_id, row_status, now=res.ended_at, reason=res.reason,
                                counts=res.counts, model=res.model, tokens_in=res.tokens_in,
                                tokens_out=res.tokens_out, result=res.to_journal(),
                                expect=expect)
        log.info("dream_finished", run_id=res.run_id, scope=res.scope,
                 project=res.project_key, status=res.status, row_status=row_status,
                 dry_run=res.dry_run, **res.counts)
        return res

    def _plan_all(self, res: DreamResult, sc: DreamScope, now: datetime,
                  project_root: str | None, settled: list[str]) -> _Planned:
        """Group, plan and check; fill ``res`` and ``settled`` (the signatures of the
        groups kept whole or rejected by a check)."""
        active = list(self.store.scroll(sc.filter()))
        n_before = len(active)
        res.counts = {"before": n_before, "after": n_before, "merged": 0, "superseded": 0,
                      "created": 0, "updated": 0, "kept": n_before, "rejected_plans": 0,
                      "groups": 0, "groups_deferred": 0, "groups_settled": 0}
        if n_before < 2:
            return _Planned(end=("skipped", "fewer than two active memories"))
        grouping = self.groups(active, self.state.dream_settled(sc.key))
        res.counts["groups"] = len(grouping.groups)
        res.counts["groups_deferred"] = grouping.deferred
        res.counts["groups_settled"] = grouping.settled
        if not grouping.groups:
            return _Planned(end=("skipped", "no candidate groups"))
        cap = RetireCap(n_before, self.settings.max_retire_share)
        plan = _Planned()
        after: dict[str, Memory] = {}
        planner_errors: list[str] = []
        replies = 0
        stop: str | None = None
        for group in grouping.groups:
            ids = [m.id for m in group]
            refused = stop or cap.used_up()
            if refused:
                res.rejected.append({"group": ids, "reason": refused})
                continue
            try:
                if self.planner is None:
                    ops = rules_plan(group)
                else:
                    reply = request_plan(self.planner, group, project_root=project_root,
                                         max_chars=self.settings.max_chars)
                    res.model = reply.model
                    res.tokens_in += reply.tokens_in
                    res.tokens_out += reply.tokens_out
                    replies += 1
                    ops = plan_of(reply)
            except UpstreamError as exc:
                planner_errors.append(f"{exc.kind}: {exc}")
                res.rejected.append({"group": ids, "reason": f"planner failed: {exc.kind}"})
                stop = f"not planned: the planner failed ({exc.kind})"
                continue
            except ExtractionError as exc:
                res.rejected.append({"group": ids, "reason": f"bad plan: {exc}"})
                settled.append(group_signature(group))
                continue
            change = self.check(group, ops, sc, res.run_id, now, set(after))
            if isinstance(change, str):
                res.rejected.append({"group": ids, "reason": change})
                settled.append(group_signature(group))
                continue
            if not change.after:
                settled.append(group_signature(group))  # kept whole: nothing to do
            over = cap.admit(change)
            if over:
                res.rejected.append({"group": ids, "reason": over})
                continue
            plan.before.update(change.before)
            after.update(change.after)
            res.operations.extend(change.operations)
            _tally(res.counts, change)
        c = res.counts
        c["rejected_plans"] = len(res.rejected)
        c["after"] = n_before - c["merged"] - c["superseded"] + c["created"]
        c["kept"] = n_before - c["merged"] - c["superseded"] - c["updated"]
        if planner_errors:
            res.reason = "stopped early: " + planner_errors[0]
            if not res.operations and replies == 0:
                return _Planned(end=("failed", "the planner failed: " + planner_errors[0]))
        plan.writes = write_order(after.values())
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
        done: list[str] = []
        now = iso_utc(self.clock())
        for row in self.state.dream_runs(statuses=("planned", "applying", "undoing"),
                                         newest_first=False):
            rid = row["id"]
            if row["status"] == "planned":
                if row["ended_at"] is None:
                    self.state.dream_finish(rid, "failed", now=now, expect=("planned",),
                                            reason="interrupted while planning; nothing "
                                                   "was changed")
                continue
            if row["status"] == "applying":
                writes = self._writer.roll_forward(row, now)
                log.warning("dream_rolled_forward", run_id=rid, writes=writes)
            else:
                self._writer.restore(row)
                self.state.dream_mark_undo(rid, "undone", now, expect=("undoing",))
                log.warning("dream_undo_completed", run_id=rid)
            done.append(rid)
        return done

    def result_of(self, run_id: str) -> DreamResult | None:
        """The recorded result of a run (as planned or finished), or ``None``."""
        row = self.state.dream_run(run_id)
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
            DreamError: the run is unknown, a dry run, already undone, not applied (e.g.
                still ``applying``: run :meth:`recover`), or a later applied dream changed
                the same memories (undo that one first).
            StoreError, StateError: the store or state file failed; the run stays
                ``undoing`` and :meth:`recover` (or another ``undo``) completes it.
        """
        row = undoable_run(self.state, run_id)
        started = self.clock()
        t0 = time.perf_counter()
        if row["status"] == "applied" and not self.state.dream_mark_undo(
                run_id, "undoing", iso_utc(started), expect=("applied",)):
            raise DreamError(f"dream run {run_id} changed status meanwhile; try again")
        sc = DreamScope.of(scope_project(row["scope_key"]), self.user_id)
        drifted = self._writer.drifted(row)
        n_before = self.store.count(sc.filter())
        restored, deleted = self._writer.restore(row)
        ended = self.clock()
        self.state.dream_mark_undo(run_id, "undone", iso_utc(ended), expect=("undoing",))
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
                    "after": self.store.count(sc.filter())},
            operations=undo_operations(row, deleted),
            model=prior.get("model"), mode=prior.get("mode", "rules"), action="undo",
            duration_ms=(time.perf_counter() - t0) * 1000,
        )
        log.info("dream_undone", run_id=run_id, restored=restored, deleted=len(deleted),
                 drifted=drifted)
        return res
