"""Recall per kind and false-positive rate of ``redact`` on the corpora, as a table.

:func:`measure` runs :func:`opencode_memoryd.redaction.engine.redact` over the positive
corpus (``tests/redaction_corpus.py``: a case counts as redacted when none of its secrets
is left in the output) and the negative corpus (``tests/redaction_negatives.py``: an item
counts as a false positive when the output differs from the input). :func:`format_table`
renders the result; ``tests/test_redaction_corpus.py`` asserts the goals and
``bench/redaction_corpus.py`` prints the same table.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from opencode_memoryd.redaction.engine import redact
from redaction_corpus import CASES, Case
from redaction_negatives import NEGATIVES, Negative

#: Goals: every planted secret gone; at most 1 % of negative items altered.
RECALL_GOAL = 1.0
FP_GOAL = 0.01


@dataclass
class Row:
    """Counts of one kind (positive) or category (negative)."""

    total: int = 0
    hits: int = 0
    by_role: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))


@dataclass
class Measurement:
    """What :func:`measure` found."""

    positives: dict[str, Row]
    negatives: dict[str, Row]
    misses: list[tuple[Case, str]]
    false_positives: list[tuple[Negative, str]]

    @property
    def cases(self) -> int:
        return sum(r.total for r in self.positives.values())

    @property
    def secrets_redacted(self) -> int:
        return sum(r.hits for r in self.positives.values())

    @property
    def recall(self) -> float:
        return self.secrets_redacted / self.cases

    @property
    def fp_rate(self) -> float:
        total = sum(r.total for r in self.negatives.values())
        return sum(r.hits for r in self.negatives.values()) / total


def measure(cases: list[Case] = CASES, negatives: list[Negative] = NEGATIVES) -> Measurement:
    """Redact every case and negative item; count per kind, role and category."""
    pos: dict[str, Row] = defaultdict(Row)
    neg: dict[str, Row] = defaultdict(Row)
    misses: list[tuple[Case, str]] = []
    fps: list[tuple[Negative, str]] = []
    for case in cases:
        out = redact(case.text).text
        ok = not any(s in out for s in case.secrets)
        row = pos[case.kind]
        row.total += 1
        row.hits += ok
        row.by_role[case.role][0] += 1
        row.by_role[case.role][1] += ok
        if not ok:
            misses.append((case, out))
    for item in negatives:
        out = redact(item.text).text
        altered = out != item.text
        row = neg[item.kind]
        row.total += 1
        row.hits += altered
        if altered:
            fps.append((item, out))
    return Measurement(dict(pos), dict(neg), misses, fps)


def format_table(m: Measurement) -> str:
    """The per-kind recall table, the per-category false-positive table and the totals."""
    lines = [f"{'kind':<22} {'cases':>5} {'redacted':>8} {'recall':>7}   "
             "user  assistant  tool"]
    for kind in sorted(m.positives):
        r = m.positives[kind]
        roles = "  ".join(f"{r.by_role[role][1]}/{r.by_role[role][0]}".rjust(w)
                          for role, w in (("user", 4), ("assistant", 9), ("tool", 4)))
        lines.append(f"{kind:<22} {r.total:>5} {r.hits:>8} {r.hits / r.total:>7.1%}   {roles}")
    lines.append(f"{'ALL':<22} {m.cases:>5} {m.secrets_redacted:>8} {m.recall:>7.1%}")
    lines.append("")
    lines.append(f"{'negative category':<22} {'items':>5} {'altered':>8} {'FP rate':>7}")
    for kind in sorted(m.negatives):
        r = m.negatives[kind]
        lines.append(f"{kind:<22} {r.total:>5} {r.hits:>8} {r.hits / r.total:>7.1%}")
    total = sum(r.total for r in m.negatives.values())
    altered = sum(r.hits for r in m.negatives.values())
    lines.append(f"{'ALL':<22} {total:>5} {altered:>8} {m.fp_rate:>7.1%}")
    secrets = sum(len(c.secrets) for c in CASES)
    lines.append("")
    lines.append(f"{len(m.positives)} kinds, {m.cases} cases ({secrets} secrets), "
                 f"{total} negative items; goals: recall {RECALL_GOAL:.0%}, "
                 f"false positives <= {FP_GOAL:.0%}")
    return "\n".join(lines)


def format_failures(m: Measurement, limit: int = 40) -> str:
    """The missed cases and altered negatives (at most ``limit`` of each), for debugging."""
    out = [f"MISS {c.kind}/{c.role}: {o[:300]!r}" for c, o in m.misses[:limit]]
    out += [f"FP {n.kind}: {o[:300]!r}" for n, o in m.false_positives[:limit]]
    return "\n".join(out)
