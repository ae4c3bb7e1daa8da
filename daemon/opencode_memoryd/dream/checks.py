"""The checks a plan must pass before a dream changes anything, and the change it builds.

Every plan is checked before anything changes (:meth:`PlanChecker.check`,
:class:`RetireCap`); a group whose plan fails a check is rejected — with its reason in
:attr:`~opencode_memoryd.dream.model.DreamResult.rejected` — and the rest of the dream goes
on:

1. **ids**: every id belongs to the group and is used by at most one operation;
2. **fact survival** — every retired memory is covered by a memory that stays active:

   * *merge*: the new text must contain **every identifier** of each merged memory (tokens
     with a digit, a path or URL character ``/ \\ _ @ # + :``, an inner dot, a leading
     ``-``, ``/``, ``~`` or ``.``, an inner capital, or a lowercase word with no vowel
     such as ``npm``/``pnpm``, and anything in backticks: e.g. ``/api/v2``, ``3.9``,
     ``pnpm``, ``--run``, ``PostgreSQL``), compared case-insensitively as whole tokens,
     **and** at least ``min_coverage`` (1.0: all, as the prompt asks "never drop a
     detail") of its salient terms (the stemmed, stopword-free terms of the project's BM25
     tokenizer, :mod:`opencode_memoryd.store.bm25`), so "the metrics worker" cannot be
     merged away into "the webhook worker"; the text is scrubbed
     (:func:`~opencode_memoryd.redaction.engine.scrub`: invisible Unicode out, redacted),
     at most ``max_chars`` characters, and not junk
     (:func:`~opencode_memoryd.extract.llm_extractor.junk_reason`);
   * *rules-mode duplicates*: the surviving memory's text must hold every content word
     and identifier of each duplicate (:func:`~opencode_memoryd.extract.facts.restates`): "The
     metrics worker runs on Python 3.10." is not a duplicate of "The webhook worker runs
     on Python 3.10.", however similar;
   * *supersede*: the superseding memory stays active, is strictly newer (``created_at``)
     than each memory it supersedes, and shares the subject: at least
     ``max(min(2, |T|), ceil(supersede_overlap * |T|))`` of the superseded memory's
     salient terms ``T`` (``supersede_overlap`` 0.5), or says it replaces a term the
     superseded memory states as its choice
     (:func:`~opencode_memoryd.extract.supersede.corrects`). The superseded fact is not lost: it
     was replaced by a newer statement, and stays readable as a tombstone;

3. **cap**: one dream retires at most ``floor(max_retire_share * active memories of the
   scope)`` memories; a group that would go past the cap is rejected ("cap reached"), and
   once the cap is used up no further group is planned.

Accepted changes: a merged memory gets the deterministic id of its text in the scope
(:func:`~opencode_memoryd.models.point_id`; a member with that very text keeps its own id,
which differs for user-scope memories written before user identities), the user identity
and the oldest ``created_at`` of the group, the
union of the provenance (session and message ids) and ``merged_from``; retired memories
become tombstones (``status="retired"``, ``superseded_by``, ``retired_reason``,
``retired_by_run``) — the tombstone pattern of replicated stores (e.g. the deletion markers
of Apache Cassandra): a dream never deletes a memory. Search, listing and counting skip
tombstones (:class:`~opencode_memoryd.store.api.MemoryFilter`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from opencode_memoryd.dream.model import DreamScope, DreamSettings, short_text
from opencode_memoryd.dream.planning import Operation
from opencode_memoryd.dream.terms import SalientTerms
from opencode_memoryd.extract.facts import missing_identifiers, restates
from opencode_memoryd.extract.reply import junk_reason
from opencode_memoryd.extract.supersede import corrects
from opencode_memoryd.models import Memory, content_hash, point_id
from opencode_memoryd.redaction.engine import scrub
from opencode_memoryd.store.api import MemoryStore


@dataclass
class GroupChange:
    """The accepted outcome of one group.

    Attributes:
        before: id -> payload as it is, for every existing memory the change rewrites.
        after: id -> memory to write (survivors, merged memories and tombstones).
        merged, superseded, created, updated: counts as in
            :attr:`~opencode_memoryd.dream.model.DreamResult.counts`.
        operations: the journaled operations of the group.
    """

    before: dict[str, dict[str, Any]] = field(default_factory=dict)
    after: dict[str, Memory] = field(default_factory=dict)
    merged: int = 0
    superseded: int = 0
    created: int = 0
    updated: int = 0
    operations: list[dict[str, Any]] = field(default_factory=list)

    @property
    def retired(self) -> int:
        """Memories this change retires."""
        return self.merged + self.superseded


class RetireCap:
    """Check 3: one dream retires at most ``floor(max_retire_share * active)`` memories.

    Args:
        active: active memories of the scope before the dream.
        share: ``max_retire_share``.
    """

    def __init__(self, active: int, share: float) -> None:
        self.limit = math.floor(share * active)
        self.retired = 0

    def used_up(self) -> str | None:
        """The rejection reason once the cap is used up (no further group is planned)."""
        if self.retired >= self.limit:
            return f"cap reached: {self.retired} of at most {self.limit} retired"
        return None

    def admit(self, change: GroupChange) -> str | None:
        """Count ``change`` against the cap; ``None`` when it fits, else the reason it is
        rejected (nothing counted)."""
        if self.retired + change.retired > self.limit:
            return (f"cap reached: would retire {change.retired}, "
                    f"{self.limit - self.retired} of {self.limit} left")
        self.retired += change.retired
        return None


def ordered_union(*lists: Iterable[str]) -> list[str]:
    """The strings of ``lists`` in first-seen order, each once."""
    return list(dict.fromkeys(x for lst in lists for x in lst))


def retire(m: Memory, by: str, reason: str, run_id: str, now: datetime) -> Memory:
    """The tombstone of ``m``: retired by run ``run_id`` at ``now``, superseded by memory
    ``by`` for ``reason`` (``merged``, ``duplicate`` or ``superseded``)."""
    t = Memory.from_payload(m.to_payload())
    t.status = "retired"
    t.superseded_by = by
    t.retired_reason = reason
    t.retired_by_run = run_id
    t.dream_runs = ordered_union(t.dream_runs, [run_id])
    t.updated_at = now
    return t


def _op_record(o: Operation, members: dict[str, Memory], new_id: str | None,
               new_text: str | None) -> dict[str, Any]:
    ids = ordered_union(o.memory_ids, o.superseded_ids)
    return {
        "op": o.op,
        "memory_ids": ids,
        "superseded_ids": ordered_union(o.superseded_ids),
        "new_id": new_id,
        "texts": [short_text(members[i].content) for i in ids],
        "new_text": short_text(new_text) if new_text else None,
        "reason": o.reason,
    }


@dataclass
class _MergeTarget:
    """Where a merge puts the facts: the text and id of the memory that holds them, and
    that memory as stored (``None`` when new; ``revived`` when it is a tombstone)."""

    content: str
    new_id: str
    existing: Memory | None = None
    revived: bool = False


class PlanChecker:
    """Checks 1 and 2 of the module docstring, and the change an accepted plan makes.

    Args:
        store: the memory store (a merged text may already be a memory there).
        settings: thresholds (``min_coverage``, ``supersede_overlap``, ``max_chars``).
        terms: the salient-term tokenizer.
    """

    def __init__(self, store: MemoryStore, settings: DreamSettings,
                 terms: SalientTerms) -> None:
        self.store = store
        self.settings = settings
        self.terms = terms

    # -- text measures -------------------------------------------------------------------

    def coverage(self, source: str, target: str) -> float:
        """Share of ``source``'s salient terms found in ``target`` (1.0 when ``source``
        has none)."""
        terms = self.terms(source)
        if not terms:
            return 1.0
        return len(terms & self.terms(target)) / len(terms)

    def covers(self, source: str, target: str) -> str | None:
        """``None`` when ``target`` keeps the facts of ``source`` (every identifier and at
        least ``min_coverage`` of its salient terms), else the reason it does not."""
        missing = missing_identifiers(source, target)
        if missing:
            return "drops " + ", ".join(repr(m) for m in missing[:5])
        cov = self.coverage(source, target)
        if cov + 1e-9 < self.settings.min_coverage:
            return (f"keeps {cov:.0%} of the terms of {short_text(source)!r} "
                    f"(needs {self.settings.min_coverage:.0%})")
        return None

    def shares_subject(self, old: str, new: str) -> bool:
        """Whether ``new`` shares the subject of ``old`` (check 2, *supersede*)."""
        t_old = self.terms(old)
        if not t_old:
            return False
        shared = len(t_old & self.terms(new))
        need = max(min(2, len(t_old)), math.ceil(self.settings.supersede_overlap * len(t_old)))
        return shared >= need

    # -- the checks ----------------------------------------------------------------------

    def check(self, group: Sequence[Memory], ops: Sequence[Operation], sc: DreamScope,
              run_id: str, now: datetime, produced: set[str]) -> GroupChange | str:
        """Check a group's plan (checks 1-2) and build its change.

        Args:
            group: the group's memories.
            ops: its plan.
            sc: the scope dreamed.
            run_id: the dream run (recorded in tombstones and lineage).
            now: the dream's time (``updated_at`` of what it writes).
            produced: ids written by groups accepted earlier in this dream.

        Returns:
            The :class:`GroupChange`, or the reason the plan is rejected.
        """
        members = {m.id: m for m in group}
        why = _check_ids(ops, members)
        if why:
            return why
        change = GroupChange()
        for o in ops:
            if o.op == "keep":
                change.operations.append(_op_record(o, members, None, None))
                continue
            if o.op == "supersede":
                why = self._check_supersede(o, members, run_id, now, change)
            else:
                why = self._check_merge(o, members, sc, run_id, now, change, produced)
            if why:
                return f"{o.op}: {why}"
        return change

    def _check_supersede(self, o: Operation, members: dict[str, Memory], run_id: str,
                         now: datetime, change: GroupChange) -> str | None:
        if o.new_content:
            return "new_content must be null"
        old_ids = ordered_union(o.superseded_ids)
        newer = [i for i in ordered_union(o.memory_ids) if i not in old_ids]
        if not old_ids:
            return "no superseded_ids"
        if len(newer) != 1:
            return "needs exactly one superseding memory (memory_ids minus superseded_ids)"
        s = members[newer[0]]
        for i in old_ids:
            old = members[i]
            if not s.created_at > old.created_at:
                return f"{s.id} is not newer than {old.id}"
            if not (self.shares_subject(old.content, s.content)
                    or corrects(s.content, old.content)):
                return (f"{short_text(s.content)!r} does not share the subject of "
                        f"{short_text(old.content)!r}")
        for i in old_ids:
            change.before[i] = members[i].to_payload()
            change.after[i] = retire(members[i], s.id, "superseded", run_id, now)
            change.superseded += 1
        change.operations.append(_op_record(o, members, s.id, None))
        return None

    def _check_merge(self, o: Operation, members: dict[str, Memory], sc: DreamScope,
                     run_id: str, now: datetime, change: GroupChange,
                     produced: set[str]) -> str | None:
        ids = ordered_union(o.memory_ids)
        if len(ids) < 2:
            return "needs at least two memories"
        if any(i not in ids for i in o.superseded_ids):
            return "superseded_ids outside memory_ids"
        group = [members[i] for i in ids]
        target = self._merge_target(o, members, sc, group[0].type)
        if isinstance(target, str):
            return target
        if target.new_id in produced:
            return "the merged text is already written by another group of this dream"
        why = self._merge_loses_a_fact(o, group, target)
        if why:
            return why
        why = self._find_existing(target, members)
        if why:
            return why
        _record_merge(o, members, group, target, run_id, now, change)
        return None

    def _merge_target(self, o: Operation, members: dict[str, Memory], sc: DreamScope,
                      type_: str) -> _MergeTarget | str:
        """The surviving duplicate (rules mode), or the checked new text and its id."""
        if o.survivor is not None:
            base = members[o.survivor]
            return _MergeTarget(content=base.content, new_id=base.id)
        if not o.new_content:
            return "new_content is missing"
        content = " ".join(scrub(o.new_content).text.split())
        if len(content) > self.settings.max_chars:
            return f"new_content is longer than {self.settings.max_chars} characters"
        junk = junk_reason(content)
        if junk:
            return f"new_content is junk ({junk})"
        new_id = point_id(sc.scope, sc.project_id, type_, content, sc.user_id)
        # a member with this very text under an older id (user scope before identities)
        same = [m.id for m in members.values() if m.id != new_id and m.type == type_
                and m.content_hash == content_hash(content)]
        return _MergeTarget(content=content, new_id=same[0] if same and new_id not in members
                            else new_id)

    def _merge_loses_a_fact(self, o: Operation, group: Sequence[Memory],
                            target: _MergeTarget) -> str | None:
        """Check 2 for each merged memory: why the target text does not keep its facts."""
        for m in group:
            if m.id == target.new_id:
                continue
            if o.survivor is not None:  # rules mode: a duplicate adds nothing to the survivor
                if not restates(m.content, target.content):
                    return (f"{short_text(target.content)!r} does not say all that "
                            f"{short_text(m.content)!r} says (memory {m.id})")
                continue
            why = self.covers(m.content, target.content)
            if why:
                return f"the merged text {why} (memory {m.id})"
        return None

    def _find_existing(self, target: _MergeTarget, members: dict[str, Memory]) -> str | None:
        """Fill ``target.existing``/``revived`` from the group or the store; the reason
        to reject when the merged text is an active memory outside the group."""
        target.existing = members.get(target.new_id)
        if target.existing is not None:
            return None
        found = self.store.get([target.new_id])
        if found and found[0].is_active:
            return f"the merged text is memory {target.new_id}, outside the group"
        if found:
            target.existing, target.revived = found[0], True
        return None


def _check_ids(ops: Sequence[Operation], members: dict[str, Memory]) -> str | None:
    """Check 1: every id is a member and is used by at most one operation."""
    used: set[str] = set()
    for o in ops:
        for i in ordered_union(o.memory_ids, o.superseded_ids):
            if i not in members:
                return f"{o.op}: unknown memory id {i[:40]!r}"
            if i in used:
                return f"memory {i} is in more than one operation"
            used.add(i)
    return None


def _merged_memory(o: Operation, group: Sequence[Memory], target: _MergeTarget,
                   retired_ids: Sequence[str], run_id: str, now: datetime) -> Memory:
    """The memory holding the merged facts: the oldest ``created_at``, the newest
    ``said_at`` (valid from the latest statement) and the union of the provenance and
    lineage of the group (and of the tombstone it revives)."""
    existing = target.existing
    lineage = sorted([*group, *([existing] if target.revived and existing else [])],
                     key=lambda m: (m.created_at, m.id))
    oldest = lineage[0]
    return Memory(
        id=target.new_id,
        content=target.content,
        type=group[0].type,
        scope=oldest.scope,
        project_id=oldest.project_id,
        project_root=next((m.project_root for m in lineage if m.project_root), None),
        session_id=oldest.session_id,
        message_ids=ordered_union(*(m.message_ids for m in lineage)),
        source=(existing.source if o.survivor is not None and existing else "llm"),
        created_at=oldest.created_at,
        updated_at=now,
        session_ids=ordered_union(*(m.session_ids or [m.session_id] for m in lineage
                                    if m.session_ids or m.session_id)),
        content_hash=content_hash(target.content),
        merged_from=ordered_union(*(m.merged_from for m in lineage),
                                  existing.merged_from if existing else [], retired_ids),
        dream_runs=ordered_union(*(m.dream_runs for m in lineage), [run_id]),
        user_id=oldest.user_id,
        section=next((m.section for m in lineage if m.section), ""),
        said_at=max((m.said_at for m in lineage if m.said_at), default=None),
    )


def _record_merge(o: Operation, members: dict[str, Memory], group: Sequence[Memory],
                  target: _MergeTarget, run_id: str, now: datetime,
                  change: GroupChange) -> None:
    """Add an accepted merge to ``change``: the merged memory and the tombstones."""
    new_id = target.new_id
    retired_ids = [m.id for m in group if m.id != new_id]
    if target.existing is not None:
        change.before[new_id] = target.existing.to_payload()
        if target.revived:
            change.created += 1
        else:
            change.updated += 1
    else:
        change.created += 1
    change.after[new_id] = _merged_memory(o, group, target, retired_ids, run_id, now)
    reason = "duplicate" if o.survivor is not None else "merged"
    for i in retired_ids:
        change.before[i] = members[i].to_payload()
        change.after[i] = retire(members[i], new_id, reason, run_id, now)
        change.merged += 1
    change.operations.append(_op_record(
        o, members, new_id, None if o.survivor is not None else target.content))
