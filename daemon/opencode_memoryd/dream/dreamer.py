"""Dreams: consolidation of one scope of the memory store that never loses a fact.

A *dream* looks at the active memories of one scope (the user scope, or one project),
finds groups of memories that say the same thing or talk about the same subject, and
consolidates each group:

* **rules mode** (no LLM): exact and near-exact duplicates (word similarity at least
  ``near_duplicate_similarity``, same type and scope, and one says all the other says:
  every content word and identifier, :func:`~opencode_memoryd.extract.facts.restates`) collapse
  into the member that restates the most others (the oldest on a tie);
* **LLM mode**: a chat model proposes, per group, a plan of ``merge`` (one new memory
  holding the facts of several), ``supersede`` (a newer memory replaces older ones on the
  same subject) and ``keep`` operations (:data:`PLAN_SCHEMA`).

Every plan is checked before anything changes (:meth:`Dreamer.dream`); a group whose plan
fails a check is rejected — with its reason in :attr:`DreamResult.rejected` — and the rest
of the dream goes on:

1. **ids**: every id belongs to the group and is used by at most one operation;
2. **fact survival** — every retired memory is covered by a memory that stays active:

   * *merge*: the new text must contain **every identifier** of each merged memory (tokens
     with a digit, a path or URL character ``/ \\ _ @ # + :``, an inner dot, a leading
     ``-``, ``/``, ``~`` or ``.``, an inner capital, or a lowercase word with no vowel
     such as ``npm``/``pnpm``, and anything in backticks: e.g. ``/api/v2``, ``3.9``,
     ``pnpm``, ``--run``, ``PostgreSQL``), compared case-insensitively as whole tokens,
     **and** at least ``min_coverage`` (1.0: all, as the prompt asks "never drop a
     detail") of its salient terms (the stemmed, stopword-free terms of the project's BM25
     tokenizer, :mod:`opencode_memoryd.store.bm25`), so "the metrics worker" cannot be merged
     away into "the webhook worker";
     the text is redacted (:func:`~opencode_memoryd.redaction.engine.redact`), at most
     ``max_chars`` characters, and not junk (:func:`~opencode_memoryd.extract.reply.junk_reason`);
   * *rules-mode duplicates*: the surviving memory's text must hold every content word
     and identifier of each duplicate (:func:`~opencode_memoryd.extract.facts.restates`): "The
     metrics worker runs on Python 3.10." is not a duplicate of "The webhook worker runs
     on Python 3.10.", however similar;
   * *supersede*: the superseding memory stays active, is strictly newer (``created_at``)
     than each memory it supersedes, and shares the subject: at least
     ``max(min(2, |T|), ceil(supersede_overlap × |T|))`` of the superseded memory's
     salient terms ``T`` (``supersede_overlap`` 0.5). The superseded fact is not lost: it
     was replaced by a newer statement, and stays readable as a tombstone;

3. **cap**: one dream retires at most ``floor(max_retire_share × active memories of the
   scope)`` memories; a group that would go past the cap is rejected ("cap reached"), and
   once the cap is used up no further group is planned.

Accepted changes: a merged memory gets the deterministic id of its text in the scope
(:func:`~opencode_memoryd.models.point_id`), the oldest ``created_at`` of the group, the
union of the provenance (session and message ids) and ``merged_from``; retired memories
become tombstones (``status="retired"``, ``superseded_by``, ``retired_reason``,
``retired_by_run``) — the tombstone pattern of replicated stores (e.g. the deletion markers
of Apache Cassandra): a dream never deletes a memory. Search, listing and counting skip
tombstones (:class:`~opencode_memoryd.store.api.MemoryFilter`).

Crash safety (redo log, as in write-ahead logging: Mohan et al., "ARIES", ACM TODS 1992,
reduced to whole-record redo of idempotent upserts): a dream is one ``dream_runs`` row of the
state file (:class:`~opencode_memoryd.state.db.StateDB`). Applying = (1) record the payloads of
every touched memory as they are (``before``) and as they will be (``after``), status
``applying``, one durable transaction; (2) upsert every ``after`` payload in batches
(survivors and merged memories first, tombstones last, so a fact is never hidden mid-way);
(3) status ``applied``. :meth:`Dreamer.recover` rolls a run left ``applying`` forward.
:meth:`Dreamer.undo` writes ``before`` back and deletes the memories the run created.

Callers must keep other writers of the scope (extraction) out while a dream applies (the
daemon's per-project lock); a dream refuses to apply when a touched memory changed while
it was planning.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import re
import signal
import time
import uuid
from collections.abc import Callable, Iterable, Sequence, Set
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from importlib import resources
from string import Template
from typing import Any, Protocol

import structlog

from opencode_memoryd.errors import DreamError, ExtractionError, MemorydError, UpstreamError
from opencode_memoryd.extract.facts import (
    identifiers,
    missing_identifiers,
    restates,
    similarity,
)
from opencode_memoryd.extract.llm_extractor import ChatReplyLike
from opencode_memoryd.extract.reply import junk_reason, load_json_list
from opencode_memoryd.models import (
    Memory,
    content_hash,
    iso_utc,
    normalize_text,
    point_id,
    scope_key,
    scope_project,
)
from opencode_memoryd.redaction.engine import redact
from opencode_memoryd.state.db import StateDB
from opencode_memoryd.store.api import MemoryFilter, MemoryStore
from opencode_memoryd.store.bm25 import Bm25Encoder, default_encoder

log = structlog.get_logger(__name__)

#: The accepted values of ``trigger``.
TRIGGERS: tuple[str, ...] = ("auto", "forced", "catch-up")
#: The schema name sent with ``json_schema`` mode.
SCHEMA_NAME = "dream_plan"
#: Environment variable naming a fault point (crash tests), as in :mod:`pipeline`.
FAULT_ENV = "OPENCODE_MEMORYD_FAULT"
#: The fault point in the middle of applying a dream.
FAULT_MID_APPLY = "dream_mid_apply"
#: Memories per store upsert while applying a dream (each upsert is flushed to disk).
WRITE_BATCH = 256

#: Strict-mode compatible JSON schema of a plan.
PLAN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "operations": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "op": {"type": "string", "enum": ["merge", "supersede", "keep"]},
                    "memory_ids": {"type": "array", "items": {"type": "string"}},
                    "new_content": {"type": ["string", "null"]},
                    "superseded_ids": {"type": "array", "items": {"type": "string"}},
                    "reason": {"type": "string"},
                },
                "required": ["op", "memory_ids", "new_content", "superseded_ids", "reason"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["operations"],
    "additionalProperties": False,
}

_SHORT = 80
_REASON_CHARS = 200
_DELIMITER = re.compile(r"<(/?memories)", re.IGNORECASE)




class Planner(Protocol):
    """A chat endpoint that answers JSON (``llm.ChatClient``)."""

    def complete_json(
        self, *, system: str, user: str, schema: dict[str, Any], schema_name: str
    ) -> ChatReplyLike: ...


@dataclass
class DreamSettings:
    """Limits and thresholds of a dream.

    Attributes:
        max_retire_share: no dream retires more than ``floor(share × active memories of
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
        all_pairs_limit: types with at most this many memories are compared pairwise;
            larger ones take their candidate pairs from ``store.search``.
        search_limit: hits per ``store.search`` when looking for candidates.

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
    all_pairs_limit: int = 200
    search_limit: int = 10

    def __post_init__(self) -> None:
        if not 0 < self.max_retire_share <= 1:
            raise ValueError("max_retire_share must be in (0, 1]")
        for name in ("group_similarity", "near_duplicate_similarity", "min_coverage",
                     "supersede_overlap"):
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"{name} must be in [0, 1]")
        if self.max_group_size < 2:
            raise ValueError("max_group_size must be at least 2")
        for name in ("max_groups", "max_chars", "search_limit"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive")
        if self.all_pairs_limit < 0:
            raise ValueError("all_pairs_limit must not be negative")


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
        return json.loads(json.dumps(d))

    @classmethod
    def from_journal(cls, entry: dict[str, Any]) -> DreamResult:
        """Rebuild a result from :meth:`to_journal` output (unknown keys are ignored)."""
        names = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in entry.items() if k in names})


