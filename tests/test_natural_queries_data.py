"""``bench/data/natural_queries.json``: every question's answer is a memory that rules mode
captures from the question's database (written by the genuine OpenCode), in a project that
database knows."""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import natural_queries as nq

DBS, QUESTIONS = nq.load()


def test_the_set_has_100_questions_or_more_over_the_natural_fixture() -> None:
    assert len(QUESTIONS) >= 100
    assert sum(q.db == "natural" for q in QUESTIONS) >= 100
    assert all(path.is_file() for path in DBS.values())
    asked = Counter((q.db, q.project, q.text) for q in QUESTIONS)
    assert [k for k, n in asked.items() if n > 1] == []
    assert len({q.category for q in QUESTIONS}) >= 8


def test_every_answer_is_captured_in_rules_mode() -> None:
    assert nq.missing(DBS, QUESTIONS) == []


def test_an_answer_that_is_not_captured_is_reported() -> None:
    q = QUESTIONS[0]
    wrong = [replace(q, answer="We use yarn berry for every package."),
             replace(q, project="no-such-project")]
    problems = nq.missing({q.db: DBS[q.db]}, wrong)
    assert len(problems) == 2
    assert "is not captured" in problems[0] and "no project" in problems[1]
