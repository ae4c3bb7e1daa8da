"""Candidate groups: which active memories of a scope one dream plans together.

Edges join memories of the same type whose texts are near-duplicates (both modes; in rules
mode only when one text says all the other says, :func:`~opencode_memoryd.extract.facts.restates`)
or, in LLM mode, whose subjects are similar (:class:`~opencode_memoryd.dream.model.DreamSettings`).
Edges join in decreasing similarity (Kruskal's order) into union-find sets capped at
``max_group_size``. A group an earlier dream settled (kept whole, or rejected its plan) is
known by its :func:`group_signature` and not planned again until a member changes.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Sequence, Set
from typing import NamedTuple

from opencode_memoryd.dream.model import DreamScope, DreamSettings
from opencode_memoryd.dream.terms import SalientTerms
from opencode_memoryd.extract.facts import restates, similarity
from opencode_memoryd.models import Memory, content_hash, normalize_text
from opencode_memoryd.store.api import MemoryFilter, MemoryStore

#: A candidate pair of memory ids, the smaller id first.
Pair = tuple[str, str]


def group_signature(group: Sequence[Memory]) -> str:
    """A candidate group's identity: SHA-256 (hex, 32 chars) of its members' sorted
    ``id:content_hash``. Any change of a member's text, or another member, changes it."""
    keys = sorted(f"{m.id}:{m.content_hash or content_hash(m.content)}" for m in group)
    return hashlib.sha256("\n".join(keys).encode()).hexdigest()[:32]


class Grouping(NamedTuple):
    """Candidate groups of one scope.

    Attributes:
        groups: groups of two or more memories, members oldest first, groups ordered by
            their oldest member; at most ``max_groups``.
        deferred: groups found beyond ``max_groups`` (left for a later dream).
        settled: groups left out because an earlier dream settled them.
    """

    groups: list[list[Memory]]
    deferred: int
    settled: int


def candidate_groups(active: Sequence[Memory], sc: DreamScope, settled: Set[str], *,
                     store: MemoryStore, settings: DreamSettings, terms: SalientTerms,
                     by_subject: bool) -> Grouping:
    """Group the scope's active memories (see the module docstring).

    Args:
        active: the scope's active memories.
        sc: the scope (candidates of big types come from ``store.search`` in it).
        settled: signatures of the groups an earlier dream settled.
        store: the memory store, searched for candidates of types with more than
            ``all_pairs_limit`` memories.
        settings: thresholds and caps.
        terms: the salient-term tokenizer.
        by_subject: LLM mode: memories on a similar subject group too, and near-duplicates
            group without having to restate one another.
    """
    pairs = _candidate_pairs(active, sc, store, settings)
    sim = _Similarity(active, terms)
    edges: list[tuple[float, str, str]] = []
    for a, b in pairs:
        score = _edge_score(sim, a, b, settings, by_subject=by_subject)
        if score is not None:
            edges.append((score, a, b))
    edges.sort(key=lambda e: (-e[0], e[1], e[2]))
    groups = _join(active, edges, settings.max_group_size)
    fresh = [g for g in groups if group_signature(g) not in settled]
    fresh.sort(key=lambda g: (g[0].created_at, g[0].id))
    return Grouping(fresh[: settings.max_groups], max(0, len(fresh) - settings.max_groups),
                    len(groups) - len(fresh))


def _pair(a: str, b: str) -> Pair:
    return (a, b) if a <= b else (b, a)


def _all_pairs(ids: Sequence[str]) -> set[Pair]:
    return {_pair(a, b) for i, a in enumerate(ids) for b in ids[i + 1:]}


