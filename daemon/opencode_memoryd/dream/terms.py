"""Salient terms of memory texts: what grouping and the fact checks compare."""

from __future__ import annotations

from opencode_memoryd.store.bm25 import Bm25Encoder, default_encoder


class SalientTerms:
    """The salient terms of a text: its stemmed, stopword-free BM25 token ids, as the
    store's tokenizer (:mod:`opencode_memoryd.store.bm25`) makes them.

    Args:
        encoder: the tokenizer (default: the shared default encoder, the one the store
            indexes with).
        cache_size: texts remembered; the cache is emptied when it is full.
    """

    def __init__(self, encoder: Bm25Encoder | None = None, *, cache_size: int = 8192) -> None:
        self._encoder = encoder or default_encoder()
        self._cache: dict[str, frozenset[int]] = {}
        self._cache_size = cache_size

    def __call__(self, text: str) -> frozenset[int]:
        """The salient term ids of ``text`` (empty when every word is a stopword)."""
        got = self._cache.get(text)
        if got is None:
            if len(self._cache) >= self._cache_size:
                self._cache.clear()
            got = self._cache[text] = frozenset(self._encoder.embed_query(text).indices)
        return got
