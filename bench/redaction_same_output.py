"""Redaction before/after: the same large mixed text through two revisions of the package.

Builds a text of about ``--mb`` megabytes from the test corpus: the cases of
``tests/test_redaction.py`` (true positives, false positives, the mixed transcript, PEM
blocks, non-ASCII text) and the part data of ``tests/fixtures/opencode-sample.db``, some
pieces JSON-escaped, shuffled with a fixed seed and joined with assorted separators. Then
it redacts that text, whole and piece by piece, with this working tree's package and with
the package at ``--ref`` (a git revision), each in its own process, and compares the
outputs and counts byte for byte. It also prints each side's throughput in MB/s of UTF-8
input (best of ``--repeat`` runs), for the mixed text and for a text of the secret-free
pieces only.

Run: ``.venv/bin/python bench/redaction_same_output.py --ref <rev> [--mb 8]``.
Exit code 0 when both sides agree, 1 when they differ.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import random
import sqlite3
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _join(pieces: list[str], mb: float, rng: random.Random) -> str:
    """Pieces drawn at random, with assorted separators, until about ``mb`` MB."""
    separators = ["\n", "\n\n", " ", ", ", "\\n", "\t", "", "\r\n"]
    out: list[str] = []
    size = 0
    while size < mb * 1_000_000:
        piece = rng.choice(pieces)
        out.append(piece)
        out.append(rng.choice(separators))
        size += len(piece) + 1
    return "".join(out)


def build_corpus(mb: float, seed: int = 20240611) -> dict[str, object]:
    """The distinct pieces, and two texts of about ``mb`` MB each.

    ``mixed`` draws from every piece (dense in secrets); ``plain`` only from the pieces
    without a secret (false positives and the OpenCode fixture), closer to a transcript.
    """
    sys.path[:0] = [str(ROOT / "daemon"), str(ROOT / "tests")]
    import test_redaction as t  # the cases are built at import, deterministically

    secrets: list[str] = [b + s + a for b, s, a, _, _ in t._TP]
    secrets += [t._MIXED, t._PEM_BLOCK, t._JWT, "İstanbul İ API_KEY=" + t._rand(20) + " İ"]
    plain: list[str] = [str(p.values[0]) for p in t.FALSE_POSITIVES]
    fixture = ROOT / "tests" / "fixtures" / "opencode-sample.db"
    with sqlite3.connect(f"file:{fixture}?mode=ro", uri=True) as db:
        plain += [row[0] for row in db.execute("SELECT data FROM part ORDER BY id")]
    pieces = secrets + plain
    pieces += [json.dumps({"output": p}) for p in pieces[::2]]
    rng = random.Random(seed)
    return {
        "pieces": pieces,
        "texts": {"mixed": _join(pieces, mb, rng), "plain": _join(plain, mb, rng)},
    }


def _child(corpus_path: str, result_path: str, repeat: int) -> None:
    """Redact the corpus with whatever package ``PYTHONPATH`` points at; write the results."""
    from opencode_memoryd.redaction.engine import redact

    corpus = json.loads(Path(corpus_path).read_text(encoding="utf-8"))
    result: dict[str, object] = {}
    for name, text in corpus["texts"].items():
        best = float("inf")
        for _ in range(repeat):
            start = time.perf_counter()
            whole = redact(text)
            best = min(best, time.perf_counter() - start)
        result[name] = {
            "sha256": hashlib.sha256(whole.text.encode()).hexdigest(),
            "counts": whole.counts,
            "mb_per_s": len(text.encode()) / 1e6 / best,
        }
    result["pieces"] = [[r.text, r.counts] for r in map(redact, corpus["pieces"])]
    Path(result_path).write_text(json.dumps(result), encoding="utf-8")


def _run_side(daemon_dir: Path, corpus: Path, out: Path, repeat: int) -> dict[str, object]:
    subprocess.run(
        [sys.executable, __file__, "--child", str(corpus), str(out), "--repeat", str(repeat)],
        env={**os.environ, "PYTHONPATH": str(daemon_dir)},
        check=True,
    )
    result: dict[str, object] = json.loads(out.read_text(encoding="utf-8"))
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ref", default="HEAD", help="git revision to compare against")
    parser.add_argument("--mb", type=float, default=8.0, help="size of the text in MB")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per side")
    parser.add_argument("--child", nargs=2, metavar=("CORPUS", "RESULT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args.child[0], args.child[1], repeat=args.repeat)
        return 0

    corpus_data = build_corpus(args.mb)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", "--format=tar", args.ref, "daemon"],
            capture_output=True,
            check=True,
        ).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(tmp / "ref", filter="data")
        corpus = tmp / "corpus.json"
        corpus.write_text(json.dumps(corpus_data), encoding="utf-8")
        before = _run_side(tmp / "ref" / "daemon", corpus, tmp / "before.json", args.repeat)
        after = _run_side(ROOT / "daemon", corpus, tmp / "after.json", args.repeat)

    same = True
    for name in ("mixed", "plain"):
        b, a = before[name], after[name]
        assert isinstance(b, dict) and isinstance(a, dict)
        print(f"{name}: {args.ref} {b['mb_per_s']:.1f} MB/s, working tree "
              f"{a['mb_per_s']:.1f} MB/s, {sum(a['counts'].values())} secrets")
        if (b["sha256"], b["counts"]) != (a["sha256"], a["counts"]):
            print(f"DIFFERENT {name}: {b['counts']} != {a['counts']}")
            same = False
    pb, pa = before["pieces"], after["pieces"]
    assert isinstance(pb, list) and isinstance(pa, list)
    diffs = [i for i, (b, a) in enumerate(zip(pb, pa, strict=True)) if b != a]
    for i in diffs[:5]:
        print(f"DIFFERENT piece {i}:\n  before {pb[i]!r}\n  after  {pa[i]!r}")
    if diffs:
        print(f"{len(diffs)} of {len(pb)} pieces differ")
        same = False
    print("identical" if same else "NOT identical")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
