"""Which hits deserve a recall part: the measurement behind the recall part's minimum
relevance (``usecases/recall.py``).

Over the natural-query fixtures (``bench/data/natural_queries.json``: questions with the
memory that answers them, over stores that rules-mode capture builds from the genuine
OpenCode databases, as ``bench/natural_queries.py`` builds them) and a list of messages
that ask nothing the memories answer (:data:`UNRELATED`: thanks, follow-up orders), each
message is searched in the scope an agent searches (its project and the user scope, 10
hits; hybrid with the local model, or BM25 alone), and each candidate rule keeps some of
the hits.
Printed per rule and configuration: the share of questions whose answer is in the part
(among the first 5 hits the rule keeps), and the share of the messages that ask nothing
that still get a part.

Features of a hit: ``cos``, the cosine of the message's and the memory's multilingual-e5
vectors (``query: `` and ``passage: ``); the content words
(:func:`~opencode_memoryd.extract.facts.content_words`) the memory shares with the message
and with the tools of a category the message names (the query expansion's lexicon), the
same word or by prefix (:func:`~opencode_memoryd.usecases.relevance.alike`); the rule the
product uses (:meth:`~opencode_memoryd.usecases.relevance.Message.supports`).

Usage: ``.venv/bin/python bench/recall_relevance.py [--why RULE]``. Prints numbers;
asserts nothing.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from natural_queries import captured, load, worktrees  # noqa: E402
from opencode_memoryd.extract.facts import content_words  # noqa: E402
from opencode_memoryd.models import normalize_text  # noqa: E402
from opencode_memoryd.usecases.relevance import Message, alike  # noqa: E402

#: Messages a user sends in a coding session that ask nothing a memory answers.
UNRELATED = [
    "thanks", "thank you!", "ok", "great, looks good", "perfect", "continue", "yes, do it",
    "go ahead", "try again", "run the tests again", "fix the typo in line 3",
    "that didn't work", "undo that change", "explain this function", "make it shorter",
    "add a docstring to it", "rename that variable to count",
    "now do the same for the other file", "looks good, ship it", "hmm, are you sure?",
    "what does this error mean?", "can you split this into two functions",
    "remove the print statements", "why is this loop slow", "add a comment above the regex",
    "sort the list alphabetically", "show me the diff", "revert the last edit",
    "fix the indentation", "good job",
]
#: Hits searched per message (the part's 5 entries, and room for what the session has).
LIMIT = 10
NOT_FACTS = ("project-brief", "session-summary")

Hit = dict[str, Any]


def features(svc: Any, vec: Callable[[bool, str], np.ndarray], text: str, directory: str,
             db: Path) -> list[Hit]:
    """The hits for ``text`` with their features, best first."""
    message = Message.of(text)
    hits = svc.search(query=text, directory=directory, db=str(db), limit=LIMIT)
    out = []
    for h in hits:
        if h["type"] in NOT_FACTS:
            continue
        mine = content_words(h["content"])
        words = message.words | message.expansion
        out.append({
            "content": h["content"],
            "cos": float(vec(True, text) @ vec(False, h["content"])),
            "words": len(words & mine),
            "near": sum(any(alike(w, m) for m in mine) for w in words),
            "expanded": any(alike(w, m) for w in message.expansion for m in mine),
            "chosen": message.supports(h["content"]),
        })
    return out


def _cos(t: float) -> Callable[[Hit], bool]:
    return lambda h: bool(h["cos"] >= t)


RULES: dict[str, Callable[[Hit], bool]] = {
    "any hit": lambda h: True,
    **{f"cos >= {t:.2f}": _cos(t) for t in (0.80, 0.82, 0.84, 0.86)},
    "1 word (same word)": lambda h: h["words"] >= 1,
    "1 word (or its prefix)": lambda h: h["near"] >= 1,
    "2 words, or a tool": lambda h: h["near"] >= 2 or h["expanded"],
    "2 words, a tool, or 1 word + question (the product's)": lambda h: h["chosen"],
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--why", metavar="RULE", help="print the answers RULE (a name in "
                        "the table) loses and the unrelated messages it gives a part")
    args = parser.parse_args(argv)
    dbs, questions = load()
    from opencode_memoryd.store.local_embedder import LocalEmbedder

    model = LocalEmbedder()
    cache: dict[tuple[bool, str], np.ndarray] = {}

    def vec(query: bool, text: str) -> np.ndarray:
        if (query, text) not in cache:
            run = model.embed_query if query else model.embed
            cache[(query, text)] = np.asarray(run([text])[0])
        return cache[(query, text)]

    for provider in ("local", "none"):
        asked: list[tuple[str, list[Hit], str]] = []  # question, hits, answer
        unrelated: list[tuple[str, list[Hit]]] = []
        for name, path in dbs.items():
            trees = worktrees(path)
            with captured(path, provider) as (svc, copy):
                for q in (q for q in questions if q.db == name):
                    asked.append((q.text, features(svc, vec, q.text, trees[q.project], copy),
                                  normalize_text(q.answer)))
                if name == "natural":
                    for project in sorted(trees):
                        unrelated += [(f"{project}: {text}",
                                       features(svc, vec, text, trees[project], copy))
                                      for text in UNRELATED]
        print(f"\n== provider {provider}: {len(asked)} questions, {len(unrelated)} messages "
              "that ask nothing")
        print(f"{'rule':<55} {'answer kept':>11} {'part anyway':>11}")
        for label, rule in RULES.items():
            if provider == "none" and label.startswith("cos"):
                continue
            lost = [(text, a) for text, hits, a in asked
                    if any(normalize_text(h["content"]) == a for h in hits[:5])
                    and not any(normalize_text(h["content"]) == a
                                for h in [h for h in hits if rule(h)][:5])]
            kept = sum(any(normalize_text(h["content"]) == a
                           for h in [h for h in hits if rule(h)][:5]) for _, hits, a in asked)
            noisy = [(text, next(h for h in hits if rule(h))) for text, hits in unrelated
                     if any(rule(h) for h in hits)]
            print(f"{label:<55} {kept / len(asked):>11.2f} {len(noisy) / len(unrelated):>11.2f}")
            if label == args.why:
                for text, a in lost:
                    print(f"    lost: {text!r} -> {a[:60]!r}")
                for text, h in noisy:
                    print(f"    part anyway: {text!r} -> {h['content'][:60]!r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
