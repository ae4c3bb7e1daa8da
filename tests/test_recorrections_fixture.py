"""Corrections said WITHOUT a trigger and value changes, days after the facts they correct,
on databases the genuine OpenCode 1.18.33 wrote in both storage shapes
(``opencode-recorrections.db``: ``message``/``part``; ``opencode-recorrections-v2.db``:
``session_message``), rules mode.

The databases were written by::

    python tests/fixtures/make_corrections.py --tool ../shared/tools/opencode-fixture-v2 \\
        --scenario recorrections_scenario --shape v1    # and --shape v2

from the scenario ``tests/fixtures/recorrections_scenario.py``: facts said with a trigger on
day 1 in three projects and the user scope, their corrections said without one on two later
days ("Actually, we use Vitest now, not Jest.", "btw the staging URL is now
staging2.atlas.dev."), a question, a task, a plan, a negation and a temporary change about
other facts, and a correction of nothing stored.

After one backfill per shape: every correction is stored, dated by its message; the fact it
corrects is retired (superseded by it) and shown in no later session's context block nor in
the top 3 of a natural search; ``dream --undo`` of the supersede run brings it back. The
distractors store and retire nothing. In LLM mode, with a scripted model that never says
what a memory replaces, the same facts are retired by the model's own memories (one copy
each), from the cue in the user's words.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock

from conftest import FIXTURES, cli, cli_json, llm_section, write_config
from fake_openai import FakeOpenAI
from opencode_memoryd.extract.rules import directives
from test_corrections_fixture import later_blocks, message_time, project, run
from test_supersede import LINE

SHAPES = {"message": "opencode-recorrections.db",
          "session_message": "opencode-recorrections-v2.db"}
MANIFESTS: dict[str, dict[str, Any]] = {
    k: json.loads((FIXTURES / f"{v}.manifest.json").read_text()) for k, v in SHAPES.items()}
SCENARIO = MANIFESTS["message"]
CORRECTIONS: list[dict[str, Any]] = SCENARIO["corrections"]
DISTRACTORS: list[dict[str, Any]] = SCENARIO["distractors"]
FACT_TYPES = ("user", "feedback", "project", "reference")
DAY_MS = 86_400_000

pytestmark = pytest.mark.slow


@dataclass
class Backfilled:
    """One rules-mode backfill of a fixture, kept to be copied into each test's own home,
    with what was read from it right after: the context blocks of the sessions said after
    the corrections (by project name), and the facts of each project (``""``: of the user
    scope), every one (``list --all``) and the ids of the current ones (``list``)."""

    manifest: dict[str, Any]
    db: Path
    home: Path
    config: Path
    blocks: dict[str, str]
    facts: dict[str, list[dict[str, Any]]]
    current: dict[str, list[str]]


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the backfills are kept: one folder for the whole run, shared by its xdist
    workers (beside their own temporary folders), so each shape is backfilled once."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder = root / "recorrections-backfills"
    folder.mkdir(exist_ok=True)
    return folder


def _backfill(shape: str, cache: Path, home: Path) -> Backfilled:
    """The backfill of ``shape`` in ``cache``: made there by the first test (of any worker)
    that asks for it, read back by the others."""
    where = cache / shape
    with FileLock(str(cache / f"{shape}.lock")):
        if (where / "done.json").exists():
            kept = json.loads((where / "done.json").read_text())
            return Backfilled(kept["manifest"], Path(kept["db"]), Path(kept["home"]),
                              Path(kept["config"]), kept["blocks"], kept["facts"],
                              kept["current"])
        db = where / "opencode" / "opencode.db"
        db.parent.mkdir(parents=True)
        shutil.copyfile(FIXTURES / SHAPES[shape], db)
        cfg = write_config(where / "config.toml", "[summaries]\nsession_summaries = false\n"
                           'project_brief = false\n[extraction]\nmode = "rules"\n')
        report = cli_json("--config", str(cfg), "maintain", "--all", "--db", str(db))
        assert report["totals"]["failed"] == 0, report
        done = Backfilled(MANIFESTS[shape], db, where / "home", cfg, {}, {}, {})
        done.blocks = later_blocks(done)
        for name in ["", *(p["name"] for p in done.manifest["projects"])]:
            done.facts[name] = listed(done, name, "--all")
            done.current[name] = [m["id"] for m in listed(done, name)]
        shutil.copytree(home, where / "home", symlinks=True)
        (where / "done.json").write_text(json.dumps(
            {k: str(v) if isinstance(v, Path) else v for k, v in vars(done).items()}))
        return done


_CACHE: dict[str, Backfilled] = {}


@pytest.fixture(params=list(SHAPES))
def store(request: pytest.FixtureRequest, cache_dir: Path, isolated_env: dict[str, str]
          ) -> Iterator[Backfilled]:
    """This test's own copy of the store and state after the one backfill of the shape."""
    shape = str(request.param)
    home = Path(isolated_env["HOME"])
    if shape not in _CACHE:
        _CACHE[shape] = _backfill(shape, cache_dir, home)
    done = _CACHE[shape]
    shutil.rmtree(home)
    shutil.copytree(done.home, home, symlinks=True)
    yield done


