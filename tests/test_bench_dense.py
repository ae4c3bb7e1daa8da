"""``bench/_dense.py``: the benches' vector cache keeps query and document vectors apart."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import _dense


class Asymmetric:
    """Document vectors [len, 0], query vectors [0, len + len(prefix)]; counts texts."""

    name = "test:asym"
    dimensions = 2

    def __init__(self, prefix: str = "") -> None:
        self.prefix = prefix
        self.texts = 0

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts += len(texts)
        return [[float(len(t)), 0.0] for t in texts]

    def embed_query(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts += len(texts)
        return [[0.0, float(len(self.prefix + t))] for t in texts]


def cached(tmp_path: Path, inner: Asymmetric, prefix: str = "") -> _dense.CachedEmbedder:
    return _dense.CachedEmbedder(inner.name, 2, tmp_path, lambda: inner, query_prefix=prefix)


def test_query_and_document_vectors_are_cached_apart(tmp_path: Path) -> None:
    inner = Asymmetric()
    emb = cached(tmp_path, inner)
    assert emb.embed(["abc"]) == [[3.0, 0.0]]
    assert emb.embed_query(["abc"]) == [[0.0, 3.0]]
    assert emb.embed(["abc"]) == [[3.0, 0.0]] and inner.texts == 2
    emb.save()
    again = Asymmetric()
    reloaded = cached(tmp_path, again)
    assert reloaded.embed_query(["abc"]) == [[0.0, 3.0]]
    assert reloaded.embed(["abc"]) == [[3.0, 0.0]]
    assert again.texts == 0


def test_a_new_query_prefix_misses_the_cache(tmp_path: Path) -> None:
    emb = cached(tmp_path, Asymmetric())
    emb.embed_query(["abc"])
    emb.save()
    inner = Asymmetric("q: ")
    assert cached(tmp_path, inner, "q: ").embed_query(["abc"]) == [[0.0, 6.0]]
    assert inner.texts == 1