def group_signature(group: Sequence[Memory]) -> str:
    """A candidate group's identity: SHA-256 (hex, 32 chars) of its members' sorted
    ``id:content_hash``. Any change of a member's text, or another member, changes it."""
    keys = sorted(f"{m.id}:{m.content_hash or content_hash(m.content)}" for m in group)
    return hashlib.sha256("\n".join(keys).encode()).hexdigest()[:32]


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _SHORT else text[: _SHORT - 1] + "…"


@functools.cache
def _prompt_file(name: str) -> str:
    return resources.files("opencode_memoryd.dream").joinpath("prompts", name).read_text("utf-8")


def render_memories(memories: Sequence[Memory]) -> str:
    """The memory block of the prompt: ``[id] (type, created_at) content`` per line.

    Line breaks inside a text are folded to spaces and ``<memories>`` tags are escaped
    (``&lt;memories>``), so a text can neither pose as another memory nor close the block.
    """
    out = []
    for m in memories:
        text = _DELIMITER.sub(r"&lt;\1", " ".join(m.content.split()))
        out.append(f"[{m.id}] ({m.type}, {iso_utc(m.created_at)}) {text}")
    return "\n".join(out)


def build_prompt(group: Sequence[Memory], *, project_root: str | None,
                 max_chars: int) -> tuple[str, str]:
    """Return ``(system, user)`` prompts for one group (``prompts/dream_system.md`` and
    ``prompts/dream_user.md``)."""
    system = _prompt_file("dream_system.md").strip()
    first = group[0]
    user = Template(_prompt_file("dream_user.md")).substitute(
        scope=first.scope,
        type=first.type,
        project_root=project_root or first.project_root or "none",
        max_chars=max_chars,
        memories=render_memories(group),
    )
    return system, user.strip()


