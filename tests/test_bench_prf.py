"""``bench/_prf.py``: RM3-style expansion of a BM25 query from its top hits."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import _prf

DOCS = [{1: 1.0, 2: 0.5}, {1: 0.8, 3: 0.9}, {4: 1.0}, {4: 0.2, 5: 0.3}]


def test_idf_is_qdrants_formula_over_the_documents() -> None:
    idf = _prf.Idf.of(DOCS)
    assert idf.n == 4 and idf.df[4] == 2 and idf.df[3] == 1
    assert idf(4) == pytest.approx(math.log(1 + (4 - 2 + 0.5) / (2 + 0.5)))
    assert idf(99) == pytest.approx(math.log(1 + 4.5 / 0.5))  # unseen term


def test_expand_adds_the_heaviest_new_terms_at_most_alpha() -> None:
    idf = _prf.Idf.of(DOCS)
    hits = [(DOCS[0], 2.0), (DOCS[1], 1.0), (DOCS[2], 0.5)]
    out = _prf.expand({1: 1.0}, hits, idf, n=2, m=1, alpha=0.5)
    # term 2: 1 * 0.5 * idf(2); term 3: 0.5 * 0.9 * idf(3); idf(2) == idf(3), so 2 wins
    assert out == {1: 1.0, 2: 0.5}
    out = _prf.expand({1: 1.0}, hits, idf, n=2, m=5, alpha=0.5)
    assert out[1] == 1.0 and out[2] == 0.5
    assert out[3] == pytest.approx(0.5 * (0.5 * 0.9) / 0.5)
    assert 4 not in out  # only the first n hits feed back


def test_expand_without_hits_or_weight_keeps_the_query() -> None:
    idf = _prf.Idf.of(DOCS)
    assert _prf.expand({1: 1.0}, [], idf, n=3, m=5, alpha=0.5) == {1: 1.0}
    assert _prf.expand({1: 1.0}, [(DOCS[0], 1.0)], idf, n=3, m=5, alpha=0.0) == {1: 1.0}
