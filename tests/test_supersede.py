"""Supersession at write time, rules mode, on copies of databases the genuine OpenCode wrote:
a correction said days after a fact retires that fact (soft, journaled, undoable), in both
storage shapes, and nothing superseded is shown as current (list, search, context block)."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from conftest import ACME, FIXTURES, cli, cli_json, llm_section, write_config
from fake_openai import FakeOpenAI
from opencode_memoryd.capture.writer import write_memory
from opencode_memoryd.config.loader import load_config
from opencode_memoryd.config.paths import store_dir
from opencode_memoryd.store.edge import EdgeStore
from opencode_writer import OpenCodeWriter
from opencode_writer_v2 import V2Writer

ACME_PROJECT = "aa96382a4f1e45500e577aeab09e21df3c441bfc"
V2 = json.loads((FIXTURES / "opencode-v2-sample.db.manifest.json").read_text())
V2_SESSION = next(s for s in V2["sessions"] if s["key"] == "v2-directive")
DAY_MS = 86_400_000

#: (phrasing, the fact said days before, the correction, the old fact's key word, a query)
PHRASINGS = [
    ("instead of", "Remember that we use Jest for unit tests.",
     "Actually, use Vitest instead of Jest from now on.", "Jest", "which test framework"),
    ("moved off", "Remember that we use Poetry to manage dependencies.",
     "Remember that we moved off Poetry: it's uv now.", "Poetry", "package manager"),
    ("switched from X to Y", "Remember: we use Yarn to install packages.",
     "From now on, we switched from Yarn to Bun.", "Yarn", "install packages"),
    ("replace X with Y", "Remember that we bundle the app with Webpack.",
     "Going forward, replace Webpack with Vite.", "Webpack", "bundler"),
    ("no longer", "Remember: CI runs on Travis CI.",
     "Remember: we no longer use Travis CI, it's GitHub Actions now.", "Travis", "CI"),
    ("not X any more", "Keep in mind: we use Redux for state.",
     "Keep in mind: we don't use Redux any more, we use Zustand.", "Redux", "state"),
    ("X is deprecated", "Remember that we use Moment.js for dates.",
     "For future reference, Moment.js is deprecated here; use date-fns.", "Moment",
     "dates"),
    ("we dropped X", "Remember that the database is MySQL.",
     "Remember that we dropped MySQL, the database is PostgreSQL now.", "MySQL",
     "database"),
    ("X → Y", "Remember that the API server runs on Flask.",
     "Remember: Flask → FastAPI for the API server.", "Flask", "API server"),
    ("use Y, not X", "Remember that we format code with Black.",
     "From now on use Ruff, not Black, for formatting.", "Black", "formatting"),
]


class Shape:
    """One storage shape: a copy of a fixture the genuine OpenCode wrote, and a writer
    appending sessions and turns to it."""

    def __init__(self, kind: str, tmp: Path) -> None:
        self.kind = kind
        self.db = tmp / "opencode" / "opencode.db"
        self.db.parent.mkdir(parents=True)
        name = "opencode-sample.db" if kind == "message" else "opencode-v2-sample.db"
        shutil.copyfile(FIXTURES / name, self.db)
        if kind == "message":
            self.project, self.directory = ACME_PROJECT, ACME
        else:
            self.project, self.directory = V2_SESSION["project_id"], V2_SESSION["directory"]

    def say(self, text: str, *, days_ago: int = 0) -> None:
        """A new session in the project whose one turn is ``text`` (said ``days_ago``)."""
        if self.kind == "message":
            w = OpenCodeWriter(self.db)
            w.set_clock(-days_ago * DAY_MS)
            sid = w.new_session(project_id=self.project, directory=self.directory)
            w.append_turn(sid, text, "Noted.")
        else:
            v2 = V2Writer(self.db, pause=0.0)
            v2.set_clock(-days_ago * DAY_MS)
            sid = v2.new_session(project_id=self.project, directory=self.directory)
            v2.append_turn(sid, text, "Noted.")
            w = v2  # type: ignore[assignment]
        w.close()


def run(cfg: Path, *args: str) -> Any:
    return cli_json("--config", str(cfg), *args)


def facts(cfg: Path, shape: Shape, *extra: str) -> list[dict[str, Any]]:
    rows = run(cfg, "list", "--dir", shape.directory, "--db", str(shape.db), *extra)
    return [m for m in rows if m["type"] in ("user", "feedback", "project", "reference")]


@pytest.fixture(params=["message", "session_message"])
def shape(request: pytest.FixtureRequest, tmp_path: Path) -> Shape:
    return Shape(request.param, tmp_path)


@pytest.mark.parametrize(("phrasing", "old", "correction", "key", "query"), PHRASINGS,
                         ids=[p[0] for p in PHRASINGS])
def test_a_correction_retires_the_fact_it_replaces(
        shape: Shape, config_file: Path, phrasing: str, old: str, correction: str,
        key: str, query: str) -> None:
    db = ("--db", str(shape.db))
    shape.say(old, days_ago=3)
    run(config_file, "maintain", "--all", *db)
    before = [m for m in facts(config_file, shape) if key in m["content"]]
    assert len(before) == 1, before
    old_id = before[0]["id"]
    shape.say(correction)
    report = run(config_file, "maintain", "--all", *db)
    assert report["totals"]["added"] >= 1
    current = facts(config_file, shape)
    new = [m for m in current if m["message_ids"] != before[0]["message_ids"]
           and key in m["content"]]
    assert len(new) == 1, current  # the correction is stored
    said = [datetime.fromisoformat(m["created_at"].replace("Z", "+00:00"))
            for m in (before[0], new[0])]
    assert said[1] - said[0] > timedelta(days=2)  # said days apart
    assert old_id not in {m["id"] for m in current}  # and the old fact is not current
    hits = run(config_file, "search", query, "--dir", shape.directory, *db, "--limit", "3",
               "--json")
    assert old_id not in {h["id"] for h in hits}
    block = run(config_file, "context", "--project", shape.project, "--json")
    assert before[0]["content"] not in block["text"]
    assert new[0]["content"] in block["text"]
    tomb = next(m for m in facts(config_file, shape, "--all") if m["id"] == old_id)
    assert tomb["status"] == "retired"
    assert tomb["superseded_by"] == new[0]["id"]
    assert tomb["retired_reason"] == f"superseded: {new[0]['content']}"
    entries = run(config_file, "journal", "--json")
    entry = next(e for e in entries if e.get("action") == "supersede")
    assert entry["run_id"] == tomb["retired_by_run"]
    assert entry["operations"][0]["superseded_ids"] == [old_id]
    code, out = cli("--config", str(config_file), "show", old_id)
    assert code == 0 and f"superseded by {new[0]['id']}" in out, out
    code, out = cli("--config", str(config_file), "journal")
    assert code == 0 and entry["run_id"] in out, out
    # undo brings the old fact back, and the correction stays
    code, out = cli("--config", str(config_file), "dream", "--undo", entry["run_id"])
    assert code == 0, out
    ids = {m["id"] for m in facts(config_file, shape)}
    assert {old_id, new[0]["id"]} <= ids


def test_a_correction_retires_only_the_facts_that_state_the_term(
        sample_db: Path, config_file: Path) -> None:
    db = ("--db", str(sample_db))
    w = OpenCodeWriter(sample_db)
    w.set_clock(-2 * DAY_MS)
    sid = w.new_session(project_id=ACME_PROJECT, directory=ACME)
    for text in ("Remember that the Jest config lives in config/jest.config.js.",
                 "Remember: we never use Jest snapshots for components.",
                 "Remember that we use Playwright for the e2e tests.",
                 "Remember that we use Jest for unit tests."):
        w.append_turn(sid, text, "Noted.")
    w.set_clock(0)
    sid2 = w.new_session(project_id=ACME_PROJECT, directory=ACME)
    # the sample already holds "We always use pnpm, never npm."
    w.append_turn(sid2, "From now on, we switched from npm to pnpm.", "OK.")
    w.append_turn(sid2, "Actually, use Vitest instead of Jest from now on.", "OK.")
    w.close()
    cli_json("--config", str(config_file), "maintain", "--all", *db)
    listed = cli_json("--config", str(config_file), "list", "--dir", ACME, *db, "--all")
    retired = [m["content"] for m in listed if m["status"] == "retired"]
    assert retired == ["We use Jest for unit tests."]
    contents = {m["content"] for m in listed}
    assert {"We always use pnpm, never npm.", "The Jest config lives in config/jest.config.js.",
            "We use Playwright for the e2e tests."} <= contents


# -- LLM mode: a scripted model that says what each correction replaces -----------------

LINE = re.compile(r"^\[(msg_\w+)\] (user|assistant|tool): (.*)$", re.MULTILINE)
TRIGGER = re.compile(r"^(?:Actually, |Remember that |Remember: |Keep in mind: |From now on,? "
                     r"|Going forward, |For future reference, )", re.IGNORECASE)
#: The term each correction replaces, as the scripted model names it.
REPLACED = dict(zip([p[2] for p in PHRASINGS],
                    ["Jest", "Poetry", "Yarn", "Webpack", "Travis CI", "Redux", "Moment.js",
                     "MySQL", "Flask", "Black"], strict=True))
#: A line with no replacement cue whose memory the model says replaces "Jest" anyway.
NO_CUE = "Remember that we use Vitest for the component tests."


def scripted_model(body: dict[str, Any]) -> dict[str, Any]:
    """One memory per user line: its words without the trigger, and what it replaces."""
    prompt = "\n".join(str(m["content"]) for m in body["messages"] if m["role"] == "user")
    memories = []
    for mid, role, text in LINE.findall(prompt):
        if role != "user":
            continue
        fact = TRIGGER.sub("", text).strip()
        fact = fact[:1].upper() + fact[1:]
        replaces = ["Jest"] if text == NO_CUE else [REPLACED[text]] if text in REPLACED else []
        memories.append({"content": fact, "type": "project", "scope": "project",
                         "section": "architecture", "message_ids": [mid],
                         "replaces": replaces})
    return {"memories": memories, "more": False}


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(responder=scripted_model) as f:
        yield f


@pytest.fixture
def llm_config(tmp_path: Path, fake: FakeOpenAI) -> Path:
    return write_config(tmp_path / "llm.toml", f"""
