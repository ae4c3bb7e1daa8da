"""LoCoMo hybrid retrieval (BM25 + dense) through EdgeStore, and the fusion tuned on it.

The setup of ``bench/locomo_retrieval.py`` (every turn one point, each non-adversarial
question searched in its conversation, a hit at k when an evidence turn is in the top k),
with a dense embedder in the store: all-MiniLM-L6-v2 through the product's
``FastEmbedEmbedder`` on a local ONNX export, or any OpenAI-compatible endpoint
(``--embeddings-url``); vectors are cached on disk (``bench/_dense.py`` says how to set the
model up). Absent data or embedder: prints a skip message and exits 0.

Prints, per split (conversations 0-4 = tune, 5-9 = test, all), R@5, R@10 and MRR@10 of:
BM25 alone, dense alone, hybrid with the fusion shipped before tuning (RRF k = 60, dense
weight 0.5, 40 candidates a side), hybrid with the tuned store defaults
(``opencode_memoryd.store.fusion``) as ``EdgeStore.search`` answers, and the tuning grid
(RRF k x dense weight x candidates a side) ranked by R@10 on conversations 0-4 only.
The grid fuses the BM25 and dense rankings (100 deep, from the same store) with
``rrf_fuse``; the chosen row is then checked end to end through ``EdgeStore.search``.

Usage: ``.bench-venv/bin/python bench/locomo_hybrid.py [--data PATH] [--top N]``
"""

from __future__ import annotations

import argparse
import itertools
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "daemon"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _dense
from locomo_retrieval import DEFAULT_DATA, Question, as_memory, batched, load
from opencode_memoryd.store import fusion
from opencode_memoryd.store.api import DENSE_NAME, SPARSE_NAME, MemoryFilter
from opencode_memoryd.store.edge import EdgeStore

DEPTH = 100  # ranking depth kept per side for the grid
SPLITS = ("0-4", "5-9", "all")
K_GRID = (1, 2, 3, 4, 5, 7, 10, 20, 60)
WEIGHT_GRID = (0.25, 0.4, 0.5, 0.6, 0.75, 1.0, 1.25, 1.5)
DEPTH_GRID = (10, 20, 40, 100)  # candidates: sparse side x dense side
SHIPPED = (60, 0.5, 40, 40)  # RRF k, dense weight, candidates a side, before tuning
#: R@10 differences on 0-4 below this (1% of the questions) count as ties, broken by MRR@10
PLATEAU = 0.01

Scores = dict[str, tuple[float, float, float]]  # split -> (R@5, R@10, MRR@10)


def score(questions: Sequence[Question], ranked: Callable[[int], list[str]]) -> Scores:
    """R@5, R@10 and MRR@10 per split; ``ranked(i)`` is question i's dia_id list."""
    rows: dict[str, list[tuple[float, float, float]]] = {s: [] for s in SPLITS}
    for i, q in enumerate(questions):
        got = ranked(i)[:10]
        first = next((r for r, d in enumerate(got, 1) if d in q.evidence), 0)
        row = (float(0 < first <= 5), float(first > 0), 1.0 / first if first else 0.0)
        rows["0-4" if q.conv_index < 5 else "5-9"].append(row)
        rows["all"].append(row)
    return {s: tuple(sum(c) / max(1, len(v)) for c in zip(*v, strict=True))  # type: ignore[misc]
            for s, v in rows.items()}


def rankings(store: EdgeStore, questions: Sequence[Question]
             ) -> tuple[list[list[str]], list[list[str]]]:
    """Each question's BM25 and dense rankings (dia_ids, :data:`DEPTH` deep)."""
    import qdrant_edge as qe

    sparse_r, dense_r = [], []
    vecs = store._embedder.embed([q.text for q in questions])  # type: ignore[union-attr]
    for q, vec in zip(questions, vecs, strict=True):
        flt = MemoryFilter(project_id=q.conv)
        sv = store._bm25.embed_query(q.text)
        hits = (store._query(qe.SparseVector(sv.indices, sv.values), SPARSE_NAME, flt, DEPTH)
                if sv else [])
        sparse_r.append([h.payload["message_ids"][0] for h in hits])
        hits = store._query(vec, DENSE_NAME, flt, DEPTH)
        dense_r.append([h.payload["message_ids"][0] for h in hits])
    return sparse_r, dense_r


def fused(sparse_r: list[list[str]], dense_r: list[list[str]], k: int, w: float,
          sparse_n: int, dense_n: int) -> Callable[[int], list[str]]:
    def ranked(i: int) -> list[str]:
        return [d for d, _ in fusion.rrf_fuse([sparse_r[i][:sparse_n], dense_r[i][:dense_n]],
                                              [fusion.SPARSE_WEIGHT, w], k=k)]
    return ranked