def _candidate_pairs(active: Sequence[Memory], sc: DreamScope, store: MemoryStore,
                     settings: DreamSettings) -> set[Pair]:
    """Pairs of the same type: every pair of a type with at most ``all_pairs_limit``
    memories; for bigger types, the pairs of equal text plus each memory's search hits."""
    by_type: dict[str, list[Memory]] = {}
    for m in active:
        by_type.setdefault(m.type, []).append(m)
    pairs: set[Pair] = set()
    for type_, ms in by_type.items():
        if len(ms) <= settings.all_pairs_limit:
            pairs |= _all_pairs([m.id for m in ms])
            continue
        buckets: dict[str, list[str]] = {}
        for m in ms:
            buckets.setdefault(content_hash(m.content), []).append(m.id)
        for ids in buckets.values():
            pairs |= _all_pairs(ids)
        pairs |= _search_pairs(ms, sc.filter((type_,)), store, settings.search_limit)
    return pairs


def _search_pairs(ms: Sequence[Memory], flt: MemoryFilter, store: MemoryStore,
                  limit: int) -> set[Pair]:
    """Each memory paired with its search hits among ``ms`` (the active memories of one
    type; ``flt`` restricts the search to that type in the scope)."""
    ids = {m.id for m in ms}
    pairs: set[Pair] = set()
    for m in ms:
        for hit, _score in store.search(m.content, flt=flt, limit=limit):
            if hit.id != m.id and hit.id in ids:
                pairs.add(_pair(m.id, hit.id))
    return pairs


class _Similarity:
    """Text and subject similarity of the active memories of one scope, by id."""

    def __init__(self, active: Sequence[Memory], terms: SalientTerms) -> None:
        self.content = {m.id: m.content for m in active}
        self.norm = {m.id: normalize_text(m.content) for m in active}
        self.terms = {m.id: terms(m.content) for m in active}
        df: dict[int, int] = {}
        for ts in self.terms.values():
            for t in ts:
                df[t] = df.get(t, 0) + 1
        n = max(len(active), 1)
        self.weight = {t: math.log(1 + n / d) for t, d in df.items()}

    def text(self, a: str, b: str) -> float:
        """Word similarity of the normalised texts (1.0 when equal)."""
        na, nb = self.norm[a], self.norm[b]
        return 1.0 if na == nb else similarity(na, nb)

    def restates_either(self, a: str, b: str) -> bool:
        """Whether one text says all the other says."""
        ta, tb = self.content[a], self.content[b]
        return restates(ta, tb) or restates(tb, ta)

    def subject(self, a: str, b: str) -> float:
        """IDF-weighted overlap coefficient of the salient terms; 0.0 with fewer than two
        shared terms."""
        shared = self.terms[a] & self.terms[b]
        if len(shared) < 2:
            return 0.0
        wa = self._mass(self.terms[a])
        wb = self._mass(self.terms[b])
        return self._mass(shared) / min(wa, wb)

    def _mass(self, terms: Iterable[int]) -> float:
        return sum(self.weight[t] for t in terms)


def _edge_score(sim: _Similarity, a: str, b: str, settings: DreamSettings, *,
                by_subject: bool) -> float | None:
    """The weight of the edge between ``a`` and ``b``, or ``None`` for no edge.

    Near-duplicates score ``1 + text similarity`` (they join first); subject edges score
    the larger of subject and text similarity.
    """
    text_sim = sim.text(a, b)
    if text_sim >= settings.near_duplicate_similarity:
        # rules mode: only texts one of which says all the other says
        return 1.0 + text_sim if by_subject or sim.restates_either(a, b) else None
    if not by_subject:
        return None
    subject = sim.subject(a, b)
    return max(subject, text_sim) if subject >= settings.group_similarity else None


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


def _join(active: Sequence[Memory], edges: Sequence[tuple[float, str, str]],
          cap: int) -> list[list[Memory]]:
    """Join ``edges`` in the given order into sets of at most ``cap`` members; return
    the sets of two or more, members oldest first."""
    uf = _UnionFind((m.id for m in active), cap)
    for _score, a, b in edges:
        uf.union(a, b)
    sets: dict[str, list[Memory]] = {}
    for m in active:
        sets.setdefault(uf.find(m.id), []).append(m)
    return [sorted(g, key=lambda m: (m.created_at, m.id)) for g in sets.values() if len(g) >= 2]
