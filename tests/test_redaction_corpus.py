"""Recall per kind and false-positive rate of redaction, measured on the corpora.

The positive corpus (``tests/redaction_corpus.py``) holds format-valid fake secrets of many
kinds, each in user, assistant and tool text; the negative corpus
(``tests/redaction_negatives.py``) holds commit SHAs, UUIDs, content hashes, integrity
strings, base64 images, long identifiers, paths, URLs, lockfile lines and the like. The
per-kind table is printed and written to ``redaction-corpus.txt`` in the test's tmp dir
(``bench/redaction_corpus.py`` prints the same table).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from opencode_memoryd.redaction.engine import redact
from redaction_corpus import CASES, KINDS, ROLE_CONTEXTS, iter_secrets
from redaction_measure import FP_GOAL, RECALL_GOAL, format_failures, format_table, measure
from redaction_negatives import NEGATIVES
from redaction_prose import PROSE_KINDS


def test_corpora_are_large_and_varied() -> None:
    secrets = {secret for _, secret, _ in iter_secrets()}
    assert len(secrets) >= 1000
    assert len(KINDS) >= 60
    assert len(PROSE_KINDS) >= 10  # passwords stated in at least ten languages
    assert {case.role for case in CASES} == set(ROLE_CONTEXTS) == {"user", "assistant", "tool"}
    for kind in KINDS:  # every kind in every role
        assert {c.role for c in CASES if c.kind == kind} == set(ROLE_CONTEXTS), kind
    assert len(NEGATIVES) >= 500
    assert len({n.kind for n in NEGATIVES}) >= 15
    # the hard negatives that were false positives: publishable keys, account SIDs
    assert {"publishable_key", "account_sid", "prose_multilingual"} <= {n.kind for n in NEGATIVES}


def test_recall_per_kind_and_false_positive_rate(tmp_path: Path) -> None:
    m = measure()
    table = format_table(m)
    (tmp_path / "redaction-corpus.txt").write_text(table + "\n", encoding="utf-8")
    print("\n" + table)
    failures = format_failures(m)
    for kind, row in m.positives.items():
        assert row.hits / row.total >= RECALL_GOAL, f"{kind}\n{failures}"
    assert m.fp_rate <= FP_GOAL, failures


@pytest.mark.parametrize("case", CASES[::7], ids=lambda c: f"{c.kind}-{c.role}")
def test_redacted_text_is_stable(case: object) -> None:
    # Redacting the output again changes nothing (placeholders are never touched).
    once = redact(case.text).text  # type: ignore[attr-defined]
    assert redact(once).text == once
