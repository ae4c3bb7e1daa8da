"""Corrections said without a trigger ("Actually, we use Vitest now, not Jest", "the staging
URL is now staging2.acme.dev"), rules mode,
on copies of databases the genuine OpenCode wrote, in both storage shapes: each retires the
fact it corrects and is stored in its place; a plan, a question, a task, a negated or a
temporary replacement, and a correction of nothing stored, store and retire nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import cli_json, llm_section, write_config
from fake_openai import FakeOpenAI
from opencode_memoryd.extract.corrections import correction_sentences, is_correction
from opencode_memoryd.extract.rules import RulesExtractor, corrections, read
from opencode_memoryd.extract.supersede import corrects
from opencode_memoryd.models import TranscriptLine
from test_supersede import LINE, TRIGGER, Shape, facts, run


@pytest.fixture(params=["message", "session_message"])
def shape(request: pytest.FixtureRequest, tmp_path: Path) -> Shape:
    return Shape(request.param, tmp_path)

#: (the fact said days before, with a trigger; the correction, said without one; the fact
#: stored for it; the old fact's key word)
CORRECTED = [
    ("Remember that we use Poetry to manage dependencies.",
     "We moved off Poetry, it's uv now.", "We moved off Poetry, it's uv now.", "Poetry"),
    ("Remember that we use Jest for unit tests.",
     "Actually, we use Vitest now, not Jest.", "We use Vitest now, not Jest.", "Jest"),
    ("Remember: we use Yarn to install packages.",
     "We switched from Yarn to Bun.", "We switched from Yarn to Bun.", "Yarn"),
    ("Remember that we bundle the app with Webpack.",
     "Webpack was replaced by Vite.", "Webpack was replaced by Vite.", "Webpack"),
    ("Remember: CI runs on Travis CI.",
     "We no longer use Travis CI; CI is on GitHub Actions.",
     "We no longer use Travis CI; CI is on GitHub Actions.", "Travis"),
    ("Keep in mind: we use Redux for state.",
     "Heads-up: we ditched Redux for Zustand.", "We ditched Redux for Zustand.", "Redux"),
    ("Remember that we use Moment.js for dates.",
     "Moment.js is deprecated here, we use date-fns.",
     "Moment.js is deprecated here, we use date-fns.", "Moment"),
    ("Remember that the database is MySQL.",
     "We migrated from MySQL to PostgreSQL.", "We migrated from MySQL to PostgreSQL.", "MySQL"),
    ("Keep in mind: we deploy with Capistrano.",
     "Ok so Capistrano is gone, we deploy with Kamal.",
     "Capistrano is gone, we deploy with Kamal.", "Capistrano"),
    # a value slot given a new value
    ("Remember that the staging URL is staging.acme.dev.",
     "btw the staging URL is now staging2.acme.dev.",
     "The staging URL is now staging2.acme.dev.", "staging.acme.dev"),
    ("Remember: the default branch is master.",
     "The default branch changed to main.", "The default branch changed to main.", "master"),
]

#: (a fact said days before; a later sentence with a replacement cue that is no
#: correction of it: a question, a plan, a proposal, a task, a negation, a temporary one;
#: the fact, which stays current)
KEPT = [
    ("Remember that we use Playwright for the e2e tests.",
     "Should we switch from Playwright to Cypress?", "We use Playwright for the e2e tests."),
    ("Remember: we run the services with Docker Compose.",
     "Let's replace Docker Compose with Tilt.", "We run the services with Docker Compose."),
    ("Remember that we use Sentry for error tracking.",
     "We haven't moved off Sentry yet.", "We use Sentry for error tracking."),
    ("Remember that we style the components with Tailwind.",
     "Replace Tailwind with plain CSS in Button.tsx.",
     "We style the components with Tailwind."),
    ("Remember that we use Celery for background jobs.",
     "We might drop Celery for Dramatiq next quarter.", "We use Celery for background jobs."),
    ("Remember that we use ESLint for linting.",
     "For this week we switched from ESLint to Biome.", "We use ESLint for linting."),
]

#: Corrections of nothing the user asked to keep: stored nowhere.
ALONE = "We dropped Python 3.8 support and moved off Heroku."
ALONE_VALUE = "The API port is now 8081."


def test_corrections_said_without_a_trigger_retire_what_they_correct(
        shape: Shape, config_file: Path) -> None:
    db = ("--db", str(shape.db))
    for old, *_ in CORRECTED + KEPT:
        shape.say(old, days_ago=3)
    run(config_file, "maintain", "--all", *db)
    before = {m["content"]: m for m in facts(config_file, shape)}
    assert len(before) >= len(CORRECTED) + len(KEPT)
    for _, correction, *_ in CORRECTED:
        shape.say(correction, days_ago=1)
    for _, later, _ in KEPT:
        shape.say(later, days_ago=1)
    shape.say(ALONE, days_ago=1)
    shape.say(ALONE_VALUE, days_ago=1)
    report = run(config_file, "maintain", "--all", *db)
    assert report["totals"]["added"] == len(CORRECTED), report
    current = {m["content"]: m for m in facts(config_file, shape)}
    every = {m["id"]: m for m in facts(config_file, shape, "--all")}
    block = run(config_file, "context", "--project", shape.project, "--json")["text"]
    for old, _correction, stored, key in CORRECTED:
        old_fact = next(c for c in before if key in c)
        assert old_fact not in current, (old, current.keys())
        assert stored in current, (stored, current.keys())
        tomb = every[before[old_fact]["id"]]
        assert tomb["status"] == "retired"
        assert tomb["superseded_by"] == current[stored]["id"]
        assert old_fact not in block and stored in block
    for _, _, kept in KEPT:
        assert kept in current, (kept, current.keys())
    # nothing of the non-corrections was stored
    assert set(current) - set(before) == {s for _, _, s, _ in CORRECTED}
    assert not any("Heroku" in c or "Python 3.8" in c or "8081" in c
                   for c in every_content(every))


def every_content(every: dict[str, Any]) -> list[str]:
    return [m["content"] for m in every.values()]


def test_a_user_scope_correction_retires_the_users_fact_everywhere(
        shape: Shape, config_file: Path) -> None:
    db = ("--db", str(shape.db))
    shape.say("For all my projects, remember that I use Black to format Python.", days_ago=2)
    run(config_file, "maintain", "--all", *db)
    shape.say("I use Ruff instead of Black now.")
    run(config_file, "maintain", "--all", *db)
    listed = cli_json("--config", str(config_file), "list", "--user", "--all")
    by_text = {m["content"]: m for m in listed}
    assert by_text["I use Black to format Python."]["status"] == "retired"
    new = by_text["I use Ruff instead of Black now."]
    assert new["status"] == "active" and new["scope"] == "user"
    assert by_text["I use Black to format Python."]["superseded_by"] == new["id"]


@pytest.mark.parametrize("sentence", [
    "We moved off Poetry, it's uv now.",
    "Jest is gone, we're on Vitest.",
    "We replaced Redux with Zustand last sprint.",
    "FYI we switched from Yarn to pnpm.",
    "Flask was replaced by FastAPI for the API server.",
    "We don't use Docker Compose any more, it's Tilt.",
    "Quick update - we migrated from MySQL to Postgres.",
    "I use Ruff instead of Black now.",
    "Wait, we're not on Heroku anymore, it's Fly.io.",
    "I switched from VS Code to Neovim.",
    "Nope, it's pnpm, not npm.",
    "The prod database host changed to db2.internal.",
])
def test_a_stated_replacement_is_a_correction(sentence: str) -> None:
    assert is_correction(sentence)


@pytest.mark.parametrize("sentence", [
    "Should we switch from Jest to Vitest",          # a question without its mark
    "Can you replace Moment with date-fns?",          # a request
    "Swap Moment for date-fns in utils.ts.",          # a task
    "I think we should move off Poetry.",              # a proposal
    "We're planning to migrate from MySQL to Postgres.",
    "We're migrating from REST to GraphQL.",           # under way, not done
    "We are dropping Python 3.8 support.",
    "That's awesome, not too far away then!",          # a quality, no tool
    "If we drop Redux, the store tests break.",        # a condition
    "We haven't switched from Yarn yet.",              # negated
    "Nobody moved off Travis CI.",
    "We'll replace Webpack with Vite.",                # the future
    "For now we use npm instead of pnpm.",             # temporary
    "Until the release we switched from Vite to Webpack.",
    "The parser is fine.",                             # no cue
    "Wait, replace Jest with Vitest in the config.",   # a request after an interjection
    "Hold on, switch from npm to pnpm first.",
    "Should we use Vitest vs Jest.",
])
def test_a_plan_a_question_a_task_or_a_temporary_change_is_none(sentence: str) -> None:
    assert not is_correction(sentence)


def test_an_interjection_and_a_label_are_cut_from_the_memory() -> None:
    assert correction_sentences(*read("No no, heads-up: Jest is gone, we use Vitest.")) == [
        "Jest is gone, we use Vitest."]
    assert correction_sentences(*read("Wait, we're not on Heroku anymore, it's Fly.io.")) == [
        "we're not on Heroku anymore, it's Fly.io."]


def test_code_and_quotations_hold_no_correction() -> None:
    text = ("The log says:\n```\nmigrated from MySQL to Postgres\n```\n"
            'He wrote "we moved off Poetry" in the ticket.')
    assert correction_sentences(*read(text)) == []


def test_a_directive_is_not_also_a_correction_candidate() -> None:
    lines = [TranscriptLine(role="user", text="Remember that we moved off Poetry: it's uv now. "
                            "We switched from Yarn to Bun.", message_id="msg_1")]
    got = RulesExtractor().extract(lines, project_root="/srv/acme-web").candidates
    assert [(c.content, c.only_if_supersedes) for c in got] == [
        ("We moved off Poetry: it's uv now.", False),
        ("We switched from Yarn to Bun.", True),
    ]


# -- LLM mode: a model that says nothing of what its memories replace -------------------

def forgetful_model(body: dict[str, Any]) -> dict[str, Any]:
    """One memory per user line, its words without a trigger, ``replaces`` always empty."""
    prompt = "\n".join(str(m["content"]) for m in body["messages"] if m["role"] == "user")
    memories = []
    for mid, role, text in LINE.findall(prompt):
        if role != "user":
            continue
        fact = TRIGGER.sub("", text).strip()
        memories.append({"content": fact[:1].upper() + fact[1:], "type": "project",
                         "scope": "project", "section": "architecture",
                         "message_ids": [mid], "replaces": []})
    return {"memories": memories, "more": False}


@pytest.fixture
def forgetful_config(tmp_path: Path) -> Iterator[Path]:
    with FakeOpenAI(responder=forgetful_model) as fake:
        yield write_config(tmp_path / "llm.toml", f"""