@dataclass
class _Op:
    op: str
    memory_ids: list[str]
    new_content: str | None
    superseded_ids: list[str]
    reason: str
    survivor: str | None = None  # rules mode: the oldest duplicate survives as it is


def parse_plan(content: str) -> list[_Op]:
    """Parse the model's answer (JSON, optionally in a Markdown fence) into operations.

    Raises:
        ExtractionError: not JSON, or not of the shape of :data:`PLAN_SCHEMA`.
    """
    items = load_json_list(content, "operations", "the plan")
    ops = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise ExtractionError(f"operation {i} is not an object")
        op = item.get("op")
        if op not in ("merge", "supersede", "keep"):
            raise ExtractionError(f"operation {i}: unknown op {str(op)[:20]!r}")
        ids = item.get("memory_ids")
        sup = item.get("superseded_ids") or []
        new = item.get("new_content")
        reason = item.get("reason") or ""
        if not isinstance(ids, list) or not all(isinstance(x, str) for x in ids):
            raise ExtractionError(f"operation {i}: memory_ids is not a list of strings")
        if not isinstance(sup, list) or not all(isinstance(x, str) for x in sup):
            raise ExtractionError(f"operation {i}: superseded_ids is not a list of strings")
        if new is not None and not isinstance(new, str):
            raise ExtractionError(f"operation {i}: new_content is not a string or null")
        ops.append(_Op(op=op, memory_ids=[x.strip() for x in ids],
                       new_content=new if new and new.strip() else None,
                       superseded_ids=[x.strip() for x in sup],
                       reason=" ".join(str(reason).split())[:_REASON_CHARS]))
    return ops


# --------------------------------------------------------------------------- grouping


class _UnionFind:
    """Disjoint sets with union by size and path halving (Galler & Fischer 1964; Tarjan,
    "Efficiency of a Good But Not Linear Set Union Algorithm", JACM 1975). ``union``
    refuses a merge whose set would exceed ``cap`` members."""

    def __init__(self, items: Iterable[str], cap: int) -> None:
        self.parent = {x: x for x in items}
        self.size = dict.fromkeys(self.parent, 1)
        self.cap = cap

    def find(self, x: str) -> str:
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: str, b: str) -> bool:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return True
        if self.size[ra] + self.size[rb] > self.cap:
            return False
        if self.size[ra] < self.size[rb]:
            ra, rb = rb, ra
        self.parent[rb] = ra
        self.size[ra] += self.size[rb]
        return True


@dataclass(frozen=True)
class _Scope:
    scope: str
    project_id: str | None

    @property
    def key(self) -> str:
        return scope_key(self.scope, self.project_id)  # type: ignore[arg-type]

    def filter(self, types: tuple[str, ...] = ()) -> MemoryFilter:
        if self.scope == "user":
            return MemoryFilter(scope="user", types=types)
        return MemoryFilter(project_id=self.project_id, include_user_scope=False,
                            scope="project", types=types)


@dataclass
class _Change:
    """The accepted outcome of one group."""

    before: dict[str, dict[str, Any]]  # id -> payload as it is (existing memories only)
    after: dict[str, Memory]  # id -> memory to write
    merged: int = 0
    superseded: int = 0
    created: int = 0
    updated: int = 0
    operations: list[dict[str, Any]] = field(default_factory=list)

    @property
    def retired(self) -> int:
        return self.merged + self.superseded


def _fault_point(name: str) -> None:
    """Die here, as by ``kill -9``, when ``OPENCODE_MEMORYD_FAULT`` names this point (crash
    tests; no cleanup runs, exactly as with a real SIGKILL)."""
    if os.environ.get(FAULT_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)


def _union(*lists: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(x for lst in lists for x in lst))


# --------------------------------------------------------------------------- the dreamer


