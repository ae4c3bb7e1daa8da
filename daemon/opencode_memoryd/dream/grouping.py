"""Candidate groups: which active memories of a scope one dream plans together.

Edges join memories of the same type whose texts are near-duplicates (both modes; in rules
mode only when one text says all the other says, :func:`~opencode_memoryd.extract.facts.restates`)
or, in LLM mode, whose subjects are similar (:class:`~opencode_memoryd.dream.model.DreamSettings`).
Edges join in decreasing similarity (Kruskal's order) into union-find sets capped at
``max_group_size``. A group an earlier dream settled (kept whole, or rejected its plan) is
known by its :func:`group_signature` and not planned again until a member changes.

Which pairs are scored at all is decided with inverted indexes, never by comparing all
pairs:

* near-duplicates, exactly, by prefix filtering (Chaudhuri, Ganti & Kaushik, "A Primitive
  Operator for Similarity Joins in Data Cleaning", ICDE 2006; Bayardo, Ma & Srikant,
  "Scaling Up All Pairs Similarity Search", WWW 2007): the word similarity (difflib's ratio
  ``2M / (|a| + |b|)``) is at most the Dice coefficient of the two word multisets, so a
  pair at or above ``near_duplicate_similarity`` = t shares at least ``t |a| / (2 - t)``
  words of ``a``; with words ordered rarest first, it shares a word of both texts'
  prefixes of ``|a| - ceil(t |a| / (2 - t)) + 1`` words, and the shorter text has at least
  ``t / (2 - t)`` times the words of the longer. Every such pair is found;
* subjects (LLM mode): a pair at or above ``group_similarity`` = g shares salient terms of
  at least g times the lighter memory's term mass, so it shares one of the lighter one's
  heaviest terms, those that make up all but g of its mass. Each memory is paired with
  the memories holding those terms, heaviest term first, at most
  ``SUBJECT_CANDIDATES * max_group_size`` of them (a group holds ``max_group_size``
  members at most, and its edges are taken strongest first).

A correction joins what it corrects in both modes: a memory whose text says it replaces a
term ("use Vitest instead of Jest") and an older one that states that term as its choice
("We use Jest for unit tests", :func:`~opencode_memoryd.extract.supersede.corrects`) are
joined before any other edge, so a store written before corrections retired anything at
write time is set right by its next dream.

Scoring is cheap first: word overlap (a set intersection) before difflib, content words
before :func:`~opencode_memoryd.extract.facts.restates`.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Sequence, Set
from typing import NamedTuple

from opencode_memoryd.dream.model import DreamSettings
from opencode_memoryd.dream.terms import SalientTerms
from opencode_memoryd.extract.facts import content_words, restates, similarity
from opencode_memoryd.extract.slots import replaces_value, slot_change
from opencode_memoryd.extract.supersede import (
    index_keys,
    replaced_terms,
    same_subject,
    states_use,
    term_key,
)
from opencode_memoryd.models import Memory, content_hash, normalize_text

#: A candidate pair of memory ids, the smaller id first.
Pair = tuple[str, str]
#: In LLM mode each memory is scored against at most this many times ``max_group_size``
#: memories found by its subject (a group holds at most ``max_group_size`` - 1 others).
SUBJECT_CANDIDATES = 2
#: The weight of a correction's edge: above every other (near-duplicates score at most 2).
CORRECTION_SCORE = 3.0


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


def candidate_groups(active: Sequence[Memory], settled: Set[str], *,
                     settings: DreamSettings, terms: SalientTerms,
                     by_subject: bool) -> Grouping:
    """Group the scope's active memories (see the module docstring).

    Args:
        active: the scope's active memories.
        settled: signatures of the groups an earlier dream settled.
        settings: thresholds and caps.
        terms: the salient-term tokenizer.
        by_subject: LLM mode: memories on a similar subject group too, and near-duplicates
            group without having to restate one another.
    """
    sim = _Similarity(active, terms)
    edges: list[tuple[float, str, str]] = []
    for a, b in _candidate_pairs(active, sim, settings, by_subject=by_subject):
        score = _edge_score(sim, a, b, settings, by_subject=by_subject)
        if score is not None:
            edges.append((score, a, b))
    edges.extend(correction_edges(active))
    edges.sort(key=lambda e: (-e[0], e[1], e[2]))
    groups = _join(active, edges, settings.max_group_size)
    fresh = [g for g in groups if group_signature(g) not in settled]
    fresh.sort(key=lambda g: (g[0].created_at, g[0].id))
    return Grouping(fresh[: settings.max_groups], max(0, len(fresh) - settings.max_groups),
                    len(groups) - len(fresh))


def correction_edges(active: Sequence[Memory]) -> list[tuple[float, str, str]]:
    """Edges ``(CORRECTION_SCORE, id, id)`` between each memory that says it replaces a
    term and each memory no newer than it that states that term as its choice
    (:func:`~opencode_memoryd.extract.supersede.corrects`), whatever their types; and
    between each memory that gives a value slot a new value and each no newer one that
    gives it another (:func:`~opencode_memoryd.extract.slots.replaces_value`)."""
    edges = [(CORRECTION_SCORE, *_pair(c.id, m.id))
             for c in active if slot_change(c.content) is not None
             for m in active
             if m.id != c.id and m.created_at <= c.created_at
             and replaces_value(c.content, m.content)]
    corrections = [(c, terms) for c in active if (terms := replaced_terms(c.content))]
    if not corrections:
        return edges
    # only the memories naming a replaced term are looked at
    by_key: dict[str, list[Memory]] = {}
    for m in active:
        for key in index_keys(m.content):
            by_key.setdefault(key, []).append(m)
    for c, terms in corrections:
        seen = {c.id}
        for term in terms:
            for m in by_key.get(term_key(term), []):
                if (m.id not in seen and m.created_at <= c.created_at
                        and states_use(m.content, term)
                        and same_subject(c.content, m.content, terms)):
                    seen.add(m.id)
                    edges.append((CORRECTION_SCORE, *_pair(c.id, m.id)))
    return edges


def _pair(a: str, b: str) -> Pair:
    return (a, b) if a <= b else (b, a)


def _candidate_pairs(active: Sequence[Memory], sim: _Similarity, settings: DreamSettings,
                     *, by_subject: bool) -> set[Pair]:
    """Every pair of the same type that may reach a near-duplicate edge, and in LLM mode
    a subject edge (a superset of the pairs with an edge; see the module docstring)."""
    by_type: dict[str, list[str]] = {}
    for m in active:
        by_type.setdefault(m.type, []).append(m.id)
    pairs: set[Pair] = set()
    for ids in by_type.values():
        if len(ids) < 2:
            continue
        pairs |= _word_pairs(ids, sim, settings.near_duplicate_similarity)
        if by_subject:
            pairs |= _subject_pairs(ids, sim, settings.group_similarity,
                                    SUBJECT_CANDIDATES * settings.max_group_size)
    return pairs


def _word_pairs(ids: Sequence[str], sim: _Similarity, t: float) -> set[Pair]:
    """Pairs whose word multisets may have a Dice coefficient of at least ``t``."""
    df: dict[tuple[str, int], int] = {}
    for i in ids:
        for tok in sim.tokens[i]:
            df[tok] = df.get(tok, 0) + 1
    index: dict[tuple[str, int], list[str]] = {}
    pairs: set[Pair] = set()
    for i in sorted(ids, key=lambda i: len(sim.tokens[i])):  # shorter texts first
        toks = sorted(sim.tokens[i], key=lambda tok: (df[tok], tok))
        need = math.ceil(t * len(toks) / (2 - t) - 1e-9) if t > 0 else 0
        prefix = toks[: max(len(toks) - need + 1, 0)] if toks else [("", 0)]
        # a shorter text of length l pairs only when l >= t/(2-t) * len (length filter)
        shortest = t * len(toks) / (2 - t) - 1e-9
        found: set[str] = set()
        for tok in prefix:
            for j in index.get(tok, ()):
                if len(sim.tokens[j]) >= shortest:
                    found.add(j)
            index.setdefault(tok, []).append(i)
        pairs.update(_pair(i, j) for j in found
                     if sim.overlap(i, j) >= t or (not toks and not sim.tokens[j]))
    return pairs


def _subject_pairs(ids: Sequence[str], sim: _Similarity, g: float, cap: int) -> set[Pair]:
    """Pairs that may share salient terms of at least ``g`` times the lighter one's mass
    (and at least two terms): each memory with up to ``cap`` memories that hold one of its
    heaviest terms, heaviest term first."""
    index: dict[int, list[str]] = {}
    for i in ids:
        for term in sim.terms[i]:
            index.setdefault(term, []).append(i)
    pairs: set[Pair] = set()
    for i in ids:
        heavy = sorted(sim.terms[i], key=lambda term: (-sim.weight[term], term))
        mass = sim.mass[i]
        rest = mass
        found: dict[str, None] = {}
        for term in heavy:
            if rest < g * mass or rest <= 0 or len(found) >= cap:
                break
            rest -= sim.weight[term]
            for j in index[term]:
                if j != i:
                    found[j] = None
                    if len(found) >= cap:
                        break
        pairs.update(_pair(i, j) for j in found)
    return pairs


def _word_tokens(norm: str) -> list[tuple[str, int]]:
    """The words of a normalised text as a set-like list: the k-th occurrence of a word is
    the token ``(word, k)``, so the overlap of two token sets is that of the multisets."""
    seen: dict[str, int] = {}
    out = []
    for w in norm.split():
        seen[w] = seen.get(w, 0) + 1
        out.append((w, seen[w]))
    return out


class _Similarity:
    """Text and subject similarity of the active memories of one scope, by id."""

    def __init__(self, active: Sequence[Memory], terms: SalientTerms) -> None:
        self.content = {m.id: m.content for m in active}
        self.norm = {m.id: normalize_text(m.content) for m in active}
        self.tokens = {i: _word_tokens(n) for i, n in self.norm.items()}
        self.token_set = {i: frozenset(t) for i, t in self.tokens.items()}
        self.terms = {m.id: terms(m.content) for m in active}
        self.content_words = {m.id: content_words(m.content) for m in active}
        df: dict[int, int] = {}
        for ts in self.terms.values():
            for t in ts:
                df[t] = df.get(t, 0) + 1
        n = max(len(active), 1)
        self.weight = {t: math.log(1 + n / d) for t, d in df.items()}
        self.mass = {i: self._mass(ts) for i, ts in self.terms.items()}

    def text(self, a: str, b: str) -> float:
        """Word similarity of the normalised texts (1.0 when equal)."""
        na, nb = self.norm[a], self.norm[b]
        return 1.0 if na == nb else similarity(na, nb)

    def overlap(self, a: str, b: str) -> float:
        """Word overlap: the Dice coefficient of the two texts' word multisets, in [0, 1].
        At least :meth:`text` (difflib's ratio counts the shared words that also match in
        order), and cheap: one set intersection."""
        total = len(self.tokens[a]) + len(self.tokens[b])
        if total == 0:
            return 1.0
        return 2 * len(self.token_set[a] & self.token_set[b]) / total

    def restates_either(self, a: str, b: str) -> bool:
        """Whether one text says all the other says."""
        ta, tb = self.content[a], self.content[b]
        wa, wb = self.content_words[a], self.content_words[b]
        return (wa <= wb and restates(ta, tb)) or (wb <= wa and restates(tb, ta))

    def subject(self, a: str, b: str) -> float:
        """IDF-weighted overlap coefficient of the salient terms; 0.0 with fewer than two
        shared terms."""
        shared = self.terms[a] & self.terms[b]
        if len(shared) < 2:
            return 0.0
        return self._mass(shared) / min(self.mass[a], self.mass[b])

    def _mass(self, terms: Iterable[int]) -> float:
        return sum(self.weight[t] for t in terms)


def _edge_score(sim: _Similarity, a: str, b: str, settings: DreamSettings, *,
                by_subject: bool) -> float | None:
    """The weight of the edge between ``a`` and ``b``, or ``None`` for no edge.

    Near-duplicates (text similarity at least ``near_duplicate_similarity``) score
    ``1 + text similarity`` (they join first); subject edges score the larger of subject
    similarity and word overlap (:meth:`_Similarity.overlap`). The word overlap bounds the
    text similarity from above, so difflib runs only for pairs that may be near-duplicates.
    """
    near = settings.near_duplicate_similarity
    overlap = sim.overlap(a, b)
    if not by_subject:  # rules mode: only texts one of which says all the other says
        if overlap < near or not sim.restates_either(a, b):
            return None
        text_sim = sim.text(a, b)
        return 1.0 + text_sim if text_sim >= near else None
    if overlap >= near:
        text_sim = sim.text(a, b)
        if text_sim >= near:
            return 1.0 + text_sim
    subject = sim.subject(a, b)
    return max(subject, overlap) if subject >= settings.group_similarity else None


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
