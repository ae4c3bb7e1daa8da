"""Rules mode on two databases the genuine OpenCode wrote: every directive stored once, in
its scope, and nothing else but the project briefs and session summaries.

``opencode-phrasings.db`` (``tests/fixtures/make_phrasings.py``, scenario
``tests/fixtures/phrasings_scenario.py``) plants the phrasings of the rules corpus's
categories, the negatives, a sub-agent whose prompt reads like a directive, a compaction
whose summary restates one, and a fork that copies directives; its manifest lists each
directive with the memories it must give, and each negative. ``opencode-sample.db`` is the
shared sample.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from conftest import FIXTURES, MANIFEST, cli_json
from rules_scoring import same_fact

PHRASINGS_DB = FIXTURES / "opencode-phrasings.db"
PHRASINGS = json.loads((FIXTURES / "opencode-phrasings.db.manifest.json").read_text())
NOT_FACTS = {"project-brief", "session-summary"}
#: What the sample's directives store (their manifest's ``fact`` is a paraphrase).
SAMPLE_FACTS = {"We always use pnpm, never npm.", "Our API base path is /api/v2.",
                "The data-pipeline service must stay compatible with Python 3.9."}


def run_rules(db: Path, config_file: Path) -> list[dict[str, Any]]:
    """``maintain --all`` in rules mode on ``db``; every memory stored afterwards."""
    report = cli_json("--config", str(config_file), "maintain", "--all", "--db", str(db))
    assert report["totals"]["failed"] == 0, report
    memories: list[dict[str, Any]] = cli_json("--config", str(config_file), "list")
    return memories


@pytest.fixture
def phrasings_db(tmp_path: Path) -> Path:
    dst = tmp_path / "opencode" / "opencode.db"
    dst.parent.mkdir(parents=True)
    shutil.copyfile(PHRASINGS_DB, dst)
    return dst


def test_the_manifest_covers_every_kind_of_phrasing() -> None:
    kinds = {n["kind"] for n in PHRASINGS["negatives"]}
    assert kinds == {"question", "quoted", "code", "promise", "negation", "temporary", "recall"}
    scopes = [m["scope"] for p in PHRASINGS["planted"] for m in p["memories"]]
    assert scopes.count("user") >= 4 and scopes.count("project") >= 12
    sessions = {s["kind"] for s in PHRASINGS["sessions"]}
    assert sessions == {"main", "subagent", "fork"}
    assert PHRASINGS["compactions"] and PHRASINGS["subagent_sessions"]
    assert PHRASINGS["opencode_version"] == "1.18.33"
    fork = next(s for s in PHRASINGS["sessions"] if s["kind"] == "fork")
    assert sum(bool(u.get("forked_copy") and u["remember"]) for u in fork["user_turns"]) >= 2


def test_every_planted_directive_is_stored_once_in_its_scope(
        phrasings_db: Path, config_file: Path) -> None:
    memories = run_rules(phrasings_db, config_file)
    facts = [m for m in memories if m["type"] not in NOT_FACTS]
    assert {m["type"] for m in memories} - NOT_FACTS - {"user", "feedback", "project",
                                                        "reference"} == set()
    wanted = [(p, e) for p in PHRASINGS["planted"] for e in p["memories"]]
    problems = []
    for planted, expect in wanted:
        hits = [m for m in facts if same_fact(m["content"], expect["content"])]
        if len(hits) != 1:
            problems.append(f"{len(hits)} x {expect['content']!r}")
        elif hits[0]["scope"] != expect["scope"]:
            problems.append(f"scope {hits[0]['scope']} for {expect['content']!r}")
        elif hits[0]["message_ids"] != [planted["message_id"]]:
            problems.append(f"{expect['content']!r} cites {hits[0]['message_ids']}")
    assert not problems, problems
    # nothing else: no negative, no sub-agent prompt, no summary text, no forked copy
    extra = [m["content"] for m in facts
             if not any(same_fact(m["content"], e["content"]) for _, e in wanted)]
    assert extra == []
    assert len(facts) == len(wanted)
    subagents = {s["id"] for s in PHRASINGS["subagent_sessions"]}
    forks = {s["id"] for s in PHRASINGS["sessions"] if s["kind"] == "fork"}
    fork_own = {p["message_id"] for p in PHRASINGS["planted"] if p["session_id"] in forks}
    for m in facts:
        assert not set(m["session_ids"]) & subagents
        if set(m["session_ids"]) & forks:
            assert m["message_ids"] == sorted(fork_own & set(m["message_ids"]))


def test_user_scope_memories_have_no_project(phrasings_db: Path, config_file: Path) -> None:
    memories = run_rules(phrasings_db, config_file)
    user = [m for m in memories if m["scope"] == "user"]
    assert len(user) == sum(e["scope"] == "user" for p in PHRASINGS["planted"]
                            for e in p["memories"])
    assert all(m["project_id"] is None and m["project_root"] is None for m in user)
    web = [m for m in memories if m["type"] not in NOT_FACTS and m["scope"] == "project"
           and m["project_root"].endswith("/orbit-web")]
    assert [m["content"] for m in web] == [
        "The orbit-web app is deployed to Netlify from the main branch."]


def test_the_sample_database_stores_its_three_directives_and_nothing_else(
        sample_db: Path, config_file: Path) -> None:
    memories = run_rules(sample_db, config_file)
    facts = [m for m in memories if m["type"] not in NOT_FACTS]
    assert sorted(m["content"] for m in facts) == sorted(SAMPLE_FACTS)
    assert all(m["scope"] == "project" for m in facts)
    original = {d["message_id"] for d in MANIFEST["remember_directives"]
                if not d["forked_copy"]}
    deleted = {d["id"] for d in MANIFEST["deleted_sessions"]}
    assert {mid for m in facts for mid in m["message_ids"]} & original == original - {
        d["message_id"] for d in MANIFEST["remember_directives"] if d["session_id"] in deleted}
    assert all(len(m["message_ids"]) == 1 for m in facts)
