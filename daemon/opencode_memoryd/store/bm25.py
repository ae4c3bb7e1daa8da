"""Local BM25 sparse vectors for the memory store: no model, no network.

Documents and queries are tokenised by ``qdrant_edge.Bm25`` (Qdrant's own BM25 tokenizer,
running in-process): word tokenizer, lowercase, English stopwords, English Snowball stemmer.
Each token is hashed to a 32-bit sparse index. Documents get the BM25 term-frequency part of
the weight (``k1``, ``b``, ``avg_len``); queries get weight 1.0 per unique token. The IDF part
is *not* applied here: the store's sparse vector is configured with Qdrant's IDF modifier,
so Qdrant computes IDF over the points actually stored (Robertson & Zaragoza, "The
Probabilistic Relevance Framework: BM25 and Beyond", 2009, for the weighting scheme).

Question words (what/when/where/who/whom/which/how/why) are stopwords by default, as in the
configuration measured with ``bench/locomo_retrieval.py`` (qdrant_edge.Bm25's English defaults).
Keeping them as terms scored lower on LoCoMo in every setting tried: R@10 -0.4 points and
R@5 -1.9 points with IDF over all conversations (``bench/locomo_retrieval.py`` prints this
ablation), -2.4 points on both with IDF per conversation. Question words occur in
questions, rarely in the facts that answer them. ``Bm25Encoder(keep_question_words=True)``
is the variant that keeps them.

The sparse indices come from the tokenizer's hashing, so a store must be searched with the
settings it was indexed with: :attr:`Bm25Encoder.settings` (``BM25_SETTINGS`` for the
default encoder) is recorded with the store, and :func:`settings_mismatch` compares them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import qdrant_edge

from opencode_memoryd.text import ENGLISH_STOPWORDS, QUESTION_WORDS

#: BM25 term-frequency saturation (Robertson & Zaragoza 2009; the usual default).
K1 = 1.2
#: BM25 document-length normalisation, 0 (none) to 1 (full).
B = 0.75
#: Expected average document length in tokens. 256 is ``qdrant_edge.Bm25``'s default and
#: the value measured with bench/locomo_retrieval.py; a value near the real mean length of
#: short memories (~20 tokens) scored lower on LoCoMo (R@10 0.679 vs 0.691, conversations
#: 0-4).
AVG_LEN = 256.0
LANGUAGE = "english"
#: Whether question words stay as terms (see the module docstring for the measurement).
KEEP_QUESTION_WORDS = False

#: Text encoded to fingerprint the tokenizer: if a new qdrant-edge-py hashes or stems
#: differently, the fingerprint changes and stored sparse vectors no longer match queries.
_FINGERPRINT_TEXT = (
    "Running the tests: pnpm vitest --run src/store/query.ts; never npm. "
    "PostgreSQL 16 migrations failed with ENOENT at 2024-05-01, what about Café naïve?"
)


def _tokenizer_version() -> str:
    try:
        return f"qdrant-edge-py=={version('qdrant-edge-py')}"
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "qdrant-edge-py==unknown"


@dataclass(frozen=True, slots=True)
class SparseVector:
    """A sparse vector: parallel lists of token ids (uint32 hashes) and weights."""

    indices: list[int]
    values: list[float]

    def __bool__(self) -> bool:
        return bool(self.indices)


class Bm25Encoder:
    """BM25 encoder over ``qdrant_edge.Bm25`` with this project's settings.

    Args:
        k1: term-frequency saturation (>= 0).
        b: length normalisation in [0, 1].
        avg_len: expected average document length in tokens (> 0).
        keep_question_words: keep what/when/where/who/whom/which/how/why as terms.

    Raises:
        ValueError: invalid parameters (raised by ``qdrant_edge.Bm25``).

    Thread-safety: encoding is stateless; one encoder may be shared by threads.
    """

    def __init__(
        self,
        *,
        k1: float = K1,
        b: float = B,
        avg_len: float = AVG_LEN,
        keep_question_words: bool = KEEP_QUESTION_WORDS,
    ) -> None:
        stopwords = ENGLISH_STOPWORDS - QUESTION_WORDS if keep_question_words else ENGLISH_STOPWORDS
        self._stopwords = frozenset(stopwords)
        config = qdrant_edge.Bm25Config(
            k=k1,
            b=b,
            avg_len=avg_len,
            tokenizer=qdrant_edge.TokenizerType.Word,
            language=LANGUAGE,
            lowercase=True,
            stopwords=qdrant_edge.StopwordsSet(custom=set(self._stopwords)),
            stemmer=qdrant_edge.SnowballParams(qdrant_edge.SnowballLanguage.English),
        )
        self._model = qdrant_edge.Bm25(config)
        self.settings: dict[str, Any] = {
            "tokenizer": "qdrant_edge.Bm25/word",
            "tokenizer_version": _tokenizer_version(),
            "language": LANGUAGE,
            "stemmer": "snowball-english",
            "lowercase": True,
            "k1": k1,
            "b": b,
            "avg_len": avg_len,
            "keep_question_words": keep_question_words,
            "stopwords_sha256": hashlib.sha256(
                "\n".join(sorted(self._stopwords)).encode("utf-8")
            ).hexdigest(),
            "idf": "qdrant-modifier",
        }
        self.settings["fingerprint"] = self._fingerprint()

    def embed_document(self, text: str) -> SparseVector:
        """Encode a stored text: BM25 term-frequency weights (no IDF), one entry per term."""
        v = self._model.embed_document(text)
        return SparseVector(list(v.indices), list(v.values))

    def embed_documents(self, texts: Sequence[str]) -> list[SparseVector]:
        """Encode several stored texts (see :meth:`embed_document`)."""
        return [self.embed_document(t) for t in texts]

    def embed_query(self, text: str) -> SparseVector:
        """Encode a query: weight 1.0 per unique term. Empty when every word is a stopword."""
        v = self._model.embed_query(text)
        return SparseVector(list(v.indices), list(v.values))

    def _fingerprint(self) -> str:
        v = self._model.embed_document(_FINGERPRINT_TEXT)
        pairs = sorted(zip(v.indices, (round(x, 5) for x in v.values), strict=True))
        return hashlib.sha256(json.dumps(pairs).encode("utf-8")).hexdigest()[:16]


#: Settings compared between a store and the running encoder: everything that changes the
#: sparse vectors. ``tokenizer_version`` is informative only; the fingerprint catches a
#: version whose tokenisation differs.
_COMPARED_KEYS = (
    "tokenizer",
    "language",
    "stemmer",
    "lowercase",
    "k1",
    "b",
    "avg_len",
    "stopwords_sha256",
    "idf",
    "fingerprint",
)


def settings_mismatch(stored: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """Return the differences that make stored sparse vectors incompatible, as
    ``"key: stored X, now Y"`` lines (empty list when compatible)."""
    out = []
    for key in _COMPARED_KEYS:
        if stored.get(key) != current.get(key):
            out.append(f"{key}: stored {stored.get(key)!r}, now {current.get(key)!r}")
    return out


@lru_cache(maxsize=1)
def default_encoder() -> Bm25Encoder:
    """The process-wide encoder with the default settings (created once)."""
    return Bm25Encoder()


#: The default encoder's settings, recorded with every store built with it.
BM25_SETTINGS: dict[str, Any] = dict(default_encoder().settings)
