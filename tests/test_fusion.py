"""The hybrid fusion settings and weighted reciprocal rank fusion."""

from __future__ import annotations

from typing import Any

import pytest

from opencode_memoryd.store import fusion
from opencode_memoryd.store.fusion import candidates, rrf_fuse


def test_tuned_defaults() -> None:
    # bench/locomo_hybrid.py: tuned on LoCoMo conversations 0-4
    assert (fusion.RRF_K, fusion.SPARSE_WEIGHT, fusion.DENSE_WEIGHT) == (1, 1.0, 0.6)
    assert candidates(10) == (10, 40)
    assert candidates(1) == (1, 4)
    assert candidates(25) == (25, 100)


def test_default_k_scores() -> None:
    # k = 1: an item at rank r of a ranking weighted w scores w / r
    fused = dict(rrf_fuse([["a", "b", "c"], ["c", "d"]], [1.0, 0.6]))
    assert fused["a"] == pytest.approx(1.0)
    assert fused["b"] == pytest.approx(0.5)
    assert fused["c"] == pytest.approx(1 / 3 + 0.6)
    assert fused["d"] == pytest.approx(0.3)


def test_bm25_first_hit_leads_unless_dense_agrees() -> None:
    # the dense top hit outranks BM25's second, never its first ...
    order = [pid for pid, _ in rrf_fuse([["s1", "s2", "s3"], ["d1", "d2"]], [1.0, 0.6])]
    assert order == ["s1", "d1", "s2", "s3", "d2"]
    # ... unless both rankings hold it: then it rises above BM25's first alone
    order = [pid for pid, _ in rrf_fuse([["s1", "s2"], ["s2", "d2"]], [1.0, 0.6])]
    assert order[0] == "s2"


def test_ties_keep_first_seen_order_and_zero_weight_ignores() -> None:
    assert [p for p, _ in rrf_fuse([["a"], ["b"]], [1.0, 1.0])] == ["a", "b"]
    assert rrf_fuse([["a"], ["b"]], [1.0, 0.0]) == [("a", 1.0)]


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="one weight per ranking"):
        rrf_fuse([["a"]], [1.0, 1.0])
    with pytest.raises(ValueError, match="k must be at least 1"):
        rrf_fuse([["a"]], [1.0], k=0)


def test_fastembed_batch_size_default_matches_the_config() -> None:
    from opencode_memoryd.config.embedding import EmbeddingConfig
    from opencode_memoryd.store.embedders import FASTEMBED_BATCH_SIZE

    assert EmbeddingConfig().batch_size == FASTEMBED_BATCH_SIZE == 16


def test_fastembed_batch_size_must_be_positive() -> None:
    from opencode_memoryd.store.embedders import FastEmbedEmbedder

    with pytest.raises(ValueError, match="batch_size must be positive"):
        FastEmbedEmbedder(batch_size=0)


def test_fastembed_embeds_shortest_first_and_keeps_order() -> None:
    from opencode_memoryd.store.embedders import FastEmbedEmbedder

    class Model:  # stands in for fastembed's TextEmbedding (no model files here)
        def __init__(self) -> None:
            self.calls: list[tuple[str, list[str], int]] = []

        def passage_embed(self, texts: list[str], batch_size: int) -> list[list[float]]:
            self.calls.append(("passage", texts, batch_size))
            return [[float(len(t))] for t in texts]

        def query_embed(self, texts: list[str], batch_size: int) -> list[list[float]]:
            self.calls.append(("query", texts, batch_size))
            return [[-float(len(t))] for t in texts]

    emb = object.__new__(FastEmbedEmbedder)
    emb.batch_size, model = 3, Model()
    emb.query_prefix, emb.document_prefix = "q: ", ""
    emb._impl = model  # type: ignore[assignment]
    texts = ["ccc", "a", "bbbbb", "dd"]
    assert emb.embed(texts) == [[3.0], [1.0], [5.0], [2.0]]
    assert model.calls == [("passage", ["a", "dd", "ccc", "bbbbb"], 3)]
    assert emb.embed_query(["ab", "a"]) == [[-5.0], [-4.0]]
    assert model.calls[1] == ("query", ["q: a", "q: ab"], 3)
    assert emb.embed([]) == []


def test_a_fastembed_model_failure_is_an_upstream_error() -> None:
    """fastembed and onnxruntime raise their own exceptions; callers (capture, search,
    reembed) handle an embedder failure as :class:`UpstreamError`."""
    from opencode_memoryd.errors import UpstreamError
    from opencode_memoryd.store.embedders import FastEmbedEmbedder

    class Broken:  # stands in for fastembed's TextEmbedding whose ONNX session fails
        def passage_embed(self, texts: list[str], batch_size: int) -> Any:
            yield [1.0]
            raise RuntimeError("onnxruntime: bad allocation")

    emb = object.__new__(FastEmbedEmbedder)
    emb.batch_size, emb.model = 8, "test/model"
    emb.query_prefix, emb.document_prefix = "", ""
    emb._impl = Broken()  # type: ignore[assignment]
    with pytest.raises(UpstreamError, match="RuntimeError: onnxruntime: bad allocation") as err:
        emb.embed(["a", "bb"])
    assert err.value.kind == "server" and "test/model" in str(err.value)
