"""The cue parsing of supersession: which term a correction replaces, and which memories
state that term as their choice (precision first: a labelled list and the rules corpus as
negatives)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from opencode_memoryd.dream.grouping import correction_edges
from opencode_memoryd.extract.supersede import (
    corrects,
    grounded_replaces,
    replaced_terms,
    states_use,
)
from opencode_memoryd.models import Memory
from rules_scoring import load

CORRECTIONS = [
    ("Use Vitest instead of Jest.", "Jest"),
    ("Actually, use Vitest instead of using Jest.", "Jest"),
    ("We moved off Poetry: it's uv now.", "Poetry"),
    ("We migrated away from CircleCI to GitHub Actions.", "CircleCI"),
    ("We switched from npm to pnpm.", "npm"),
    ("Replace Webpack with Vite.", "Webpack"),
    ("We no longer use Travis CI, it's GitHub Actions now.", "Travis CI"),
    ("We don't use Redux any more, we use Zustand.", "Redux"),
    ("We don\u2019t use Redux anymore.", "Redux"),
    ("Not Poetry any more: uv.", "Poetry"),
    ("We stopped using Sentry.", "Sentry"),
    ("Moment.js is deprecated here; use date-fns.", "Moment.js"),
    ("The Heroku deploy is gone; we deploy on Fly.io now.", "Heroku"),
    ("We dropped MySQL, the database is PostgreSQL now.", "MySQL"),
    ("Flask → FastAPI for the API server.", "Flask"),
    ("Flask -> FastAPI.", "Flask"),
    ("Use Ruff, not Black, for formatting.", "Black"),
    ("Prefer pnpm rather than npm.", "npm"),
    ("The billing service now uses Valkey for caching, replacing Redis.", "Redis"),
    ("Flask was replaced by FastAPI for the API server.", "Flask"),
    ("Remember that Flask was replaced by FastAPI for the API server.", "Flask"),
    ("Remember that Travis CI has been replaced with GitHub Actions.", "Travis CI"),
    ("Replace the Jest runner with Vitest.", "Jest"),
    ("We replaced the Lodash helpers with native methods.", "Lodash"),
    # a lowercase tool name, where the text names the new tool by its capitalised name
    ("Use Polars instead of pandas for dataframes.", "pandas"),
    ("We moved off redis to Valkey for the cache.", "redis"),
    ("Switched from postgres to SQLite for the local dev database.", "postgres"),
    # "X, not Y" after the slot's use word
    ("I review diffs with delta, not Meld.", "Meld"),
    ("We deploy on Fly.io, not Heroku.", "Heroku"),
    ("Run the unit tests via Vitest rather than Jest.", "Jest"),
    # Y takes X's place, said with Y first
    ("From now on, Vitest replaces Jest.", "Jest"),
    ("Vitest supersedes Jest.", "Jest"),
    ("We now use pnpm in place of npm.", "npm"),
    # a change of tool said with another verb of change
    ("Changed from Mocha to Jest.", "Mocha"),
    ("We went from Webpack to Vite last sprint.", "Webpack"),
    ("We upgraded from Node 18 to Node 20.", "Node 18"),
    # X done away with, in other words
    ("We got rid of Redux, it's Zustand now.", "Redux"),
    ("We phased out MySQL in favor of PostgreSQL.", "MySQL"),
    ("Drop Moment.js, use date-fns.", "Moment.js"),
    ("Jest is out; Vitest is in.", "Jest"),
    ("Poetry's been replaced by uv.", "Poetry"),
    ("Heroku is no longer used; deploy to Fly.io.", "Heroku"),
    # the new term in its own clause before the old one's
    ("Use uv; Poetry is obsolete.", "Poetry"),
    ("Going forward we use Vitest, Jest is retired.", "Jest"),
    # X in the past
    ("We used to use Jest but now we use Vitest.", "Jest"),
    ("We use Vitest these days (used to be Jest).", "Jest"),
    ("We used to deploy on Heroku; now it's Fly.io.", "Heroku"),
    ("It was Jest before, now Vitest.", "Jest"),
    # "the slot is Y, not X"
    ("Correction: the test runner is Vitest, not Jest.", "Jest"),
    ("It's Vitest now, not Jest.", "Jest"),
    ("We're not on Heroku anymore, it's Fly.io.", "Heroku"),
    # X gone, in other words
    ("Webpack is no more; Vite builds the app.", "Webpack"),
    ("Poetry is out, uv is the package manager.", "Poetry"),
    ("No more Redux, we use Zustand.", "Redux"),
    ("Travis CI is history.", "Travis CI"),
    ("Celery got replaced by Dramatiq.", "Celery"),
    ("Prettier has been swapped out for Biome.", "Prettier"),
    ("We swapped out Prettier for Biome.", "Prettier"),
    # Y takes X's place, X named after the move's object
    ("Kamal takes over from Capistrano for deploys.", "Capistrano"),
    ("Kubernetes replaced Nomad.", "Nomad"),
    ("We've migrated the API from Flask to FastAPI.", "Flask"),
    # a code span is one term
    ("Tests now run with `make check` instead of `make test`.", "make test"),
]
NOT_CORRECTIONS = [
    "We use Jest for unit tests.",
    "We always use pnpm, never npm.",
    "We use yarn 1 not yarn berry.",
    "Instead of asking, just run the tests.",
    "Lint before tests, not after.",
    "The old endpoint is deprecated.",
    "The old `v1` client is deprecated and will be removed in June.",
    "I use tabs, not spaces.",
    "Tests should use factories instead of fixtures.",
    "The API base path is /api/v2.",
    "The flaky test was replaced by a better one.",
    # the words of the cues above, where nothing is replaced
    "The release is out.",
    "It was fast before the refactor.",
    "The helper is used to parse args.",
    "Black is used to format the code.",
    "Drop the database before seeding.",
    "Changed from draft to ready for review.",
    "The CLI was rewritten earlier this year.",
    "I used to think tabs were better.",
    "Get rid of the warnings before merging.",
    "Phase out the old flags slowly.",
    "Staging is out of sync with prod.",
    "Bob is out sick.",
    "The new version is out now.",
    "Poetry is out of date.",
    "No more than 3 retries per job.",
    "I replaced the for loop with a map.",
    "Changed the default from 10 to 20.",
    "That's awesome, not too far away then!",
    "It's fine, not broken.",
]
STATES = ["We use Jest for unit tests.", "Jest is our test runner.", "Run the tests with Jest.",
          "We always use npm to install.", "CI runs on Travis CI.", "The database is MySQL."]
MENTIONS = ["The Jest config lives in config/jest.config.js.", "We never use npm.",
            "Docs for Poetry plugins are at https://python-poetry.org/docs/plugins/.",
            "We use Vitest instead of Jest.", "The jester script prints jokes.",
            "We don't use Jest snapshots."]


@pytest.mark.parametrize(("text", "term"), CORRECTIONS)
def test_a_correction_names_the_term_it_replaces(text: str, term: str) -> None:
    assert replaced_terms(text) == (term,)


@pytest.mark.parametrize("text", NOT_CORRECTIONS)
def test_a_text_without_a_replacement_replaces_nothing(text: str) -> None:
    assert replaced_terms(text) == ()


def test_a_fact_states_the_term_only_as_its_choice() -> None:
    term = {"We always use npm to install.": "npm", "CI runs on Travis CI.": "Travis CI",
            "The database is MySQL.": "MySQL"}
    assert [t for t in STATES if not states_use(t, term.get(t, "Jest"))] == []
    terms = {MENTIONS[1]: "npm", MENTIONS[2]: "Poetry"}
    assert [t for t in MENTIONS if states_use(t, terms.get(t, "Jest"))] == []


def test_no_fact_of_the_rules_corpus_corrects_an_unrelated_one() -> None:
    facts = sorted({fact for case in load() for fact, _scope in case.expected})
    assert len(facts) > 500
    pairs = [(new, old) for new in facts if replaced_terms(new)
             for old in facts if old != new and corrects(new, old)]
    assert pairs == []


def test_a_models_replaces_counts_only_where_the_users_sentence_says_so() -> None:
    said = ["Actually, use Vitest instead of Jest from now on.", "We deploy on Fridays."]
    own = " ".join(said)
    assert grounded_replaces(["jest"], "The project uses Vitest.", own, said) == (
        ("Jest",), said[0])
    assert grounded_replaces(["Mocha"], "The project uses Vitest.", own, said) == ((), "")
    # none named: the terms the cited cue replaces that the memory names
    assert grounded_replaces(None, "Vitest replaces Jest.", own, said) == (("Jest",), said[0])
    assert grounded_replaces([], "Vitest, not Jest.", own, said) == (("Jest",), said[0])
    assert grounded_replaces(None, "The project uses Vitest.", own, said) == ((), "")
    assert grounded_replaces("Jest", "The project uses Vitest.", own, said) == ((), "")


def _memory(i: int, text: str) -> Memory:
    at = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(days=i)
    return Memory(id=f"m{i:04d}", content=text, type="project", scope="project",
                  project_id="p", project_root="/p", session_id="s", message_ids=["msg"],
                  source="rules", created_at=at, updated_at=at)


def test_a_dream_joins_each_correction_with_the_older_facts_it_corrects_only() -> None:
    texts = sorted({fact for case in load() for fact, _scope in case.expected})
    olds = ["We use Jest for unit tests.", "We build with Makefiles.",
            "The Jest config lives in config/jest.config.js."]
    later = ["Use Vitest instead of Jest.", "Replace Makefile with just."]
    active = [_memory(i, t) for i, t in enumerate([*olds, *texts, *later])]
    ids = {m.content: m.id for m in active}
    edges = {(a, b) for _score, a, b in correction_edges(active)}
    # the corpus's own facts that state Jest or Makefiles as the choice are corrected too;
    # "Tabs for indentation in Makefiles only, …" and the Jest config are not
    corrected = {later[0]: ["We use Jest for unit tests.",
                            "We use Jest for unit tests and Playwright for e2e."],
                 later[1]: ["We build with Makefiles.", "I prefer Makefiles over npm scripts."]}
    assert edges == {tuple(sorted((ids[new], ids[old])))
                     for new, olds_of in corrected.items() for old in olds_of}


def test_a_correction_about_one_subject_leaves_the_same_term_of_another() -> None:
    new = "The billing service now uses Valkey for caching, replacing Redis."
    assert corrects(new, "The billing service uses Redis for caching.")
    assert not corrects(new, "The payments service uses Redis for caching.")
    # a correction naming no particular subject is about every fact stating the term
    assert corrects("The project uses Vitest instead of Jest.", "We use Jest for unit tests.")


def test_a_correction_said_as_we_re_is_about_the_same_subject() -> None:
    assert corrects("We're not using Redux any more, we use Zustand.", "We use Redux for state.")
    assert corrects("I'm not using Black any more.", "I use Black to format Python.")


@pytest.mark.parametrize(("new", "old"), [
    ("Use Polars instead of pandas for dataframes.", "We process dataframes with pandas."),
    ("I review diffs with delta, not Meld.", "I review diffs with Meld."),
    ("We moved off redis to Valkey for the cache.", "The cache runs on redis."),
    ("Going forward we use Vitest, Jest is retired.", "We use Jest for unit tests."),
    ("We got rid of Redux, it's Zustand now.", "We use Redux for state."),
    ("Poetry's been replaced by uv.", "We manage dependencies with Poetry."),
    ("Changed from Mocha to Jest.", "We use Mocha for tests."),
    ("We phased out MySQL in favor of PostgreSQL.", "The database is MySQL."),
    ("Drop Moment.js, use date-fns.", "We use Moment.js for dates."),
    ("Correction: the test runner is Vitest, not Jest.", "Jest is our test runner."),
    ("Vitest supersedes Jest.", "We use Jest for unit tests."),
    ("We used to use Jest but now we use Vitest.", "We use Jest for unit tests."),
    ("We used to deploy on Heroku; now it's Fly.io.", "We deploy on Heroku."),
])
def test_a_correction_of_the_usual_shapes_corrects_the_fact_it_replaces(new: str,
                                                                        old: str) -> None:
    assert corrects(new, old)


def test_a_new_term_that_takes_over_names_no_subject() -> None:
    assert corrects("Kamal takes over from Capistrano for deploys.", "We deploy with Capistrano.")
    assert corrects("Kubernetes replaced Nomad.", "We run the jobs on Nomad.")
    assert not corrects("The billing service replaced Redis with Valkey.",
                        "The payments service uses Redis.")


def test_the_slots_use_word_ends_the_subject_of_a_correction() -> None:
    """"I review diffs with delta, not Meld" is about reviewing diffs: not about "I open
    PRs with Meld"."""
    assert not corrects("I review diffs with delta, not Meld.", "I open PRs with Meld.")