[opencode]
settle_seconds = 0
[summaries]
session_summaries = false
project_brief = false
[extraction]
mode = "llm"
{llm_section(fake)}
""")


@pytest.mark.parametrize(("phrasing", "old", "correction", "key", "query"), PHRASINGS,
                         ids=[p[0] for p in PHRASINGS])
def test_a_models_correction_retires_the_fact_it_replaces(
        shape: Shape, llm_config: Path, fake: FakeOpenAI, phrasing: str, old: str,
        correction: str, key: str, query: str) -> None:
    db = ("--db", str(shape.db))
    shape.say(old, days_ago=3)
    run(llm_config, "maintain", "--all", *db)
    before = [m for m in facts(llm_config, shape) if key in m["content"]]
    assert [m["source"] for m in before] == ["llm"], before
    shape.say(correction)
    run(llm_config, "maintain", "--all", *db)
    assert fake.chat_requests[-1]["response_format"]["json_schema"]["schema"][
        "properties"]["memories"]["items"]["required"][-1] == "replaces"
    current = facts(llm_config, shape)
    assert before[0]["id"] not in {m["id"] for m in current}
    assert any(m["source"] == "llm" and key in m["content"] for m in current)
    hits = run(llm_config, "search", query, "--dir", shape.directory, *db, "--limit", "3",
               "--json")
    assert before[0]["id"] not in {h["id"] for h in hits}
    block = run(llm_config, "context", "--project", shape.project, "--json")
    assert before[0]["content"] not in block["text"]
    tomb = next(m for m in facts(llm_config, shape, "--all") if m["id"] == before[0]["id"])
    # the reason quotes the user's sentence, not the model's paraphrase
    assert tomb["retired_reason"].startswith("superseded: ")
    assert REPLACED[correction].split()[0] in tomb["retired_reason"]
    code, out = cli("--config", str(llm_config), "dream", "--undo", tomb["retired_by_run"])
    assert code == 0, out
    assert before[0]["id"] in {m["id"] for m in facts(llm_config, shape)}


def test_a_models_replaces_counts_only_with_a_cue_in_the_users_words(
        sample_db: Path, llm_config: Path) -> None:
    db = ("--db", str(sample_db))
    w = OpenCodeWriter(sample_db)
    w.set_clock(-DAY_MS)
    sid = w.new_session(project_id=ACME_PROJECT, directory=ACME)
    w.append_turn(sid, "Remember that we use Jest for unit tests.", "Noted.")
    w.append_turn(sid, "Remember that we format code with Black.", "Noted.")
    w.set_clock(0)
    w.append_turn(sid, NO_CUE, "Noted.")
    w.append_turn(sid, "From now on use Ruff, not Black, for formatting.", "Noted.")
    w.close()
    cli_json("--config", str(llm_config), "maintain", "--all", *db)
    listed = cli_json("--config", str(llm_config), "list", "--dir", ACME, *db, "--all")
    assert [m["content"] for m in listed if m["status"] == "retired"] == [
        "We format code with Black."]
    assert "We use Jest for unit tests." in {m["content"] for m in listed}


# -- a store written before write-time supersession: the next dream sets it right --------

OLD_STORE = ["We use Jest for unit tests.", "The Jest config lives in config/jest.config.js.",
             "We use Playwright for the e2e tests.", "Our API base path is /api/v2."]
CORRECTION = "Use Vitest instead of Jest from now on."


def old_store(cfg: Path, db: Path) -> dict[str, str]:
    """Facts added by hand, then the correction written to the store as a store written
    before write-time supersession holds it (nothing retired): text -> id."""
    ids = {}
    for text in OLD_STORE:
        added = cli_json("--config", str(cfg), "add", "--dir", ACME, "--db", str(db), text,
                         "--json")
        ids[text] = added["memory"]["id"]
    first = added["memory"]
    env = dict(os.environ)
    store = EdgeStore(store_dir(load_config(cfg, env), env))
    try:
        outcome = write_memory(
            store, {"content": CORRECTION, "type": "project", "scope": "project",
                    "message_ids": [], "source": "manual", "provenance": "user"},
            session_id=None, project_key=first["project_id"],
            project_root=first["project_root"], message_times={}, now=datetime.now(UTC),
            near_duplicate_similarity=0.9)
    finally:
        store.close()
    ids[CORRECTION] = outcome.memory.id
    return ids


def dream_and_check(cfg: Path, db: Path, ids: dict[str, str]) -> None:
    code, out = cli("--config", str(cfg), "dream", "--dir", ACME, "--db", str(db), "--json")
    assert code == 0, out
    entry = json.loads(out)
    listed = cli_json("--config", str(cfg), "list", "--dir", ACME, "--db", str(db), "--all")
    retired = {m["content"]: m for m in listed if m["status"] == "retired"}
    assert list(retired) == ["We use Jest for unit tests."], entry
    assert retired["We use Jest for unit tests."]["superseded_by"] == ids[CORRECTION]
    code, out = cli("--config", str(cfg), "dream", "--undo", entry["run_id"])
    assert code == 0, out
    active = cli_json("--config", str(cfg), "list", "--dir", ACME, "--db", str(db))
    assert ids["We use Jest for unit tests."] in {m["id"] for m in active}


def test_the_next_rules_dream_retires_what_an_older_correction_replaces(
        sample_db: Path, config_file: Path) -> None:
    ids = old_store(config_file, sample_db)
    dream_and_check(config_file, sample_db, ids)


def planner(body: dict[str, Any]) -> dict[str, Any]:
    """A scripted dream planner: the correction supersedes the memory it corrects."""
    prompt = "\n".join(str(m["content"]) for m in body["messages"] if m["role"] == "user")
    found = {text: mid for mid, text in re.findall(r"^\[(\S+)\] \([^)]*\) (.+)$", prompt,
                                                   re.MULTILINE)}
    new = next((i for t, i in found.items() if "instead of Jest" in t), None)
    old = next((i for t, i in found.items() if t.startswith("We use Jest")), None)
    if new is None or old is None:
        return {"operations": [{"op": "keep", "memory_ids": list(found.values()),
                                "new_content": None, "superseded_ids": [], "reason": "ok"}]}
    rest = [i for i in found.values() if i not in (new, old)]
    keep = [{"op": "keep", "memory_ids": rest, "new_content": None, "superseded_ids": [],
             "reason": "ok"}] if rest else []
    return {"operations": [{"op": "supersede", "memory_ids": [new, old], "new_content": None,
                            "superseded_ids": [old], "reason": "corrected"}, *keep]}


def test_the_next_llm_dream_retires_what_an_older_correction_replaces(
        sample_db: Path, tmp_path: Path) -> None:
    with FakeOpenAI(responder=planner) as f:
        cfg = write_config(tmp_path / "dream.toml", f"""
