"""Plan and check the candidate groups of one dream, group by group.

:class:`GroupLoop` asks for each group's plan (the LLM planner, or :func:`rules_plan`),
checks it (:class:`~opencode_memoryd.dream.checks.PlanChecker`) and admits it under the
retire cap (:class:`~opencode_memoryd.dream.checks.RetireCap`). A group is *settled* (not
planned again until a member changes) when its plan kept it whole or was rejected by a
check, never when it was not planned. A plan cut off at the output token cap is asked
again with twice the cap (:func:`~opencode_memoryd.dream.planning.ask_plan`); still cut
off, the group is planned as two halves, and it is settled only when both halves are; a
group too small to halve is rejected, not settled.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import structlog

from opencode_memoryd.dream.checks import GroupChange, RetireCap
from opencode_memoryd.dream.grouping import group_signature
from opencode_memoryd.dream.model import DreamResult, DreamScope, DreamSettings
from opencode_memoryd.dream.planning import Operation, Planner, ask_plan, rules_plan
from opencode_memoryd.errors import ExtractionError, ReplyCutOff, UpstreamError
from opencode_memoryd.llm.model import ChatReplyLike
from opencode_memoryd.models import Memory
from opencode_memoryd.redaction.engine import redact

log = structlog.get_logger(__name__)

#: The plan check: ``(group, operations, scope, run id, now, ids already produced)`` →
#: the change, or why the plan is rejected.
Check = Callable[[Sequence[Memory], Sequence[Operation], DreamScope, str, datetime, set[str]],
                 "GroupChange | str"]

#: The smallest group halved when its plan is cut off (each half keeps two members).
MIN_SPLIT = 4


@dataclass
class Planned:
    """What planning a dream produced: the payloads of the memories it rewrites as they
    are (by id), the memories to write (in
    :func:`~opencode_memoryd.dream.apply.write_order`), and ``(status, reason)`` when the
    dream ends before applying anything."""

    before: dict[str, dict[str, Any]] = field(default_factory=dict)
    writes: list[Memory] = field(default_factory=list)
    end: tuple[str, str] | None = None


def tally(counts: dict[str, int], change: GroupChange) -> None:
    """Add a group's change to the dream's counts."""
    counts["merged"] += change.merged
    counts["superseded"] += change.superseded
    counts["created"] += change.created
    counts["updated"] += change.updated


class GroupLoop:
    """Plans, checks and admits the groups of one dream (see the module docstring).

    Args:
        planner: the LLM planner, or ``None`` for rules mode.
        check: the plan check.
        settings: ``max_chars`` and ``max_output_tokens``.
        res: the dream's result; rejections, operations, counts, model and tokens go here.
        sc: the scope.
        now: the dream's time.
        project_root: shown to the planner.
        cap: the retire cap.
        settled: receives the signatures of the groups settled.
        should_stop: asked before each group; true ends :meth:`run` (``stopped``).

    Attributes:
        plan: the accepted ``before`` payloads (``writes`` are filled by the caller).
        after: the memories to write, by id.
        planner_errors: the planner failures met (the first one stops the loop).
        replies: how many plans the planner answered.
        stopped: :meth:`run` ended early because ``should_stop()`` was true.
    """

    def __init__(self, planner: Planner | None, check: Check, settings: DreamSettings,
                 res: DreamResult, sc: DreamScope, now: datetime, project_root: str | None,
                 cap: RetireCap, settled: list[str],
                 should_stop: Callable[[], bool] = lambda: False) -> None:
        self.planner = planner
        self.check = check
        self.settings = settings
        self.res = res
        self.sc = sc
        self.now = now
        self.project_root = project_root
        self.cap = cap
        self.settled = settled
        self.plan = Planned()
        self.after: dict[str, Memory] = {}
        self.planner_errors: list[str] = []
        self.replies = 0
        self._stop: str | None = None
        self.should_stop = should_stop
        self.stopped = False

    def run(self, groups: Sequence[Sequence[Memory]]) -> None:
        """Consider every group, in order, until ``should_stop()`` is true."""
        for group in groups:
            if self.should_stop():
                self.stopped = True
                return
            self.consider(list(group))

    def _count(self, reply: ChatReplyLike) -> None:
        self.res.model = reply.model
        self.res.tokens_in += reply.tokens_in
        self.res.tokens_out += reply.tokens_out
        self.replies += 1

    def _reject(self, group: Sequence[Memory], reason: str, *, settle: bool) -> None:
        self.res.rejected.append({"group": [m.id for m in group], "reason": reason})
        if settle:
            self.settled.append(group_signature(group))

    def consider(self, group: list[Memory]) -> bool:
        """Plan, check and admit one group; whether it is done (settled or admitted)."""
        refused = self._stop or self.cap.used_up()
        if refused:
            self._reject(group, refused, settle=False)
            return False
        try:
            if self.planner is None:
                ops = rules_plan(group)
            else:
                ops = ask_plan(self.planner, group, project_root=self.project_root,
                               max_chars=self.settings.max_chars,
                               max_tokens=self.settings.max_output_tokens,
                               on_reply=self._count)
        except ReplyCutOff as exc:
            if len(group) < MIN_SPLIT:
                self._reject(group, f"plan cut off: {exc}", settle=False)
                return False
            half = len(group) // 2
            log.info("dream_group_split", members=len(group), reason="plan cut off")
            done = [self.consider(group[:half]), self.consider(group[half:])]
            if all(done):
                self.settled.append(group_signature(group))
            return all(done)
        except UpstreamError as exc:
            self.planner_errors.append(redact(f"{exc.kind}: {exc}").text)
            self._reject(group, f"planner failed: {exc.kind}", settle=False)
            self._stop = f"not planned: the planner failed ({exc.kind})"
            return False
        except ExtractionError as exc:
            self._reject(group, redact(f"bad plan: {exc}").text, settle=True)
            return True
        return self._admit(group, ops)

    def _admit(self, group: list[Memory], ops: list[Operation]) -> bool:
        """Check the planned operations ``ops`` of ``group`` and admit their change into
        the plan; whether the group is done (settled, refused for good, or admitted)."""
        change = self.check(group, ops, self.sc, self.res.run_id, self.now, set(self.after))
        if isinstance(change, str):
            self._reject(group, change, settle=True)
            return True
        if not change.after:
            self.settled.append(group_signature(group))  # kept whole: nothing to do
        over = self.cap.admit(change)
        if over:
            self._reject(group, over, settle=False)
            return False
        self.plan.before.update(change.before)
        self.after.update(change.after)
        self.res.operations.extend(change.operations)
        tally(self.res.counts, change)
        return True
