"""``bench/llm_corpus.py``: the corpus through the real pipeline in LLM mode, against fake
OpenAI-compatible servers on 127.0.0.1 (real HTTP): a model that answers the labels, one that
answers nothing (the rules floor alone) and one that passes the assistant's and tools'
sentences off as the user's. A few cases of every category keep it fast."""

from __future__ import annotations

import io
import json
import re
import sys
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from corpus_db import ASSISTANT_PLANTS, TOOL_PLANTS, PlantedSession
from fake_openai import FakeOpenAI
from llm_corpus_models import gullible_responder, perfect_responder, silent_responder
from llm_corpus_scoring import planted, score
from rules_scoring import Case, load
from rules_scoring import score as rules_score

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import llm_corpus

LIMIT = 2
CASES = llm_corpus.pick(load(), LIMIT)
CATEGORIES = sorted({c.category for c in load()})
ROW = re.compile(r"^(\w+)\s+(\d+)\s+(\d+)\s+(\d+)\s+([\d.]+)%\s+([\d.]+)%\s+([\d.]+)%\s+(\d+)"
                 r"\s+([\d.]+)\s+(\d+)\s+(\d+)$")


def bench(fake: FakeOpenAI, *extra: str) -> tuple[int, str]:
    out = io.StringIO()
    with redirect_stdout(out):
        code = llm_corpus.main(["--base-url", fake.base_url, "--model", "fake-model",
                                "--limit", str(LIMIT), *extra])
    return code, out.getvalue()


def rows(printed: str) -> dict[str, tuple[Any, ...]]:
    found = {}
    for line in printed.splitlines():
        hit = ROW.match(line)
        if hit:
            g = hit.groups()
            found[g[0]] = (*map(int, g[1:4]), *map(float, g[4:7]), int(g[7]), float(g[8]),
                           int(g[9]), int(g[10]))
    return found


def test_the_subset_covers_every_category() -> None:
    assert {c.category for c in CASES} == set(CATEGORIES)
    assert len(CASES) == LIMIT * len(CATEGORIES)


def test_a_perfect_model_scores_every_number_in_full() -> None:
    with FakeOpenAI(responder=perfect_responder(CASES)) as fake:
        code, printed = bench(fake)
        calls = len(fake.chat_requests)
    assert code == 0, printed
    head = printed.splitlines()[0].split()
    assert head == ["category", "cases", "expect", "stored", "precision", "recall", "scope",
                    "junk", "over/s", "wrong", "floor"]
    table = rows(printed)
    assert set(table) == {*CATEGORIES, "all"}
    expected = sum(len(c.expected) for c in CASES)
    assert table["all"] == (len(CASES), expected, expected, 100.0, 100.0, 100.0, 0, 0.0, 0, 0)
    for name in CATEGORIES:
        assert table[name][0] == LIMIT
    # one extraction call per session, nothing else (summaries and briefs are off)
    assert calls == len(CASES)
    assert f"{len(CASES)} sessions, {len(CASES)} LLM calls, 0 proposals refused" in printed


def test_a_silent_model_leaves_the_explicit_directives_to_the_rules_floor() -> None:
    with FakeOpenAI(responder=silent_responder) as fake:
        code, printed = bench(fake, "--json")
    assert code == 0, printed
    got = json.loads(printed)["categories"]
    rules = rules_score(CASES)
    assert got["all"]["expected"] > 20
    for name, t in rules.items():
        # every memory came from the floor, and the floor stores what the rules extractor
        # stores on the same messages
        assert got[name]["floor"] == got[name]["stored"], name
        assert (got[name]["matched"], got[name]["stored"], got[name]["scope_ok"]) == (
            t.matched, t.stored, t.scope_ok), name
    assert got["all"]["recall"] == 1.0 and got["all"]["precision"] == 1.0
    assert got["all"]["wrong"] == got["all"]["over"] == got["all"]["junk"] == 0


def test_assistant_and_tool_sentences_are_not_stored_as_the_users() -> None:
    with FakeOpenAI(responder=gullible_responder) as fake:
        code, printed = bench(fake, "--json")
        proposed = sum(len(gullible_responder(b)["memories"]) for b in fake.chat_requests)
    assert code == 0, printed
    result = json.loads(printed)
    # the model proposed every planted sentence; the quality gate refused them all
    assert proposed >= 2 * len(CASES) and result["refused"] == proposed
    assert result["categories"]["all"]["wrong"] == 0
    assert result["categories"]["all"]["over"] == 0


def _session(case: Case, sid: str, i: int = 0) -> PlantedSession:
    return PlantedSession(case, sid, f"msg_{sid}", ASSISTANT_PLANTS[i], TOOL_PLANTS[i])


def test_the_scorer_counts_over_capture_and_wrong_attribution() -> None:
    a = _session(Case("c", 1, "remember we use pnpm", (("We use pnpm.", "project"),)), "s1")
    b = _session(Case("c", 2, "I use tabs everywhere", (("I use tabs.", "user"),)), "s2", 1)
    c = _session(Case("n", 3, "ok thanks", ()), "s3", 2)
    memories = [
        {"content": "We use pnpm.", "scope": "project", "type": "project", "source": "llm",
         "session_ids": ["s1"]},
        {"content": "I use tabs.", "scope": "project", "type": "user", "source": "rules",
         "session_ids": ["s2", "s3"]},
        {"content": "The staging cluster runs Kubernetes 1.29.", "scope": "project",
         "type": "project", "source": "llm", "session_ids": ["s1"]},
        {"content": "The nightly backup runs at 03:15 UTC.", "scope": "project",
         "type": "project", "source": "llm", "session_ids": ["s2"]},
        {"content": "Session went fine.", "scope": "project", "type": "session-summary",
         "source": "llm", "session_ids": ["s3"]},
    ]
    t = score([a, b, c], memories)
    assert (t["all"].cases, t["all"].expected, t["all"].stored, t["all"].matched) == (3, 2, 5, 2)
    assert (t["all"].scope_ok, t["all"].floor, t["all"].junk) == (1, 2, 0)
    # s1: the assistant's sentence; s2: a sentence planted in s4's tool output, not s2's;
    # s3: the user memory merged in from s2
    assert (t["all"].over, t["all"].wrong) == (3, 1)
    assert t["all"].over_per_session == pytest.approx(1.0)
    assert t["n"].over == 1 and t["n"].wrong == 0
    assert "c:1: wrong attribution 'The staging cluster runs Kubernetes 1.29.' (llm)" in (
        t["all"].misses)


def test_planted_sentences_are_recognised_but_corpus_facts_are_not() -> None:
    for plant in (*ASSISTANT_PLANTS, *TOOL_PLANTS):
        assert planted(plant)
    assert not any(planted(fact) for c in load() for fact, _ in c.expected)