def listed(b: Backfilled, name: str, *extra: str) -> list[dict[str, Any]]:
    """The facts of project ``name`` (``""``: of the user scope)."""
    where = ["--user"] if not name else ["--dir", project(b, name)["directory"]]
    rows = run(b, "list", *where, "--db", str(b.db), *extra)
    return [m for m in rows if m["type"] in FACT_TYPES]


def everything(b: Backfilled) -> list[dict[str, Any]]:
    """Every fact of every project and of the user scope, current or retired."""
    return [m for rows in b.facts.values() for m in rows]


def by_message(rows: list[dict[str, Any]], message_id: str) -> list[dict[str, Any]]:
    return [m for m in rows if message_id in m["message_ids"]]


def turn_times(manifest: dict[str, Any]) -> dict[str, int]:
    return {t["message_id"]: int(t["time_created"]) for s in manifest["sessions"]
            for t in s["turns"]}


def find(items: list[dict[str, Any]], key: str, value: str) -> dict[str, Any]:
    return next(i for i in items if i[key] == value)


def test_the_fixtures_hold_untriggered_corrections_across_days() -> None:
    for manifest in MANIFESTS.values():
        assert manifest["opencode_version"] == "1.18.33"
        assert manifest["scenario"] == "tests/fixtures/recorrections_scenario.py"
        corrections = manifest["corrections"]
        assert len({c["phrasing"] for c in corrections}) == len(corrections) >= 10
        assert {c.get("scope", "project") for c in corrections} == {"project", "user"}
        assert len({c["project"] for c in corrections}) == 3
        assert len({p["name"] for p in manifest["projects"]}) == 3
        assert sum(c["phrasing"].startswith("value change") for c in corrections) >= 2
        times = turn_times(manifest)
        assert len({times[c["new_message_id"]] // DAY_MS for c in corrections}) >= 2
        for c in corrections:  # said days after the fact, without a trigger
            assert times[c["new_message_id"]] - times[c["old_message_id"]] > 2 * DAY_MS
            assert directives(c["new"], project=c.get("said_in", c["project"])) == [], c
        kinds = {d["kind"] for d in manifest["distractors"]}
        assert {"question", "task", "plan", "negation", "temporary"} <= kinds
        assert [d["old_message_id"] for d in manifest["distractors"]].count(None) == 1
    assert MANIFESTS["message"]["stored_in"] == "message + part"
    assert MANIFESTS["session_message"]["stored_in"] == "session_message"


@pytest.mark.parametrize("item", CORRECTIONS, ids=[c["phrasing"] for c in CORRECTIONS])
def test_an_untriggered_correction_retires_what_it_corrects(
        store: Backfilled, item: dict[str, Any]) -> None:
    item = find(store.manifest["corrections"], "phrasing", item["phrasing"])
    name = item["project"]
    scope = "" if item.get("scope") == "user" else name
    rows = store.facts[scope]
    new = by_message(rows, item["new_message_id"])
    old = by_message(rows, item["old_message_id"])
    assert [m["content"] for m in new] == [item["new_fact"]], rows  # stored, once
    assert [m["status"] for m in new] == ["active"]
    assert new[0]["said_at"] == message_time(store, item["new_message_id"])
    assert new[0]["scope"] == item.get("scope", "project")
    assert [m["content"] for m in old] == [item["old_fact"]], rows
    tomb = old[0]
    assert tomb["status"] == "retired" and tomb["superseded_by"] == new[0]["id"], tomb
    assert new[0]["id"] in store.current[scope]
    assert tomb["id"] not in store.current[scope]
    for proj, text in store.blocks.items():
        assert item["old_fact"] not in text, (proj, text)
        if proj == name or item.get("scope") == "user":
            assert item["new_fact"] in text, (proj, text)
    hits = run(store, "search", item["query"], "--dir", project(store, name)["directory"],
               "--db", str(store.db), "--limit", "3")
    assert tomb["id"] not in {h["id"] for h in hits}


def test_undo_of_the_supersede_run_brings_the_fact_back(store: Backfilled) -> None:
    item = find(store.manifest["corrections"], "phrasing", "value change: is now")
    rows = store.facts[item["project"]]
    tomb = by_message(rows, item["old_message_id"])[0]
    new = by_message(rows, item["new_message_id"])[0]
    assert tomb["status"] == "retired" and tomb["retired_by_run"]
    code, out = cli("--config", str(store.config), "dream", "--undo", tomb["retired_by_run"])
    assert code == 0, out
    active = {m["id"] for m in listed(store, item["project"])}
    assert {tomb["id"], new["id"]} <= active  # the fact is back, the correction stays


@pytest.mark.parametrize("item", DISTRACTORS, ids=[d["kind"] for d in DISTRACTORS])
def test_a_distractor_stores_and_retires_nothing(
        store: Backfilled, item: dict[str, Any]) -> None:
    item = find(store.manifest["distractors"], "kind", item["kind"])
    every = everything(store)
    assert by_message(every, item["new_message_id"]) == []  # nothing stored for it
    if item["old_message_id"] is not None:
        old = by_message(every, item["old_message_id"])
        assert [(m["content"], m["status"]) for m in old] == [(item["old_fact"], "active")]
        assert item["old_fact"] in store.blocks[item["project"]]


def test_only_the_corrected_facts_are_retired(store: Backfilled) -> None:
    every = everything(store)
    retired = {m["content"] for m in every if m["status"] == "retired"}
    active = {m["content"] for m in every if m["status"] == "active"}
    assert retired == {c["old_fact"] for c in CORRECTIONS}
    assert active == ({c["new_fact"] for c in CORRECTIONS}
                      | {d["old_fact"] for d in DISTRACTORS if d["old_fact"]})
    ids = {i for current in store.current.values() for i in current}
    assert {m["content"] for m in every if m["id"] in ids} == active
    for proj, text in store.blocks.items():
        assert not [r for r in retired if r in text], proj


# -- LLM mode: a scripted model that never says what a memory replaces ------------------

TRIGGER = re.compile(r"^(?:(?:Remember|Keep in mind|Note)(?: that)?[:,]?\s+"
                     r"|For all my projects, remember that\s+|btw\s+|Actually,\s+"
                     r"|Heads-up:\s+|Ok so\s+|Quick update - )", re.IGNORECASE)
#: The user sentences of the distractors: the model proposes none of them (as a good
#: model would not), so what they do is the rules floor's alone.
SKIPPED = {d["new"] for d in DISTRACTORS}


def forgetful_model(body: dict[str, Any]) -> dict[str, Any]:
    """One memory per user line that is no distractor: its words without the trigger or
    filler, ``replaces`` always empty; user scope for "I …" lines."""
    prompt = "\n".join(str(m["content"]) for m in body["messages"] if m["role"] == "user")
    memories = []
    for mid, role, text in LINE.findall(prompt):
        if role != "user" or text in SKIPPED or text.endswith("?"):
            continue
        fact = TRIGGER.sub("", text).strip()
        fact = fact[:1].upper() + fact[1:]
        memories.append({"content": fact, "type": "project",
                         "scope": "user" if fact.startswith("I ") else "project",
                         "section": "architecture", "message_ids": [mid], "replaces": []})
    return {"memories": memories, "more": False}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_llm_mode_retires_every_corrected_fact_though_the_model_names_none(
        shape: str, tmp_path: Path) -> None:
    db = tmp_path / "opencode" / "opencode.db"
    db.parent.mkdir(parents=True)
    shutil.copyfile(FIXTURES / SHAPES[shape], db)
    with FakeOpenAI(responder=forgetful_model) as fake:
        cfg = write_config(tmp_path / "llm.toml", "[summaries]\nsession_summaries = false\n"
                           'project_brief = false\n[extraction]\nmode = "llm"\n'
                           + llm_section(fake))
        report = cli_json("--config", str(cfg), "maintain", "--all", "--db", str(db))
    assert report["totals"]["failed"] == 0, report
    b = Backfilled(MANIFESTS[shape], db, tmp_path, cfg, {}, {}, {})
    b.blocks = later_blocks(b)
    every = [m for name in ["", *(p["name"] for p in b.manifest["projects"])]
             for m in listed(b, name, "--all")]
    for item in b.manifest["corrections"]:
        old = by_message(every, item["old_message_id"])
        new = by_message(every, item["new_message_id"])
        assert [m["status"] for m in old] == ["retired"], (item["phrasing"], old)
        assert [m["status"] for m in new] == ["active"], (item["phrasing"], new)  # one copy
        assert old[0]["superseded_by"] == new[0]["id"]
        for proj, text in b.blocks.items():
            assert old[0]["content"] not in text, (proj, text)
    for item in b.manifest["distractors"]:
        assert by_message(every, item["new_message_id"]) == []
        if item["old_message_id"] is not None:
            assert [m["status"] for m in by_message(every, item["old_message_id"])] == [
                "active"]