[opencode]
settle_seconds = 0
[summaries]
session_summaries = false
project_brief = false
[extraction]
mode = "llm"
{llm_section(fake)}
""")


@pytest.mark.parametrize(("old", "correction", "key", "new_key"), [
    ("Remember that the staging URL is staging.acme.dev.",
     "Remember: the staging URL is now staging2.acme.dev.", "staging.acme.dev", "staging2"),
    ("Remember that we use Poetry to manage dependencies.",
     "We moved off Poetry, it's uv now.", "Poetry to manage", "uv now"),
], ids=["value change", "untriggered"])
def test_a_models_memory_of_a_correction_retires_the_fact_with_the_users_cue(
        shape: Shape, forgetful_config: Path, old: str, correction: str, key: str,
        new_key: str) -> None:
    db = ("--db", str(shape.db))
    shape.say(old, days_ago=2)
    run(forgetful_config, "maintain", "--all", *db)
    before = [m for m in facts(forgetful_config, shape) if key in m["content"]]
    assert len(before) == 1, before
    shape.say(correction)
    run(forgetful_config, "maintain", "--all", *db)
    current = facts(forgetful_config, shape)
    assert before[0]["id"] not in {m["id"] for m in current}
    # one memory for the correction: the model's, not a second copy by the rules
    new = [m for m in current if new_key in m["content"]]
    assert [m["source"] for m in new] == ["llm"], new
    tomb = next(m for m in facts(forgetful_config, shape, "--all")
                if m["id"] == before[0]["id"])
    assert tomb["superseded_by"] == new[0]["id"]


@pytest.mark.parametrize(("sentence", "stored"), [
    ("Python 3.13 is out.", "We use Python 3.13."),                   # news of a release
    ("Vite 6 is out!", "We build with Vite 6."),
    ("We have no more Docker containers running.", "We run the services with Docker."),
    ("No more Webpack warnings after that change.", "We use Webpack to bundle."),
    ("That commit replaced Black.", "We format with Black."),
    ("Thanks. Postgres replaced SQLite in the test fixture, so rerun the migrations.",
     "We use SQLite for the test database."),                         # an edit in one place
    ("I changed the import from lodash to lodash-es in app.ts.", "We use lodash."),
    ("The port is now open.", "The port is 8080."),                   # a state, no value
    ("The database is now locked.", "The database is PostgreSQL."),
])
def test_an_ordinary_coding_remark_corrects_nothing(sentence: str, stored: str) -> None:
    assert not any(corrects(fact, stored) for fact, _ in corrections(sentence, project="x"))


def test_work_done_on_the_project_in_the_first_person_is_no_users_choice() -> None:
    assert corrections("I migrated the tests from Jest to Vitest.", project="x") == [
        ("I migrated the tests from Jest to Vitest.", "project")]
    assert corrections("I switched from VS Code to Neovim.", project="x") == [
        ("I switched from VS Code to Neovim.", "user")]
