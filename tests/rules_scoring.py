"""Score the rules extractor on the labelled corpus in ``tests/rules_corpus/``.

``tests/rules_corpus/README.md`` describes the files and the labelling conventions. Used by
``tests/test_rules_corpus.py`` (asserts the goals), the terminal summary of ``pytest``
(``tests/conftest.py`` prints the table) and ``bench/rules_corpus.py``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from opencode_memoryd.extract.facts import restates
from opencode_memoryd.extract.rules import directives, is_junk
from opencode_memoryd.models import normalize_text

CORPUS = Path(__file__).parent / "rules_corpus"
#: The project every corpus message is sent in.
PROJECT_ROOT = "/srv/dev/src/acme-web"
#: Goals: recall and scope accuracy of at least 97 %, precision of at least 99 %.
GOALS = {"recall": 0.97, "precision": 0.99, "scope": 0.97}

Extract = Callable[[str], list[tuple[str, str]]]


@dataclass(frozen=True)
class Case:
    """One labelled message: its category (file stem), where it starts in its file, the
    message, and the ``(fact, scope)`` pairs it must store."""

    category: str
    line: int
    text: str
    expected: tuple[tuple[str, str], ...]


def _read_file(path: Path) -> list[Case]:
    cases: list[Case] = []
    message: list[str] | None = None
    facts: list[tuple[str, str]] = []
    start = 0
    for n, line in enumerate([*path.read_text().splitlines(), "@@"], 1):
        if line.startswith("@@"):
            if message is not None:
                text = "\n".join(message).strip("\n")
                if not text.strip():
                    raise ValueError(f"{path.name}:{start}: a case with no message")
                cases.append(Case(path.stem, start, text, tuple(facts)))
            message, facts, start = [], [], n
        elif message is None:
            if line.strip() and not line.startswith("#"):
                raise ValueError(f"{path.name}:{n}: text before the first @@")
        elif line.startswith("->"):
            body = line[2:].strip()
            scope = "user" if body.startswith("user:") else "project"
            facts.append((body.removeprefix("user:").strip(), scope))
        else:
            message.append(line)
    return cases


def load(directory: Path = CORPUS) -> list[Case]:
    """Every case of every ``*.txt`` file in ``directory``, by file name then position.

    Raises:
        ValueError: a file holds text before its first ``@@`` that is not a comment, or a
            case with no message.
    """
    return [case for path in sorted(directory.glob("*.txt")) for case in _read_file(path)]


_NEGATION = re.compile(r"\b(?:not|no|never|don'?t|doesn'?t|isn'?t|aren'?t|won'?t|can'?t|cannot"
                       r"|nothing|none|nor)\b|n't\b", re.IGNORECASE)


def same_fact(a: str, b: str) -> bool:
    """Whether two memory texts say the same: equal once normalised, or each restates
    the other (the same content words and identifiers) with the same negation words."""
    if normalize_text(a) == normalize_text(b):
        return True
    negations = (sorted(x.lower() for x in _NEGATION.findall(a))
                 == sorted(x.lower() for x in _NEGATION.findall(b)))
    return negations and restates(a, b) and restates(b, a)


@dataclass
class Tally:
    """Counts for one category (or all of them)."""

    cases: int = 0
    expected: int = 0
    stored: int = 0
    matched: int = 0
    scope_ok: int = 0
    junk: int = 0
    misses: list[str] = field(default_factory=list)

    #: the fields :meth:`add` sums
    COUNTS: ClassVar[tuple[str, ...]] = ("cases", "expected", "stored", "matched",
                                         "scope_ok", "junk")

    def add(self, other: Tally) -> None:
        """Add another tally's counts and misses to this one."""
        for name in self.COUNTS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.misses += other.misses

    @property
    def precision(self) -> float:
        return self.matched / self.stored if self.stored else 1.0

    @property
    def recall(self) -> float:
        return self.matched / self.expected if self.expected else 1.0

    @property
    def scope(self) -> float:
        return self.scope_ok / self.matched if self.matched else 1.0


def default_extract(text: str) -> list[tuple[str, str]]:
    """The rules extractor on one message of the corpus's project."""
    return [(f, s) for f, s in directives(text, project=PROJECT_ROOT.rsplit("/", 1)[-1])]


def score(cases: Iterable[Case], extract: Extract = default_extract) -> dict[str, Tally]:
    """Tally every case by category, plus ``"all"``; each miss is recorded as a line
    saying what was expected, what was stored and where the case is."""
    tallies: dict[str, Tally] = {}
    for case in cases:
        t = tallies.setdefault(case.category, Tally())
        got = extract(case.text)
        t.cases += 1
        t.expected += len(case.expected)
        t.stored += len(got)
        t.junk += sum(is_junk(fact) for fact, _ in got)
        free = list(got)
        for fact, scope in case.expected:
            hit = next((g for g in free if same_fact(g[0], fact)), None)
            if hit is None:
                t.misses.append(f"{case.category}:{case.line}: missed {fact!r}")
                continue
            free.remove(hit)
            t.matched += 1
            if hit[1] == scope:
                t.scope_ok += 1
            else:
                t.misses.append(f"{case.category}:{case.line}: scope {hit[1]} for {fact!r}")
        t.misses += [f"{case.category}:{case.line}: stored {g[0]!r}" for g in free]
    total = Tally()
    for t in tallies.values():
        total.add(t)
    tallies["all"] = total
    return tallies


def table(tallies: dict[str, Tally]) -> str:
    """The per-category table: cases, expected and stored memories, precision, recall,
    scope accuracy and junk, one row per category and one for all."""
    head = (f"{'category':<16} {'cases':>5} {'expect':>6} {'stored':>6} {'precision':>9} "
            f"{'recall':>7} {'scope':>6} {'junk':>4}")
    rows = [head, "-" * len(head)]
    for name in [*sorted(k for k in tallies if k != "all"), "all"]:
        t = tallies[name]
        if name == "all":
            rows.append("-" * len(head))
        rows.append(f"{name:<16} {t.cases:>5} {t.expected:>6} {t.stored:>6} "
                    f"{t.precision:>9.1%} {t.recall:>7.1%} {t.scope:>6.1%} {t.junk:>4}")
    return "\n".join(rows)
