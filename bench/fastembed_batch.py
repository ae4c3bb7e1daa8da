"""fastembed throughput by batch size, through the product's FastEmbedEmbedder.

Embeds the first ``--texts`` LoCoMo turns (memory-sized texts, 5-60 words) with
all-MiniLM-L6-v2 on a local ONNX export (``bench/_dense.py`` says how to make it) at batch
sizes 1, 4, 8, 16, 32, 64 and fastembed's own default (256), ``--repeats`` times each,
alternating the order; prints the best and median texts/s and the time relative to the
fastest. FastEmbedEmbedder sends the texts shortest first; the last row is fastembed
called directly with its defaults (texts in their given order, batches of 256), as the
product did before. Also prints the latency of embedding one query (the cost a hybrid search adds).
The product's default, ``FASTEMBED_BATCH_SIZE`` in ``opencode_memoryd.store.embedders``
(``[embedding] batch_size``), is chosen from this table.

Usage: ``.bench-venv/bin/python bench/fastembed_batch.py [--data PATH] [--texts N]
[--repeats N]``
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "daemon"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _dense
from locomo_retrieval import DEFAULT_DATA, load, percentile
from opencode_memoryd.store.embedders import FASTEMBED_BATCH_SIZE, FastEmbedEmbedder

FASTEMBED_DEFAULT = 256  # TextEmbedding.embed's own batch_size
SIZES = (1, 4, 8, 16, 32, 64, FASTEMBED_DEFAULT)  # 0 below: fastembed called directly


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="path to locomo10.json")
    ap.add_argument("--texts", type=int, default=512, help="texts per timed run")
    ap.add_argument("--repeats", type=int, default=5, help="timed runs per batch size")
    ap.add_argument("--queries", type=int, default=100, help="timed single-query embeds")
    _dense.add_args(ap)
    args = ap.parse_args(argv)
    if not args.data.is_file():
        print(f"SKIP: LoCoMo data not found at {args.data} (give --data PATH)")
        return 0
    if not args.onnx_dir.is_dir():
        print(f"SKIP: no model directory {args.onnx_dir} (see bench/_dense.py)")
        return 0
    _convs, turns, questions = load(args.data)
    texts = [t.text for t in turns[: args.texts]]
    words = sorted(len(t.split()) for t in texts)
    print(f"{len(texts)} LoCoMo turns, words per text: median {words[len(words) // 2]}, "
          f"max {words[-1]}; model {args.fastembed_model} ({args.onnx_dir.name}); "
          f"product default batch_size {FASTEMBED_BATCH_SIZE}")
    embedders = {b: FastEmbedEmbedder(model=args.fastembed_model, batch_size=b,
                                      model_path=str(args.onnx_dir)) for b in SIZES}
    embedders[SIZES[0]].embed(texts[:16])  # warm-up
    runs: dict[int, list[float]] = {b: [] for b in (*SIZES, 0)}
    for r in range(args.repeats):
        for b in (*SIZES, 0) if r % 2 == 0 else reversed((*SIZES, 0)):
            start = time.perf_counter()
            if b:
                embedders[b].embed(texts)
            else:  # fastembed directly, its defaults, texts as given
                list(embedders[1]._impl.embed(texts))
            runs[b].append(time.perf_counter() - start)
    fastest = min(min(v) for v in runs.values())
    print(f"{'batch_size':>10} {'best texts/s':>13} {'median texts/s':>15} {'x fastest':>10}")
    for b in (*SIZES, 0):
        label = f"{b}" if b else "256, fastembed direct, unsorted"
        print(f"{label:>10} {len(texts) / min(runs[b]):>13.1f} "
              f"{len(texts) / statistics.median(runs[b]):>15.1f} "
              f"{min(runs[b]) / fastest:>10.2f}")
    one = embedders[FASTEMBED_BATCH_SIZE]
    times = []
    for i in range(args.queries):
        start = time.perf_counter()
        one.embed([questions[i % len(questions)].text])
        times.append((time.perf_counter() - start) * 1000)
    print(f"one query embedded: p50 {percentile(times, 50):.1f} ms, "
          f"p95 {percentile(times, 95):.1f} ms ({args.queries} queries)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
