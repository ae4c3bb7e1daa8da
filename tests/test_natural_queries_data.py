"""``bench/data/natural_queries.json`` and the held-out set: every question's answer is a
memory that rules mode captures from the question's database (written by the genuine
OpenCode), in a project that database knows; and ``opencode-natural.db`` stores each
directive of its manifest once, in its scope, dated by its message, and nothing else."""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import natural_queries as nq
from rules_scoring import same_fact

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


def test_the_natural_fixture_stores_every_planted_directive_and_nothing_else() -> None:
    import json

    manifest = json.loads(Path(str(DBS["natural"]) + ".manifest.json").read_text())
    assert manifest["opencode_version"] == "1.18.33"
    planted = [(p, m) for p in manifest["planted"] for m in p["memories"]]
    with nq.captured(DBS["natural"], "none") as (svc, _copy):
        stored = [m for m in svc.list() if m["type"] not in nq.NOT_FACTS]
    problems = []
    for where, want in planted:
        hits = [m for m in stored if same_fact(m["content"], want["content"])]
        if [(m["scope"], m["message_ids"]) for m in hits] != [(want["scope"],
                                                               [where["message_id"]])]:
            problems.append((want["content"], [(m["scope"], m["message_ids"]) for m in hits]))
    assert problems == []
    assert len(stored) == len(planted) >= 50
    # the sessions were played on eleven days; each memory is dated by its message
    assert len({m["said_at"][:10] for m in stored}) >= 8


def test_the_held_out_set_has_50_questions_or_more_and_every_answer_is_captured() -> None:
    dbs, questions = nq.load(nq.HELDOUT)
    assert len(questions) >= 50
    assert set(dbs) == {"heldout"} and all(path.is_file() for path in dbs.values())
    assert not {normalize(q.text) for q in questions} & {normalize(q.text) for q in QUESTIONS}
    assert nq.missing(dbs, questions) == []


def normalize(text: str) -> str:
    return " ".join(text.lower().split())
