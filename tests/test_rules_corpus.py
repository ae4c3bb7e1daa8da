"""The rules extractor on the labelled corpus (``tests/rules_corpus/``): the goals.

The per-category table is printed at the end of every ``pytest`` run that runs this module
(``tests/conftest.py``, ``pytest_terminal_summary``) and by ``bench/rules_corpus.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rules_scoring import GOALS, Case, Tally, load, same_fact, score

CASES = load()


@pytest.fixture(scope="module")
def tallies() -> dict[str, Tally]:
    return score(CASES)


def test_the_corpus_is_big_enough_and_well_formed() -> None:
    negatives = [c for c in CASES if not c.expected]
    assert len(CASES) >= 400 and len(negatives) >= 100, (len(CASES), len(negatives))
    categories = {c.category for c in CASES}
    assert {"start", "middle", "end", "anaphora", "note", "user_scope", "paragraph",
            "abbrev", "announce"} <= categories
    assert {c.category for c in negatives if c.category.startswith("neg_")} >= {
        "neg_question", "neg_quoted", "neg_code_log", "neg_promise", "neg_negation",
        "neg_temporary", "neg_announce"}
    assert any(s == "user" for c in CASES for _, s in c.expected)


def test_goals_are_met_overall(tallies: dict[str, Tally]) -> None:
    total = tallies["all"]
    detail = "\n".join(total.misses)
    assert total.recall >= GOALS["recall"], detail
    assert total.precision >= GOALS["precision"], detail
    assert total.scope >= GOALS["scope"], detail
    assert total.junk == 0, detail


def test_no_negative_stores_anything(tallies: dict[str, Tally]) -> None:
    stored = {name: t.stored for name, t in tallies.items() if name.startswith("neg_")}
    assert stored and not any(stored.values()), stored


def test_every_category_meets_the_recall_goal(tallies: dict[str, Tally]) -> None:
    low = {name: f"{t.recall:.1%}" for name, t in tallies.items() if t.recall < GOALS["recall"]}
    assert not low, low


def test_fact_matching_is_lenient_on_form_only() -> None:
    assert same_fact("We always use pnpm, never npm.", "we always use pnpm never npm")
    assert same_fact("The CI runs on Python 3.12.", "CI runs on Python 3.12.")
    assert not same_fact("Use npm.", "Don't use npm.")
    assert not same_fact("The CI runs on Python 3.12.", "The CI runs on Python 3.11.")
    assert not same_fact("Use pnpm.", "Use pnpm and yarn.")


def test_the_loader_rejects_text_outside_a_case(tmp_path: Path) -> None:
    (tmp_path / "bad.txt").write_text("# comment\nstray text\n@@\nremember x\n")
    with pytest.raises(ValueError, match=r"bad\.txt:2"):
        load(tmp_path)
    (tmp_path / "bad.txt").write_text("@@\n-> Fact.\n")
    with pytest.raises(ValueError, match="no message"):
        load(tmp_path)


def test_the_scorer_counts_misses_wrong_scopes_and_junk() -> None:
    cases = [Case("c", 1, "m1", (("We use pnpm.", "project"),)),
             Case("c", 2, "m2", (("I use tabs.", "user"),)),
             Case("c", 3, "m3", ())]
    answers = {"m1": [("We use pnpm.", "project")], "m2": [("I use tabs.", "project")],
               "m3": [("That.", "project")]}
    t = score(cases, lambda text: answers[text])["all"]
    assert (t.expected, t.stored, t.matched, t.scope_ok, t.junk) == (2, 3, 2, 1, 1)
    assert t.misses == ["c:2: scope project for 'I use tabs.'", "c:3: stored 'That.'"]