def line(label: str, s: Scores) -> str:
    return f"{label:<56}" + "".join(f" {s[p][0]:>6.3f} {s[p][1]:>6.3f} {s[p][2]:>6.3f}"
                                    for p in SPLITS)


def header() -> str:
    top = f"{'':<56}" + "".join(f" {'conv ' + p:^20}" for p in SPLITS)
    return top + "\n" + f"{'retrieval':<56}" + " R@5    R@10   MRR   " * len(SPLITS)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="path to locomo10.json")
    ap.add_argument("--top", type=int, default=12, help="grid rows to print")
    _dense.add_args(ap)
    args = ap.parse_args(argv)
    if not args.data.is_file():
        print(f"SKIP: LoCoMo data not found at {args.data} (give --data PATH)")
        return 0
    emb = _dense.embedder(args)
    if emb is None:
        print(f"SKIP: no dense embedder: no vector cache, no {args.onnx_dir}, no "
              "--embeddings-url (see bench/_dense.py)")
        return 0

    convs, turns, questions = load(args.data)
    memories = [as_memory(t, i) for i, t in enumerate(turns)]
    print(f"LoCoMo: {len(convs)} conversations, {len(turns)} turns, {len(questions)} "
          f"questions (0-4: {sum(q.conv_index < 5 for q in questions)}, 5-9: "
          f"{sum(q.conv_index >= 5 for q in questions)}); dense: {emb.name}")
    with tempfile.TemporaryDirectory(prefix="memoryd-bench-") as tmp:
        store = EdgeStore(Path(tmp) / "hybrid", emb)
        try:
            start = time.perf_counter()
            for chunk in batched(memories):
                store.upsert(chunk)
            emb.embed([q.text for q in questions])
            emb.save()
            print(f"indexed {len(memories)} points and embedded the questions in "
                  f"{time.perf_counter() - start:.1f} s ({emb.misses} texts embedded, "
                  "the rest from the cache)")
            sparse_r, dense_r = rankings(store, questions)
            by_id = {m.id: m.message_ids[0] for m in memories}

            def store_search(i: int) -> list[str]:
                q = questions[i]
                found = store.search(q.text, flt=MemoryFilter(project_id=q.conv), limit=10)
                return [by_id[m.id] for m, _ in found]

            print("\n" + header())
            print(line("BM25 alone", score(questions, lambda i: sparse_r[i])))
            print(line("dense alone", score(questions, lambda i: dense_r[i])))
            print(line(f"hybrid, shipped fusion ({setting(SHIPPED)})",
                       score(questions, fused(sparse_r, dense_r, *SHIPPED))))
            print(line(f"hybrid, EdgeStore.search ({setting(defaults())})",
                       score(questions, store_search)))
        finally:
            store.close()

    grid = []
    for k, w, sn, dn in itertools.product(K_GRID, WEIGHT_GRID, DEPTH_GRID, DEPTH_GRID):
        grid.append(((k, w, sn, dn), score(questions, fused(sparse_r, dense_r, k, w, sn, dn))))
    grid.sort(key=lambda row: (-row[1]["0-4"][1], -row[1]["0-4"][2], -row[1]["0-4"][0]))
    best_r10 = grid[0][1]["0-4"][1]
    plateau = [row for row in grid if row[1]["0-4"][1] >= best_r10 - PLATEAU]
    chosen = max(plateau, key=lambda row: (row[1]["0-4"][2], row[1]["0-4"][1]))
    print(f"\nTuning grid ({len(grid)} settings: RRF k x dense weight x sparse and dense "
          "candidates), ranked by R@10 on conversations 0-4 (then MRR, R@5); 5-9 held out")
    print(header())
    for params, s in grid[:args.top]:
        print(line(setting(params), s))
    bm25 = score(questions, lambda i: sparse_r[i])["5-9"][1]
    params, s = grid[0]
    print(f"\nbest 0-4 R@10: {setting(params)} -> 5-9 R@10 {s['5-9'][1]:.3f}")
    params, s = chosen
    print(f"chosen on 0-4 (best MRR@10 among the {len(plateau)} settings within "
          f"{PLATEAU} of the best R@10): {setting(params)}")
    print(line("  chosen", s))
    print(f"  -> 5-9 R@10 {s['5-9'][1]:.3f} (BM25 alone {bm25:.3f}); store defaults: "
          f"{setting(defaults())}")
    return 0


def defaults() -> tuple[int, float, int, int]:
    """The store's fusion settings for a search of limit 10."""
    return (fusion.RRF_K, fusion.DENSE_WEIGHT, *fusion.candidates(10))


def setting(p: tuple[int, float, int, int]) -> str:
    return f"k {p[0]}, w {p[1]}, {p[2]} sparse + {p[3]} dense"


if __name__ == "__main__":
    raise SystemExit(main())
