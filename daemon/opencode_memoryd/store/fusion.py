"""Hybrid ranking: weighted distribution-based score fusion of the BM25 and dense hits.

Both stores fuse in Python with :func:`dbsf_fuse` from the two scored candidate lists
(:class:`~opencode_memoryd.store.edge.EdgeStore` from two Edge queries,
:class:`~opencode_memoryd.store.server.ServerStore` from one batch of two queries: Qdrant's
server-side ``Fusion.DBSF`` takes no weights), so both rank alike. :func:`rrf_fuse` (weighted
reciprocal rank fusion, the former store fusion) stays for the benchmark's comparison.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

# Chosen with bench/locomo_hybrid.py (all-MiniLM-L6-v2 dense vectors, LoCoMo turn
# retrieval) on conversations 0-4 only, by a rule fixed before conversations 5-9 were
# scored: the fusion family with the best leave-one-conversation-out R@10 within 0-4 (RRF,
# DBSF, z-score or min-max score sums), then that family's setting with the best R@10 on
# 0-4, ties broken by MRR@10. The numbers are in the bench's output and the README.

#: Weight of the BM25 side's normalised scores.
SPARSE_WEIGHT = 1.0
#: Weight of the dense side's normalised scores.
DENSE_WEIGHT = 0.8
#: Candidates per result for each side: BM25 ``limit``, dense ``2 * limit``.
SPARSE_CANDIDATES_PER_RESULT = 1
DENSE_CANDIDATES_PER_RESULT = 2
#: Reciprocal rank fusion constant of :func:`rrf_fuse` (the former store fusion: k = 1,
#: dense weight 0.6, ``limit`` + ``4 * limit`` candidates).
RRF_K = 1


def candidates(limit: int) -> tuple[int, int]:
    """How many candidates the sparse and the dense side of a hybrid search take for
    ``limit`` (> 0) results: ``(limit, 2 * limit)``."""
    return SPARSE_CANDIDATES_PER_RESULT * limit, DENSE_CANDIDATES_PER_RESULT * limit


def distr_norm(scores: Sequence[float]) -> list[float]:
    """Scores mapped to about [0, 1] by the 3-sigma rule, as Qdrant's DBSF does.

    ``(s - (mean - 3 sd)) / (6 sd)`` with the sample standard deviation ``sd`` (n - 1);
    a single score, or scores all equal, map to 0.5; an empty list stays empty.
    """
    n = len(scores)
    if n < 2:
        return [0.5] * n
    mean = math.fsum(scores) / n
    sd = math.sqrt(math.fsum((s - mean) ** 2 for s in scores) / (n - 1))
    if sd == 0.0:
        return [0.5] * n
    low = mean - 3.0 * sd
    return [(s - low) / (6.0 * sd) for s in scores]


def dbsf_fuse(
    results: Sequence[Sequence[tuple[str, float]]],
    weights: Sequence[float],
) -> list[tuple[str, float]]:
    """Weighted distribution-based score fusion of scored id lists.

    Each list's scores are normalised on their own by :func:`distr_norm` (mean +- 3 standard
    deviations of that list mapped to 0..1: the normalisation of Qdrant's ``Fusion.DBSF``),
    multiplied by the list's weight and summed per id; an id absent from a list gets nothing
    from it. Unlike rank fusion, how far ahead a hit is counts: a BM25 hit far above the
    rest of its list keeps its lead.

    Args:
        results: ``(id, score)`` lists, larger scores better (BM25 scores, cosine
            similarities); an id appears at most once per list.
        weights: one weight per list (a weight <= 0 ignores the list).

    Returns:
        ``(id, fused score)`` pairs, best first; ties keep first-seen order.

    Raises:
        ValueError: ``len(weights) != len(results)``.
    """
    if len(weights) != len(results):
        raise ValueError("dbsf_fuse: one weight per result list")
    fused: dict[str, float] = {}
    for hits, w in zip(results, weights, strict=True):
        if w <= 0:
            continue
        for (pid, _), s in zip(hits, distr_norm([s for _, s in hits]), strict=True):
            fused[pid] = fused.get(pid, 0.0) + w * s
    order = {pid: i for i, pid in enumerate(fused)}
    return sorted(fused.items(), key=lambda kv: (-kv[1], order[kv[0]]))


def rrf_fuse(
    rankings: Sequence[Sequence[str]],
    weights: Sequence[float],
    *,
    k: int = RRF_K,
) -> list[tuple[str, float]]:
    """Weighted reciprocal rank fusion of ranked id lists.

    Reciprocal rank fusion: Cormack, Clarke & Büttcher, "Reciprocal Rank Fusion outperforms
    Condorcet and individual Rank Learning Methods", SIGIR 2009. Weighted as Qdrant
    does it (``Rrf(k, weights)``): an item at 1-based rank ``r`` in a ranking of weight
    ``w`` contributes ``1 / (r / w + k - 1)``; with ``w = 1`` that is ``1 / (k + r - 1)``.

    Args:
        rankings: id lists, best first.
        weights: one weight per ranking (> 0; a weight <= 0 ignores the ranking).
        k: the RRF constant (>= 1; default :data:`RRF_K`).

    Returns:
        ``(id, fused score)`` pairs, best first; ties keep first-seen order.

    Raises:
        ValueError: ``len(weights) != len(rankings)``, or ``k < 1``.
    """
    if len(weights) != len(rankings):
        raise ValueError("rrf_fuse: one weight per ranking")
    if k < 1:
        raise ValueError(f"rrf_fuse: k must be at least 1, not {k}")
    scores: dict[str, float] = {}
    for ranking, w in zip(rankings, weights, strict=True):
        if w <= 0:
            continue
        for rank, pid in enumerate(ranking, start=1):
            scores[pid] = scores.get(pid, 0.0) + 1.0 / (rank / w + k - 1)
    order = {pid: i for i, pid in enumerate(scores)}
    return sorted(scores.items(), key=lambda kv: (-kv[1], order[kv[0]]))


__all__ = [
    "DENSE_CANDIDATES_PER_RESULT",
    "DENSE_WEIGHT",
    "RRF_K",
    "SPARSE_CANDIDATES_PER_RESULT",
    "SPARSE_WEIGHT",
    "candidates",
    "dbsf_fuse",
    "distr_norm",
    "rrf_fuse",
]
