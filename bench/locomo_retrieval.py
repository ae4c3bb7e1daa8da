"""LoCoMo turn retrieval through the project's own store code (EdgeStore, BM25 only).

BM25 + dense (hybrid) retrieval and the fusion tuning: ``bench/locomo_hybrid.py``.

Recall: every turn of the 10 LoCoMo conversations is one point, tagged with its
conversation as ``project_id``; each non-adversarial question (category != 5) is searched
within its conversation (project filter) and counts as a hit at k when one of its evidence
turns is in the top k. Conversations 0-4 are the development half, 5-9 held out.
Evidence ids are read through LoCoMo's typos (:func:`evidence_ids`; ``--raw-evidence`` takes
them as written, as every measurement before that repair did: 5 questions, 1 in 0-4 and 4 in
5-9, then name no turn and count as misses for every retrieval).

Latency: stores of 1k and 10k points built from LoCoMo turns (repeated with a suffix when
there are too few), 10 projects, ``search`` with a project filter, before and after
``EdgeStore.optimize()``.

Data: LoCoMo (Maharana et al., ACL 2024; ``locomo10.json``, CC BY-NC 4.0), expected at
``../shared/data/locomo10.json`` next to the repository, or ``--data PATH``. Absent data:
prints a skip message and exits 0.

Usage: ``.venv/bin/python bench/locomo_retrieval.py [--data PATH] [--searches N]
[--no-latency] [--no-ablation]``
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "daemon"))

from opencode_memoryd.models import Memory
from opencode_memoryd.store.api import MemoryFilter
from opencode_memoryd.store.bm25 import Bm25Encoder
from opencode_memoryd.store.edge import EdgeStore

DEFAULT_DATA = Path(__file__).resolve().parents[1].parent / "shared/data/locomo10.json"
NAMESPACE = uuid.UUID("3d4f1c8e-9b2a-5e67-8c10-2f9a7b6d5e41")  # bench-only id namespace
T0 = datetime(2023, 1, 1, tzinfo=UTC)
REFERENCE = "docs/retrieval.md, BM25: R@10 0.699 all / 0.705 conv 5-9; R@5 0.615 all"


@dataclass(frozen=True)
class Turn:
    conv: str
    dia_id: str
    text: str


@dataclass(frozen=True)
class Question:
    conv_index: int
    conv: str
    text: str
    evidence: frozenset[str]


#: An evidence reference as LoCoMo writes it, typos included: ``D8:6``, ``D30:05``,
#: ``D:11:26``; several may share one string (``"D8:6; D9:17"``, ``"D9:1 D4:4"``).
_EVIDENCE = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)")


def evidence_ids(raw: Iterable[str], *, repair: bool = True) -> frozenset[str]:
    """A question's evidence turn ids. ``repair``: read every ``D<session>:<turn>`` in each
    string, without leading zeros, so that ``"D8:6; D9:17"``, ``"D30:05"`` and ``"D:11:26"``
    name the turns they mean; a string naming no turn (``"D"``) is dropped. Otherwise the
    strings as they are (5 questions of locomo10.json then name no turn at all)."""
    if not repair:
        return frozenset(raw)
    return frozenset(f"D{int(a)}:{int(b)}" for r in raw for a, b in _EVIDENCE.findall(r))


def load(path: Path, *, repair: bool = True) -> tuple[list[str], list[Turn], list[Question]]:
    """Conversation ids, every turn (``speaker: text`` plus the image caption, if any) and
    every non-adversarial question with evidence (:func:`evidence_ids` with ``repair``)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    convs, turns, questions = [], [], []
    for ci, sample in enumerate(data):
        conv = str(sample.get("sample_id") or f"conv-{ci}")
        convs.append(conv)
        for key, session in sample["conversation"].items():
            if not key.startswith("session_") or not isinstance(session, list):
                continue
            for t in session:
                text = f"{t['speaker']}: {t['text']}"
                if t.get("blip_caption"):
                    text += f" [shares a photo: {t['blip_caption']}]"
                turns.append(Turn(conv, t["dia_id"], text))
        for qa in sample["qa"]:
            ev = evidence_ids(qa.get("evidence") or [], repair=repair)
            if qa.get("category") == 5 or not ev:
                continue
            questions.append(Question(ci, conv, str(qa["question"]), ev))
    return convs, turns, questions


def add_data_args(ap: argparse.ArgumentParser) -> None:
    """``--data`` and ``--raw-evidence``, shared by the LoCoMo benches."""
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="path to locomo10.json")
    ap.add_argument("--raw-evidence", action="store_true",
                    help="take evidence ids as written (no repair of LoCoMo's typos; the "
                         "measurements made before the repair)")


def as_memory(turn: Turn, n: int, suffix: str = "") -> Memory:
    """One turn as a project-scope memory of project ``turn.conv``."""
    t = T0 + timedelta(seconds=n)
    return Memory(
        id=str(uuid.uuid5(NAMESPACE, f"{turn.conv}|{turn.dia_id}|{suffix}")),
        content=turn.text + suffix,
        type="project",
        scope="project",
        project_id=turn.conv,
        project_root=None,
        session_id=f"locomo-{turn.conv}",
        message_ids=[turn.dia_id],
        source="manual",
        created_at=t,
        updated_at=t,
    )


