"""The records of a dream: its settings, its result and the scope it consolidates."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from opencode_memoryd.models import Scope, scope_key
from opencode_memoryd.store.api import MemoryFilter

#: The accepted values of ``trigger``.
TRIGGERS: tuple[str, ...] = ("auto", "forced", "catch-up")

_SHORT = 80


def short_text(text: str) -> str:
    """``text`` with whitespace folded, cut to 80 characters (the last one ``…`` when cut);
    the form journaled operations show."""
    text = " ".join(text.split())
    return text if len(text) <= _SHORT else text[: _SHORT - 1] + "…"


@dataclass
class DreamSettings:
    """Limits and thresholds of a dream.

    Attributes:
        max_retire_share: no dream retires more than ``floor(share * active memories of
            the scope)`` memories (0 < share <= 1).
        group_similarity: two memories of the same type are candidates for one group (LLM
            mode) when their subject similarity — IDF-weighted overlap coefficient of their
            salient BM25 terms, with at least two shared terms — is at least this.
        near_duplicate_similarity: two memories of the same type are near-duplicates when
            the word similarity of their normalised texts (difflib ratio, as write-time
            dedup) is at least this; they group in both modes, and rules mode collapses
            only those.
        max_group_size: most memories in one group.
        max_groups: most groups one dream plans (more are left for the next dream).
        max_chars: longest merged text, in characters.
        min_coverage: share of a merged memory's salient terms the merged text must keep
            (default 1.0: every one; a merge that cannot keep them all is rejected and the
            memories stay as they are).
        supersede_overlap: share of a superseded memory's salient terms the superseding
            memory must share.
        max_output_tokens: cap on one plan's tokens (LLM mode); 0 = sized to the group
            (:func:`~opencode_memoryd.dream.planning.plan_token_cap`). A plan cut off at
            the cap is asked again with twice the cap, then planned as two smaller groups.

    Raises:
        ValueError: a value out of range.
    """

    max_retire_share: float = 0.3
    group_similarity: float = 0.5
    near_duplicate_similarity: float = 0.85
    max_group_size: int = 8
    max_groups: int = 50
    max_chars: int = 300
    min_coverage: float = 1.0
    supersede_overlap: float = 0.5
    max_output_tokens: int = 0

    def __post_init__(self) -> None:
        if not 0 < self.max_retire_share <= 1:
            raise ValueError("max_retire_share must be in (0, 1]")
        for name in ("group_similarity", "near_duplicate_similarity", "min_coverage",
                     "supersede_overlap"):
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"{name} must be in [0, 1]")
        if self.max_group_size < 2:
            raise ValueError("max_group_size must be at least 2")
        for name in ("max_groups", "max_chars"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive")
        if self.max_output_tokens < 0:
            raise ValueError("max_output_tokens must not be negative")


@dataclass
class DreamResult:
    """What one dream (or one undo) did. JSON-safe through :meth:`to_journal`.

    Attributes:
        run_id: the dream run id (an undo reports the id of the run it undid).
        trigger: ``auto``, ``forced`` or ``catch-up`` (the dream's, for an undo too).
        dry_run: planned and checked only; nothing was changed.
        scope: ``user`` or ``project``.
        project_key: the project's key, ``None`` for the user scope.
        project_root: the project's directory, if known.
        status: ``ok``, ``failed`` or ``skipped`` for a dream; ``undone`` for an undo.
        reason: why it failed or was skipped, or notes (``None`` when there is nothing to
            say).
        started_at, ended_at: ISO 8601 UTC (``…Z``).
        counts: for a dream ``before`` / ``after`` (active memories of the scope before and
            after; for a dry run, after as if applied), ``merged`` (memories retired into a
            merge or a surviving duplicate), ``superseded`` (memories retired as
            superseded), ``created`` (new merged memories), ``updated`` (surviving memories
            rewritten: provenance and lineage added), ``kept`` (active memories left
            untouched), ``rejected_plans`` (groups rejected), ``groups`` (groups found),
            ``groups_deferred`` (groups over ``max_groups``, left for later),
            ``groups_settled`` (groups an earlier dream kept whole or rejected, with no
            member changed since: not planned again). Always
            ``after = before - merged - superseded + created`` and
            ``kept = before - merged - superseded - updated``. For an undo: ``restored``,
            ``deleted``, ``before``, ``after``.
        operations: one dict per operation: ``op`` (``merge``, ``supersede``, ``keep``;
            ``restore``/``delete`` for an undo), ``memory_ids`` (every memory involved),
            ``superseded_ids``, ``new_id`` (the memory holding the facts afterwards: the
            merged memory, the surviving duplicate or the superseding memory; ``None`` for
            keep), ``texts`` (the involved memories' texts, each cut to 80 characters),
            ``new_text`` (the merged text, cut to 80 characters, or ``None``), ``reason``.
        rejected: ``{"group": [ids], "reason": str}`` per rejected group.
        model: the planner's model name, ``"rules"`` in rules mode.
        tokens_in, tokens_out: LLM tokens spent.
        duration_ms: wall time in milliseconds.
        mode: ``llm`` or ``rules``.
        action: ``dream`` or ``undo``.
    """

    run_id: str
    trigger: str
    dry_run: bool
    scope: str
    project_key: str | None
    project_root: str | None
    status: str
    reason: str | None
    started_at: str
    ended_at: str
    counts: dict[str, int] = field(default_factory=dict)
    operations: list[dict[str, Any]] = field(default_factory=list)
    rejected: list[dict[str, Any]] = field(default_factory=list)
    model: str | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    duration_ms: float = 0.0
    mode: str = "rules"
    action: str = "dream"

    def to_journal(self) -> dict[str, Any]:
        """A JSON-safe dict of every field (the dream journal's entry)."""
        d = asdict(self)
        d["duration_ms"] = round(float(self.duration_ms), 1)
        entry: dict[str, Any] = json.loads(json.dumps(d))
        return entry

    @classmethod
    def from_journal(cls, entry: dict[str, Any]) -> DreamResult:
        """Rebuild a result from :meth:`to_journal` output (unknown keys are ignored)."""
        names = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in entry.items() if k in names})


@dataclass(frozen=True)
class DreamScope:
    """The scope one dream consolidates: the user scope, or one project's memories.

    Attributes:
        scope: ``user`` or ``project``.
        project_id: the project's key (``project_id`` of its memories); ``None`` for the
            user scope.
        user_id: whose user scope (``Memory.user_id``); ``None``: every user's. Merged
            user-scope memories are keyed and stamped with it.
    """

    scope: Scope
    project_id: str | None
    user_id: str | None = None

    @classmethod
    def of(cls, project_key: str | None, user_id: str | None = None) -> DreamScope:
        """The user scope (of ``user_id``) for ``None``, else the scope of project
        ``project_key``."""
        if project_key is None:
            return cls("user", None, user_id)
        return cls("project", project_key)

    @property
    def key(self) -> str:
        """The scope's key in the state file (:func:`~opencode_memoryd.models.scope_key`)."""
        return scope_key(self.scope, self.project_id)

    def filter(self, types: tuple[str, ...] = ()) -> MemoryFilter:
        """The store filter of the scope's active memories, of ``types`` only if given."""
        if self.scope == "user":
            return MemoryFilter(scope="user", types=types, user_id=self.user_id)
        return MemoryFilter(project_id=self.project_id, include_user_scope=False,
                            scope="project", types=types)
