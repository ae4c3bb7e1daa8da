"""Dense pseudo-relevance feedback (Rocchio) for the benches: a query vector moved towards
the vectors of the first hits."""

from __future__ import annotations

import math
from collections.abc import Sequence


def rocchio(query: Sequence[float], feedback: Sequence[Sequence[float]],
            beta: float) -> list[float]:
    """A dense query moved towards the vectors of the first hits (pseudo-relevance feedback).

    Rocchio's query update without negative feedback (Rocchio, "Relevance Feedback in
    Information Retrieval", 1971), applied to dense vectors as in vector PRF (Li et al.,
    "Pseudo Relevance Feedback with Deep Language Models and Dense Retrievers: Successes
    and Pitfalls", ACM TOIS 2023): ``q / |q| + beta * mean(f / |f|)``, returned with unit
    length. Zero vectors are skipped.

    Args:
        query: the query's embedding (any length > 0, not all zeros).
        feedback: the embeddings of the feedback hits (same length as ``query``); empty
            returns ``query`` at unit length.
        beta: the weight of the feedback centroid (>= 0).

    Returns:
        The new query vector, unit length, as floats.

    Raises:
        ValueError: ``query`` is all zeros, ``beta < 0``, or a feedback vector's length
            differs from the query's.
    """
    if beta < 0:
        raise ValueError(f"rocchio: beta must be >= 0, not {beta}")
    qn = math.sqrt(math.fsum(x * x for x in query))
    if qn == 0:
        raise ValueError("rocchio: the query vector is all zeros")
    out = [x / qn for x in query]
    units = []
    for f in feedback:
        if len(f) != len(out):
            raise ValueError(f"rocchio: feedback vector of length {len(f)}, query {len(out)}")
        fn = math.sqrt(math.fsum(x * x for x in f))
        if fn > 0:
            units.append([x / fn for x in f])
    if units and beta > 0:
        scale = beta / len(units)
        for u in units:
            for i, x in enumerate(u):
                out[i] += scale * x
    n = math.sqrt(math.fsum(x * x for x in out))
    return [x / n for x in out] if n > 0 else [x / qn for x in query]