def batched(items: list[Memory], size: int = 512) -> Iterable[list[Memory]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def build(path: Path, memories: list[Memory], bm25: Bm25Encoder | None = None
          ) -> tuple[EdgeStore, float]:
    """A fresh EdgeStore holding ``memories``; returns it and the upsert time (s)."""
    store = EdgeStore(path, bm25=bm25)
    start = time.perf_counter()
    for chunk in batched(memories):
        store.upsert(chunk)
    return store, time.perf_counter() - start


def recall(store: EdgeStore, questions: list[Question]) -> dict[str, tuple[int, float, float]]:
    """``{"0-4"|"5-9"|"all": (questions, R@5, R@10)}``."""
    hits: dict[str, list[tuple[bool, bool]]] = {"0-4": [], "5-9": [], "all": []}
    for q in questions:
        found = store.search(q.text, flt=MemoryFilter(project_id=q.conv), limit=10)
        got = [m.message_ids[0] for m, _ in found]
        row = (bool(q.evidence & set(got[:5])), bool(q.evidence & set(got[:10])))
        hits["0-4" if q.conv_index < 5 else "5-9"].append(row)
        hits["all"].append(row)
    return {
        k: (len(v), sum(a for a, _ in v) / max(1, len(v)), sum(b for _, b in v) / max(1, len(v)))
        for k, v in hits.items()
    }


def interleaved(convs: list[str], turns: list[Turn], n: int) -> list[Memory]:
    """``n`` memories taking turns round-robin across conversations, repeating every turn
    with a ``" (copy k)"`` suffix once all are used."""
    by_conv = {c: [t for t in turns if t.conv == c] for c in convs}
    order: list[Turn] = []
    depth = max(len(v) for v in by_conv.values())
    for i in range(depth):
        for c in convs:
            if i < len(by_conv[c]):
                order.append(by_conv[c][i])
    out = []
    for i in range(n):
        copy = i // len(order)
        out.append(as_memory(order[i % len(order)], i, f" (copy {copy})" if copy else ""))
    return out


def percentile(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(p / 100 * (len(s) - 1))))]


def time_searches(store: EdgeStore, questions: list[Question], n: int) -> tuple[float, float]:
    """p50, p95 of ``n`` filtered searches (ms)."""
    times = []
    for i in range(n):
        q = questions[(i * 7) % len(questions)]
        start = time.perf_counter()
        store.search(q.text, flt=MemoryFilter(project_id=q.conv), limit=10)
        times.append((time.perf_counter() - start) * 1000)
    return percentile(times, 50), percentile(times, 95)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_args(ap)
    ap.add_argument("--searches", type=int, default=200, help="timed searches per store")
    ap.add_argument("--no-latency", action="store_true", help="skip the latency part")
    ap.add_argument("--no-ablation", action="store_true",
                    help="skip the question-words ablation")
    args = ap.parse_args(argv)

    if not args.data.is_file():
        print(f"SKIP: LoCoMo data not found at {args.data} (give --data PATH)")
        return 0

    convs, turns, questions = load(args.data, repair=not args.raw_evidence)
    memories = [as_memory(t, i) for i, t in enumerate(turns)]
    print(f"LoCoMo: {len(convs)} conversations, {len(turns)} turns, "
          f"{len(questions)} non-adversarial questions with evidence")

    variants: list[tuple[str, Bm25Encoder | None]] = [("BM25 (default settings)", None)]
    if not args.no_ablation:
        variants.append(("BM25, question words kept as terms",
                         Bm25Encoder(keep_question_words=True)))

    rows = []
    with tempfile.TemporaryDirectory(prefix="memoryd-bench-") as tmp:
        for vi, (label, enc) in enumerate(variants):
            store, upsert_s = build(Path(tmp) / f"recall-{vi}", memories, enc)
            try:
                start = time.perf_counter()
                r = recall(store, questions)
                search_s = time.perf_counter() - start
            finally:
                store.close()
            rows.append((label, r))
            print(f"  {label}: indexed {len(memories)} points in {upsert_s:.2f} s; "
                  f"{len(questions)} searches in {search_s:.2f} s")

        print("\nRecall (evidence turn in top k, searching the question's conversation)")
        print(f"{'retrieval':<38} {'R@5 0-4':>8} {'R@10 0-4':>9} {'R@5 5-9':>8} "
              f"{'R@10 5-9':>9} {'R@5 all':>8} {'R@10 all':>9}")
        for label, r in rows:
            print(f"{label:<38} {r['0-4'][1]:>8.3f} {r['0-4'][2]:>9.3f} {r['5-9'][1]:>8.3f} "
                  f"{r['5-9'][2]:>9.3f} {r['all'][1]:>8.3f} {r['all'][2]:>9.3f}")
        print(f"questions: 0-4 {rows[0][1]['0-4'][0]}, 5-9 {rows[0][1]['5-9'][0]}")
        print(f"reference: {REFERENCE}")

        if args.no_latency:
            return 0
        print(f"\nSearch latency: EdgeStore.search, BM25, project filter (~10% of points), "
              f"limit 10, {args.searches} searches")
        print(f"{'points':>7} {'upsert pts/s':>13} {'p50 ms':>8} {'p95 ms':>8} "
              f"{'p50 ms opt':>11} {'p95 ms opt':>11} {'optimize s':>11} {'reopen s':>9}")
        for n in (1_000, 10_000):
            path = Path(tmp) / f"latency-{n}"
            mems = interleaved(convs, turns, n)
            store, upsert_s = build(path, mems)
            try:
                time_searches(store, questions, 20)  # warm-up
                p50, p95 = time_searches(store, questions, args.searches)
                start = time.perf_counter()
                store.optimize()
                opt_s = time.perf_counter() - start
                p50o, p95o = time_searches(store, questions, args.searches)
                assert store.count() == n
            finally:
                store.close()
            start = time.perf_counter()
            EdgeStore(path).close()
            reopen_s = time.perf_counter() - start
            print(f"{n:>7} {n / upsert_s:>13.0f} {p50:>8.2f} {p95:>8.2f} {p50o:>11.2f} "
                  f"{p95o:>11.2f} {opt_s:>11.2f} {reopen_s:>9.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
