"""Pseudo-relevance feedback (PRF) for the BM25 side of a search, for the benches.

RM3-style query expansion (Lavrenko & Croft, "Relevance-Based Language Models", SIGIR 2001;
Abdul-Jaleel et al., "UMass at TREC 2004", for the RM3 interpolation): search once, take
the top ``n`` BM25 hits as relevant, weight every stemmed term of those hits by

    sum over the hits d of (score(d) / score(top hit)) * tf_weight(t, d) * idf(t)

(``tf_weight``: the BM25 term-frequency part stored in the point's sparse vector; ``idf``:
Qdrant's IDF over the stored points, ``ln(1 + (N - df + 0.5) / (df + 0.5))``), keep the
``m`` heaviest terms that are not already in the query, add them with weight
``alpha * weight / heaviest weight`` (the query's own terms keep 1.0) and search again.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

TermWeights = Mapping[int, float]  # sparse index -> weight


@dataclass(frozen=True, slots=True)
class Idf:
    """Document frequencies of the stored sparse vectors, and Qdrant's IDF from them."""

    df: Mapping[int, int]
    n: int

    @classmethod
    def of(cls, docs: Iterable[TermWeights]) -> Idf:
        """Count, over ``docs``, the documents holding each sparse index."""
        df: dict[int, int] = {}
        n = 0
        for doc in docs:
            n += 1
            for t in doc:
                df[t] = df.get(t, 0) + 1
        return cls(df, n)

    def __call__(self, term: int) -> float:
        d = self.df.get(term, 0)
        return math.log(1.0 + (self.n - d + 0.5) / (d + 0.5))


def expand(query: TermWeights, hits: Sequence[tuple[TermWeights, float]], idf: Idf, *,
           n: int, m: int, alpha: float) -> dict[int, float]:
    """The expanded query: ``query``'s terms (their weights kept) plus at most ``m`` terms
    of the first ``n`` of ``hits`` (``(sparse vector, BM25 score)``, best first) weighted
    as the module docstring says, each at most ``alpha``. No hits: ``query`` unchanged."""
    out = dict(query)
    top = hits[:n]
    if not top or m <= 0 or alpha <= 0:
        return out
    best = top[0][1] or 1.0
    cand: dict[int, float] = {}
    for doc, score in top:
        for t, w in doc.items():
            if t not in out:
                cand[t] = cand.get(t, 0.0) + (score / best) * w * idf(t)
    chosen = sorted(cand.items(), key=lambda kv: (-kv[1], kv[0]))[:m]
    if chosen and chosen[0][1] > 0:
        heaviest = chosen[0][1]
        out.update({t: alpha * x / heaviest for t, x in chosen})
    return out
