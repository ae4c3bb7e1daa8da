"""Hybrid ranking: weighted reciprocal rank fusion of the BM25 and dense rankings.

:class:`~opencode_memoryd.store.edge.EdgeStore` fuses in Python with :func:`rrf_fuse`;
:class:`~opencode_memoryd.store.server.ServerStore` asks the server for the same fusion
(``Rrf(k=RRF_K, weights=[SPARSE_WEIGHT, DENSE_WEIGHT])``), so both rank alike.
"""

from __future__ import annotations

from collections.abc import Sequence

#: Reciprocal rank fusion constant (Cormack, Clarke & Büttcher, SIGIR 2009: k = 60).
RRF_K = 60
#: RRF weights of the two rankings: BM25 sparse 1.0, dense 0.5 (measured on LoCoMo with
#: bench/locomo_retrieval.py).
SPARSE_WEIGHT = 1.0
DENSE_WEIGHT = 0.5


def candidates(limit: int) -> int:
    """How many candidates each side of a hybrid search takes for ``limit`` results:
    ``max(4 * limit, 40)``."""
    return max(4 * limit, 40)


def rrf_fuse(
    rankings: Sequence[Sequence[str]],
    weights: Sequence[float],
    *,
    k: int = RRF_K,
) -> list[tuple[str, float]]:
    """Weighted reciprocal rank fusion of ranked id lists.

    Reciprocal rank fusion: Cormack, Clarke & Büttcher, "Reciprocal Rank Fusion outperforms
    Condorcet and individual Rank Learning Methods", SIGIR 2009 (k = 60). Weighted as Qdrant
    does it (``Rrf(k, weights)``), so both adapters rank alike: an item at 1-based rank ``r``
    in a ranking of weight ``w`` contributes ``1 / (r / w + k - 1)``; with ``w = 1`` that is
    ``1 / (k + r - 1)``.

    Args:
        rankings: id lists, best first.
        weights: one weight per ranking (> 0; a weight <= 0 ignores the ranking).
        k: the RRF constant.

    Returns:
        ``(id, fused score)`` pairs, best first; ties keep first-seen order.

    Raises:
        ValueError: ``len(weights) != len(rankings)``.
    """
    if len(weights) != len(rankings):
        raise ValueError("rrf_fuse: one weight per ranking")
    scores: dict[str, float] = {}
    for ranking, w in zip(rankings, weights, strict=True):
        if w <= 0:
            continue
        for rank, pid in enumerate(ranking, start=1):
            scores[pid] = scores.get(pid, 0.0) + 1.0 / (rank / w + k - 1)
    order = {pid: i for i, pid in enumerate(scores)}
    return sorted(scores.items(), key=lambda kv: (-kv[1], order[kv[0]]))


__all__ = ["DENSE_WEIGHT", "RRF_K", "SPARSE_WEIGHT", "candidates", "rrf_fuse"]