class Dreamer:
    """Plans, checks, applies, recovers and undoes dreams of one store.

    Args:
        store: the memory store.
        state: the state file (``dream_runs`` table).
        planner: a chat model with ``complete_json`` (``llm.ChatClient``) for LLM mode, or
            ``None`` for rules mode.
        settings: thresholds and caps.
        clock: returns the current aware UTC time.
        bm25: the tokenizer of salient terms (default: the shared default encoder, the
            tokenizer the store indexes with).

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
    ) -> None:
        self.store = store
        self.state = state
        self.planner = planner
        self.settings = settings or DreamSettings()
        self.clock = clock
        self._bm25 = bm25 or default_encoder()
        self._term_cache: dict[str, frozenset[int]] = {}

    @property
    def mode(self) -> str:
        """``llm`` with a planner, else ``rules``."""
        return "rules" if self.planner is None else "llm"

    # -- text measures -------------------------------------------------------------------

    def _terms(self, text: str) -> frozenset[int]:
        """Salient terms: stemmed, stopword-free BM25 token ids of ``text``."""
        got = self._term_cache.get(text)
        if got is None:
            if len(self._term_cache) >= 8192:
                self._term_cache.clear()
            got = self._term_cache[text] = frozenset(self._bm25.embed_query(text).indices)
        return got

    def coverage(self, source: str, target: str) -> float:
        """Share of ``source``'s salient terms found in ``target`` (1.0 when ``source``
        has none)."""
        terms = self._terms(source)
        if not terms:
            return 1.0
        return len(terms & self._terms(target)) / len(terms)

    def covers(self, source: str, target: str) -> str | None:
        """``None`` when ``target`` keeps the facts of ``source`` (every identifier and at
        least ``min_coverage`` of its salient terms), else the reason it does not."""
        missing = missing_identifiers(source, target)
        if missing:
            return "drops " + ", ".join(repr(m) for m in missing[:5])
        cov = self.coverage(source, target)
        if cov + 1e-9 < self.settings.min_coverage:
            return (f"keeps {cov:.0%} of the terms of {_short(source)!r} "
                    f"(needs {self.settings.min_coverage:.0%})")
        return None

    def shares_subject(self, old: str, new: str) -> bool:
        """Whether ``new`` shares the subject of ``old`` (see the module docstring)."""
        t_old = self._terms(old)
        if not t_old:
            return False
        shared = len(t_old & self._terms(new))
        need = max(min(2, len(t_old)), math.ceil(self.settings.supersede_overlap * len(t_old)))
        return shared >= need

    # -- grouping ------------------------------------------------------------------------

    def groups(self, active: Sequence[Memory], sc: _Scope,
               settled: Set[str] = frozenset()) -> tuple[list[list[Memory]], int, int]:
        """Candidate groups of the scope's active memories, how many were deferred, and
        how many were left out as settled (their :func:`group_signature` is in
        ``settled``: an earlier dream planned them "keep" or rejected their plan, and no
        member changed since).

        Edges: same type, and either near-duplicate text (both modes) or, in LLM mode,
        subject similarity at least ``group_similarity`` (see :class:`DreamSettings`).
        Edges join in decreasing similarity (Kruskal's order) into union-find sets capped
        at ``max_group_size``. Groups of two or more, members oldest first, groups ordered
        by their oldest member; the first ``max_groups`` are returned.
        """
        s = self.settings
        by_id = {m.id: m for m in active}
        norm = {m.id: normalize_text(m.content) for m in active}
        terms = {m.id: self._terms(m.content) for m in active}
        df: dict[int, int] = {}
        for ts in terms.values():
            for t in ts:
                df[t] = df.get(t, 0) + 1
        n = max(len(active), 1)
        weight = {t: math.log(1 + n / d) for t, d in df.items()}

        by_type: dict[str, list[Memory]] = {}
        for m in active:
            by_type.setdefault(m.type, []).append(m)
        pairs: set[tuple[str, str]] = set()
        for type_, ms in by_type.items():
            if len(ms) <= s.all_pairs_limit:
                for i, a in enumerate(ms):
                    for b in ms[i + 1:]:
                        pairs.add((min(a.id, b.id), max(a.id, b.id)))
                continue
            buckets: dict[str, list[str]] = {}
            for m in ms:
                buckets.setdefault(content_hash(m.content), []).append(m.id)
            for ids in buckets.values():
                for i, a in enumerate(ids):
                    for b in ids[i + 1:]:
                        pairs.add((min(a, b), max(a, b)))
            flt = sc.filter((type_,))
            for m in ms:
                for hit, _score in self.store.search(m.content, flt=flt,
                                                     limit=s.search_limit):
                    if hit.id != m.id and hit.id in by_id and by_id[hit.id].type == type_:
                        pairs.add((min(m.id, hit.id), max(m.id, hit.id)))

        edges: list[tuple[float, str, str]] = []
        for a, b in pairs:
            text_sim = 1.0 if norm[a] == norm[b] else similarity(norm[a], norm[b])
            if text_sim >= s.near_duplicate_similarity:
                # rules mode: only texts one of which says all the other says
                ta, tb = by_id[a].content, by_id[b].content
                if self.planner is not None or restates(ta, tb) or restates(tb, ta):
                    edges.append((1.0 + text_sim, a, b))  # near-duplicates join first
                continue
            if self.planner is None:
                continue
            shared = terms[a] & terms[b]
            if len(shared) < 2:
                continue
            wa = sum(weight[t] for t in terms[a])
            wb = sum(weight[t] for t in terms[b])
            subject = sum(weight[t] for t in shared) / min(wa, wb)
            if subject >= s.group_similarity:
                edges.append((max(subject, text_sim), a, b))
        edges.sort(key=lambda e: (-e[0], e[1], e[2]))
        uf = _UnionFind(by_id, s.max_group_size)
        for _score, a, b in edges:
            uf.union(a, b)
        sets: dict[str, list[Memory]] = {}
        for m in active:
            sets.setdefault(uf.find(m.id), []).append(m)
        groups = [sorted(g, key=lambda m: (m.created_at, m.id))
                  for g in sets.values() if len(g) >= 2]
        fresh = [g for g in groups if group_signature(g) not in settled]
        fresh.sort(key=lambda g: (g[0].created_at, g[0].id))
        return (fresh[: s.max_groups], max(0, len(fresh) - s.max_groups),
                len(groups) - len(fresh))

    # -- planning ------------------------------------------------------------------------

    def _rules_plan(self, group: Sequence[Memory]) -> list[_Op]:
        """Collapse the members one member restates (every content word and identifier)
        into it: the member that restates the most others, the oldest on a tie. The rest
        are kept; a group where no member restates another is kept whole."""
        best: tuple[Memory, list[str]] | None = None
        for cand in sorted(group, key=lambda m: (m.created_at, m.id)):
            covered = [m.id for m in group
                       if m.id != cand.id and restates(m.content, cand.content)]
            if best is None or len(covered) > len(best[1]):
                best = (cand, covered)
        assert best is not None
        survivor, covered = best
        rest = [m.id for m in group if m.id != survivor.id and m.id not in covered]
        ops = []
        if covered:
            ops.append(_Op(op="merge", memory_ids=[survivor.id, *covered], new_content=None,
                           superseded_ids=[], reason="duplicate", survivor=survivor.id))
        else:
            rest.insert(0, survivor.id)
        if rest:
            ops.append(_Op(op="keep", memory_ids=rest, new_content=None, superseded_ids=[],
                           reason="says more than the others"))
        return ops

    def _ask(self, group: Sequence[Memory], project_root: str | None) -> ChatReplyLike:
        assert self.planner is not None
        system, user = build_prompt(group, project_root=project_root,
                                    max_chars=self.settings.max_chars)
        return self.planner.complete_json(system=system, user=user, schema=PLAN_SCHEMA,
                                          schema_name=SCHEMA_NAME)

    @staticmethod
    def _parse(reply: ChatReplyLike) -> list[_Op]:
        try:
            return parse_plan(reply.content)
        except ExtractionError as exc:
            if reply.finish_reason == "length":
                raise ExtractionError(f"{exc}; the answer was cut off (finish_reason=length)"
                                      ) from exc
            raise

    def check(self, group: Sequence[Memory], ops: Sequence[_Op], sc: _Scope, run_id: str,
              now: datetime, produced: set[str]) -> _Change | str:
        """Check a group's plan (module docstring, checks 1-2) and build its change.

        Args:
            produced: ids written by groups accepted earlier in this dream.

        Returns:
            The :class:`_Change`, or the reason the plan is rejected.
        """
        members = {m.id: m for m in group}
        used: set[str] = set()
        for o in ops:
            for i in _union(o.memory_ids, o.superseded_ids):
                if i not in members:
                    return f"{o.op}: unknown memory id {i[:40]!r}"
                if i in used:
                    return f"memory {i} is in more than one operation"
                used.add(i)
        change = _Change(before={}, after={})
        for o in ops:
            if o.op == "keep":
                change.operations.append(self._op_record(o, members, None, None))
                continue
            if o.op == "supersede":
                why = self._check_supersede(o, members, run_id, now, change)
            else:
                why = self._check_merge(o, members, sc, run_id, now, change, produced)
            if why:
                return f"{o.op}: {why}"
        return change

    def _retire(self, m: Memory, by: str, reason: str, run_id: str, now: datetime) -> Memory:
        t = Memory.from_payload(m.to_payload())
        t.status = "retired"
        t.superseded_by = by
        t.retired_reason = reason
        t.retired_by_run = run_id
        t.dream_runs = _union(t.dream_runs, [run_id])
        t.updated_at = now
        return t

    def _check_supersede(self, o: _Op, members: dict[str, Memory], run_id: str,
                         now: datetime, change: _Change) -> str | None:
        if o.new_content:
            return "new_content must be null"
        old_ids = _union(o.superseded_ids)
        newer = [i for i in _union(o.memory_ids) if i not in old_ids]
        if not old_ids:
            return "no superseded_ids"
        if len(newer) != 1:
            return "needs exactly one superseding memory (memory_ids minus superseded_ids)"
        s = members[newer[0]]
        for i in old_ids:
            old = members[i]
            if not s.created_at > old.created_at:
                return f"{s.id} is not newer than {old.id}"
            if not self.shares_subject(old.content, s.content):
                return f"{_short(s.content)!r} does not share the subject of " \
                       f"{_short(old.content)!r}"
        for i in old_ids:
            change.before[i] = members[i].to_payload()
            change.after[i] = self._retire(members[i], s.id, "superseded", run_id, now)
            change.superseded += 1
        change.operations.append(self._op_record(o, members, s.id, None))
        return None

    def _check_merge(self, o: _Op, members: dict[str, Memory], sc: _Scope, run_id: str,
                     now: datetime, change: _Change, produced: set[str]) -> str | None:
        ids = _union(o.memory_ids)
        if len(ids) < 2:
            return "needs at least two memories"
        if any(i not in ids for i in o.superseded_ids):
            return "superseded_ids outside memory_ids"
        group = [members[i] for i in ids]
        type_ = group[0].type
        if o.survivor is not None:
            base = members[o.survivor]
            content = base.content
            new_id = base.id
        else:
            if not o.new_content:
                return "new_content is missing"
            content = " ".join(redact(o.new_content).text.split())
            if len(content) > self.settings.max_chars:
                return f"new_content is longer than {self.settings.max_chars} characters"
            junk = junk_reason(content)
            if junk:
                return f"new_content is junk ({junk})"
            new_id = point_id(sc.scope, sc.project_id, type_, content)  # type: ignore[arg-type]
        if new_id in produced:
            return "the merged text is already written by another group of this dream"
        for m in group:
            if m.id == new_id:
                continue
            if o.survivor is not None:  # rules mode: a duplicate adds nothing to the survivor
                if not restates(m.content, content):
                    return (f"{_short(content)!r} does not say all that "
                            f"{_short(m.content)!r} says (memory {m.id})")
                continue
            why = self.covers(m.content, content)
            if why:
                return f"the merged text {why} (memory {m.id})"
        existing: Memory | None = members.get(new_id)
        revived = False
        if existing is None:
            found = self.store.get([new_id])
            if found and found[0].is_active:
                return f"the merged text is memory {new_id}, outside the group"
            if found:
                existing, revived = found[0], True
        retired_ids = [m.id for m in group if m.id != new_id]
        # a tombstone of the merged text (revived) adds its own provenance
        lineage = sorted([*group, *([existing] if revived and existing else [])],
                         key=lambda m: (m.created_at, m.id))
        oldest = lineage[0]
        merged = Memory(
            id=new_id,
            content=content,
            type=type_,
            scope=oldest.scope,
            project_id=oldest.project_id,
            project_root=next((m.project_root for m in lineage if m.project_root), None),
            session_id=oldest.session_id,
            message_ids=_union(*(m.message_ids for m in lineage)),
            source=(existing.source if o.survivor is not None and existing else "llm"),
            created_at=oldest.created_at,
            updated_at=now,
            session_ids=_union(*(m.session_ids or [m.session_id] for m in lineage)),
            content_hash=content_hash(content),
            merged_from=_union(*(m.merged_from for m in lineage),
                               existing.merged_from if existing else [], retired_ids),
            dream_runs=_union(*(m.dream_runs for m in lineage), [run_id]),
        )
        if existing is not None:
            change.before[new_id] = existing.to_payload()
            if revived:
                change.created += 1
            else:
                change.updated += 1
        else:
            change.created += 1
        change.after[new_id] = merged
        reason = "duplicate" if o.survivor is not None else "merged"
        for i in retired_ids:
            change.before[i] = members[i].to_payload()
            change.after[i] = self._retire(members[i], new_id, reason, run_id, now)
            change.merged += 1
        change.operations.append(self._op_record(
            o, members, new_id, None if o.survivor is not None else content))
        return None

    def _op_record(self, o: _Op, members: dict[str, Memory], new_id: str | None,
                   new_text: str | None) -> dict[str, Any]:
        ids = _union(o.memory_ids, o.superseded_ids)
        return {
            "op": o.op,
            "memory_ids": ids,
            "superseded_ids": _union(o.superseded_ids),
            "new_id": new_id,
            "texts": [_short(members[i].content) for i in ids],
            "new_text": _short(new_text) if new_text else None,
            "reason": o.reason,
        }

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
            The :class:`DreamResult`: status ``ok`` (applied, or planned for a dry run),
            ``skipped`` (fewer than two active memories, or no candidate group) or
            ``failed`` (the store or the state file failed; the planner failed for every
            group planned; or a touched memory changed while planning — nothing changed).
            A failure while writing leaves the run ``applying``: :meth:`recover` finishes it.

        Raises:
            ValueError: an unknown trigger.
            StateError: the run cannot be recorded in the state file.
        """
        if trigger not in TRIGGERS:
            raise ValueError(f"trigger must be one of {', '.join(TRIGGERS)}, not {trigger!r}")
        sc = _Scope("user", None) if project_key is None else _Scope("project", project_key)
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
            before, after, final = self._plan_all(res, sc, started, project_root, settled)
            if not dry_run:  # the next dreams of the scope do not plan these again
                self.state.dream_settle(sc.key, settled, run_id, res.started_at)
            if final is not None:  # skipped or failed before anything was planned
                res.status, res.reason = final
                return self._finish(res, t0, "skipped" if final[0] == "skipped" else "failed")
            if dry_run:
                return self._finish(res, t0, "planned")
            if not after:
                return self._finish(res, t0, "applied")
            changed = self._changed_since(before, after)
            if changed:
                res.status = "failed"
                res.reason = (f"{changed} memories changed while the dream was planning; "
                              "nothing was changed")
                return self._finish(res, t0, "failed")
            self.state.dream_applying(
                run_id, before=list(before.values()),
                after=[m.to_payload() for m in after], counts=res.counts, model=res.model,
                tokens_in=res.tokens_in, tokens_out=res.tokens_out, result=res.to_journal())
            applying = True
            self._write(after)
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

    def _plan_all(self, res: DreamResult, sc: _Scope, now: datetime,
                  project_root: str | None, settled: list[str]
                  ) -> tuple[dict[str, dict[str, Any]], list[Memory], tuple[str, str] | None]:
        """Group, plan and check; fill ``res`` and ``settled`` (the signatures of the
        groups kept whole or rejected by a check). Returns (before payloads by id, memories
        to write in write order, ``(status, reason)`` when the dream ends early)."""
        s = self.settings
        active = list(self.store.scroll(sc.filter()))
        n_before = len(active)
        res.counts = {"before": n_before, "after": n_before, "merged": 0, "superseded": 0,
                      "created": 0, "updated": 0, "kept": n_before, "rejected_plans": 0,
                      "groups": 0, "groups_deferred": 0, "groups_settled": 0}
        if n_before < 2:
            return {}, [], ("skipped", "fewer than two active memories")
        groups, deferred, skipped = self.groups(active, sc, self.state.dream_settled(sc.key))
        res.counts["groups"] = len(groups)
        res.counts["groups_deferred"] = deferred
        res.counts["groups_settled"] = skipped
        if not groups:
            return {}, [], ("skipped", "no candidate groups")
        budget = math.floor(s.max_retire_share * n_before)
        retired = 0
        before: dict[str, dict[str, Any]] = {}
        after: dict[str, Memory] = {}
        produced: set[str] = set()
        planner_errors: list[str] = []
        planned = 0
        stop: str | None = None
        for group in groups:
            ids = [m.id for m in group]
            if stop is not None:
                res.rejected.append({"group": ids, "reason": stop})
                continue
            if retired >= budget:
                res.rejected.append({"group": ids, "reason":
                                     f"cap reached: {retired} of at most {budget} retired"})
                continue
            try:
                if self.planner is None:
                    ops = self._rules_plan(group)
                else:
                    reply = self._ask(group, project_root)
                    res.model = reply.model
                    res.tokens_in += reply.tokens_in
                    res.tokens_out += reply.tokens_out
                    planned += 1
                    ops = self._parse(reply)
            except UpstreamError as exc:
                planner_errors.append(f"{exc.kind}: {exc}")
                res.rejected.append({"group": ids, "reason": f"planner failed: {exc.kind}"})
                stop = f"not planned: the planner failed ({exc.kind})"
                continue
            except ExtractionError as exc:
                res.rejected.append({"group": ids, "reason": f"bad plan: {exc}"})
                settled.append(group_signature(group))
                continue
            change = self.check(group, ops, sc, res.run_id, now, produced)
            if isinstance(change, str):
                res.rejected.append({"group": ids, "reason": change})
                settled.append(group_signature(group))
                continue
            if not change.after:
                settled.append(group_signature(group))  # kept whole: nothing to do
            if retired + change.retired > budget:
                res.rejected.append({"group": ids, "reason":
                                     f"cap reached: would retire {change.retired}, "
                                     f"{budget - retired} of {budget} left"})
                continue
            retired += change.retired
            before.update(change.before)
            after.update(change.after)
            produced.update(change.after)
            res.operations.extend(change.operations)
            c = res.counts
            c["merged"] += change.merged
            c["superseded"] += change.superseded
            c["created"] += change.created
            c["updated"] += change.updated
        c = res.counts
        c["rejected_plans"] = len(res.rejected)
        c["after"] = n_before - c["merged"] - c["superseded"] + c["created"]
        c["kept"] = n_before - c["merged"] - c["superseded"] - c["updated"]
        if planner_errors:
            res.reason = "stopped early: " + planner_errors[0]
            if not res.operations and planned == 0:
                return {}, [], ("failed", "the planner failed: " + planner_errors[0])
        # survivors and merged memories first, tombstones last: no fact is hidden mid-way
        order = sorted(after.values(), key=lambda m: (not m.is_active, m.created_at, m.id))
        return before, order, None

    def _changed_since(self, before: dict[str, dict[str, Any]], after: list[Memory]) -> int:
        """How many touched memories differ from what was planned on."""
        ids = [m.id for m in after]
        now = {m.id: m.to_payload() for m in self.store.get(ids)}
        return sum(1 for i in ids if now.get(i) != before.get(i))

    def _write(self, after: Sequence[Memory]) -> None:
        """Upsert ``after`` in batches of ``WRITE_BATCH``: the active memories (survivors
        and merged ones) first, then the tombstones, so no fact is hidden mid-way."""
        active = [m for m in after if m.is_active]
        retired = [m for m in after if not m.is_active]
        for part in (active, retired):
            for start in range(0, len(part), WRITE_BATCH):
                self.store.upsert(part[start:start + WRITE_BATCH])
            if part is active:
                _fault_point(FAULT_MID_APPLY)

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
                after = [Memory.from_payload(p) for p in row["after"]]
                for m in sorted(after, key=lambda m: (not m.is_active, m.created_at, m.id)):
                    self.store.upsert([m])
                result = dict(row["result"] or {})
                if result:
                    result["ended_at"] = now
                    note = "completed by recovery after an interruption"
                    result["reason"] = (f"{result['reason']}; {note}" if result.get("reason")
                                        else note)
                self.state.dream_finish(rid, "applied", now=now, expect=("applying",),
                                        result=result or None)
                log.warning("dream_rolled_forward", run_id=rid, writes=len(after))
                done.append(rid)
            else:
                self._restore(row)
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

    def _restore(self, row: dict[str, Any]) -> tuple[int, list[str]]:
        before = [Memory.from_payload(p) for p in row["before"]]
        before_ids = {m.id for m in before}
        created = [p["id"] for p in row["after"] if p["id"] not in before_ids]
        # active memories first, so no restored fact is hidden while undoing
        for m in sorted(before, key=lambda m: (not m.is_active, m.created_at, m.id)):
            self.store.upsert([m])
        if created:
            self.store.delete(created)
        return len(before), created

    def undo(self, run_id: str) -> DreamResult:
        """Undo an applied dream: write back exactly the ``before`` payloads and delete the
        memories the run created (in ``after``, not in ``before``); the run becomes
        ``undone``. Changes made to those memories after the dream (e.g. provenance merged
        by a later extraction) are discarded with it; the result's reason counts them.

        Returns:
            A :class:`DreamResult` with ``action="undo"``, ``status="undone"``, counts
            ``restored``, ``deleted``, ``before``/``after`` (active memories of the scope).

        Raises:
            DreamError: the run is unknown, a dry run, already undone, not applied (e.g.
                still ``applying``: run :meth:`recover`), or a later applied dream changed
                the same memories (undo that one first).
            StoreError, StateError: the store or state file failed; the run stays
                ``undoing`` and :meth:`recover` (or another ``undo``) completes it.
        """
        row = self.state.dream_run(run_id)
        if row is None:
            raise DreamError(f"no dream run {run_id!r}")
        if row["dry_run"]:
            raise DreamError(f"dream run {run_id} was a dry run: it changed nothing to undo")
        if row["status"] == "undone":
            raise DreamError(f"dream run {run_id} is already undone (at {row['undone_at']})")
        if row["status"] not in ("applied", "undoing"):
            hint = "; run recovery first" if row["status"] == "applying" else ""
            raise DreamError(f"dream run {run_id} is {row['status']}: only an applied run "
                             f"can be undone{hint}")
        touched = {p["id"] for p in [*row["before"], *row["after"]]}
        for later in self.state.dream_runs(statuses=("applying", "applied", "undoing"),
                                           newest_first=False):
            if later["seq"] <= row["seq"]:
                continue
            theirs = {p["id"] for p in [*later["before"], *later["after"]]}
            if theirs & touched:
                raise DreamError(f"dream run {later['id']} (later) changed memories of run "
                                 f"{run_id}; undo {later['id']} first")
        started = self.clock()
        t0 = time.perf_counter()
        if row["status"] == "applied" and not self.state.dream_mark_undo(
                run_id, "undoing", iso_utc(started), expect=("applied",)):
            raise DreamError(f"dream run {run_id} changed status meanwhile; try again")
        project = scope_project(row["scope_key"])
        sc = _Scope("user", None) if project is None else _Scope("project", project)
        planned_after = {p["id"]: p for p in row["after"]}
        current = {m.id: m.to_payload() for m in self.store.get(list(planned_after))}
        drifted = sum(1 for i, p in planned_after.items() if current.get(i) != p)
        n_before = self.store.count(sc.filter())
        restored, deleted = self._restore(row)
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
            operations=[
                {"op": "restore", "memory_ids": [p["id"] for p in row["before"]],
                 "superseded_ids": [], "new_id": None,
                 "texts": [_short(p["content"]) for p in row["before"]], "new_text": None,
                 "reason": "undo"},
                {"op": "delete", "memory_ids": deleted, "superseded_ids": [], "new_id": None,
                 "texts": [_short(planned_after[i]["content"]) for i in deleted],
                 "new_text": None, "reason": "undo"},
            ],
            model=prior.get("model"), mode=prior.get("mode", "rules"), action="undo",
            duration_ms=(time.perf_counter() - t0) * 1000,
        )
        log.info("dream_undone", run_id=run_id, restored=restored, deleted=len(deleted),
                 drifted=drifted)
        return res


__all__ = [
    "FAULT_MID_APPLY",
    "PLAN_SCHEMA",
    "TRIGGERS",
    "DreamError",
    "DreamResult",
    "DreamSettings",
    "Dreamer",
    "build_prompt",
    "identifiers",
    "missing_identifiers",
    "parse_plan",
    "render_memories",
]