[extraction]
mode = "llm"
{llm_section(f)}
""")
        ids = old_store(cfg, sample_db)
        dream_and_check(cfg, sample_db, ids)
        prompts = [m["content"] for r in f.chat_requests for m in r["messages"]]
        # the correction was planned together with what it corrects
        assert any(CORRECTION in p and "We use Jest for unit tests." in p for p in prompts)


def test_a_model_that_leaves_replaces_out_still_retires_what_the_user_corrected(
        sample_db: Path, tmp_path: Path) -> None:
    def no_field(body: dict[str, Any]) -> dict[str, Any]:
        reply = scripted_model(body)
        for m in reply["memories"]:
            del m["replaces"]
        return reply

    with FakeOpenAI(responder=no_field) as f:
        cfg = write_config(tmp_path / "nofield.toml", f"""
[summaries]
session_summaries = false
project_brief = false
[extraction]
mode = "llm"
[llm]
base_url = "{f.base_url}"
model = "test-model"
api_key_env = "TEST_LLM_KEY"
json_mode = "json_object"
timeout_seconds = 5
max_retries = 0
""")
        db = ("--db", str(sample_db))
        w = OpenCodeWriter(sample_db)
        w.set_clock(-DAY_MS)
        sid = w.new_session(project_id=ACME_PROJECT, directory=ACME)
        w.append_turn(sid, "Remember that we use Jest for unit tests.", "Noted.")
        w.set_clock(0)
        w.append_turn(sid, "Actually, use Vitest instead of Jest from now on.", "Noted.")
        w.close()
        cli_json("--config", str(cfg), "maintain", "--all", *db)
        listed = cli_json("--config", str(cfg), "list", "--dir", ACME, *db, "--all")
    assert [m["content"] for m in listed if m["status"] == "retired"] == [
        "We use Jest for unit tests."]
