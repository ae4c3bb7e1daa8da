"""The parts of the rules grammar: sentences, masking, anaphora, negation, scope, types."""

from __future__ import annotations

import time

import pytest

from opencode_memoryd.extract.clauses import is_clause, is_rule
from opencode_memoryd.extract.grammar import Fact, read
from opencode_memoryd.extract.rules import RulesExtractor, classify, directives, finish, is_junk
from opencode_memoryd.extract.segment import MASK, units
from opencode_memoryd.models import TranscriptLine


def sentences(text: str) -> list[str]:
    return [u.text for u in units(text) if u.kind == "sentence"]


def test_sentences_are_not_cut_at_abbreviations_versions_files_or_urls() -> None:
    text = ("Remember that e.g. Chrome, i.e. Blink, works. We run Python 3.9 with "
            "config.yaml, see https://docs.acme.test/a.b. Dr. Meyer owns it, etc. Done.")
    assert sentences(text) == [
        "Remember that e.g. Chrome, i.e. Blink, works.",
        "We run Python 3.9 with config.yaml, see https://docs.acme.test/a.b.",
        "Dr. Meyer owns it, etc.", "Done."]
    assert sentences("It lives in src/main.ts... not in index.ts. Ok") == [
        "It lives in src/main.ts... not in index.ts.", "Ok"]


def test_quotes_code_spans_and_urls_are_masked() -> None:
    [u] = units('He wrote "remember to rebase" in `remember.py`, see https://x.test/remember')
    assert "remember" not in u.masked.replace("remember to", "")  # all three are masked
    assert len(u.masked) == len(u.text) and MASK in u.masked


def test_code_logs_quotes_and_transcripts_are_barriers() -> None:
    text = ("Look:\n```\nremember that x\n```\n> remember that y\nAssistant: remember z\n"
            "2024-05-02 10:14:33 WARN remember-token missing\nERROR: remember failed\n"
            "Remember that the API is v2.")
    assert [u.kind for u in units(text)] == ["sentence", "barrier", "sentence"]
    assert directives(text) == [("The API is v2.", "project")]


def test_a_continued_line_joins_its_sentence_and_list_items_stand_alone() -> None:
    text = "Things to remember:\n- the frontend is in web/\n- the backend is in api/\nand more"
    assert [(u.text, u.bullet) for u in units(text)] == [
        ("Things to remember:", False), ("the frontend is in web/", True),
        ("the backend is in api/\nand more", True)]


@pytest.mark.parametrize(("text", "expected"), [
    ("We deploy on Fridays. Please remember that.", ["We deploy on Fridays."]),
    ("Remember this. The billing cron never runs twice.", ["The billing cron never runs twice."]),
    ("Keep this in mind:\nThe events are batched.", ["The events are batched."]),
    ("The app runs on Fly. The DB is on Neon. Remember both.",
     ["The app runs on Fly.", "The DB is on Neon."]),
    ("Rules:\n- no default exports\n- no barrel files\nRemember them.",
     ["No default exports.", "No barrel files."]),
    ("Remember that X is 1. Keep that in mind.", ["X is 1."]),
    ("Remember that.", []),
    ("Thanks! Remember that.", []),
    ("What do we use? Remember that.", []),
    ("We use pnpm.\n```\nls\n```\nRemember that.", []),
], ids=["back", "forward-this", "forward-colon", "both", "list-them", "redundant", "alone",
        "junk-antecedent", "question-antecedent", "barrier"])
def test_anaphora_store_the_sentence_they_point_at_and_never_themselves(
        text: str, expected: list[str]) -> None:
    assert [f for f, _ in directives(text)] == expected


@pytest.mark.parametrize("text", [
    "Remember that we use yarn. Actually, forget that.",
    "Keep in mind that the port is 3000. Scratch that, never mind.",
    "Remember: X is 1. Never mind, don't remember that.",
])
def test_a_retraction_drops_what_the_sentence_before_stored(text: str) -> None:
    assert directives(text) == []


def test_a_retraction_keeps_a_later_directive() -> None:
    text = "Remember that the worker needs Redis. Scratch that, remember that it needs RabbitMQ."
    assert [f for f, _ in directives(text)] == ["It needs RabbitMQ."]


@pytest.mark.parametrize(("text", "fact"), [
    ("Remember for all my projects: I use tabs.", "I use tabs."),
    ("For every repo I work on, remember to sign commits.", "Sign commits."),
    ("Keep in mind that I want short answers, across all my projects.", "I want short answers."),
    ("Remember that we use MIT. This applies to all my projects.", "We use MIT."),
    ("Across all my repos: never add copyright headers.", "Never add copyright headers."),
    ("Please remember, in general, that I like concise answers.", "I like concise answers."),
    ("Remember that my timezone is CET.", "My timezone is CET."),
], ids=["start", "every-repo", "end", "scope-note", "scope-alone", "in-general", "about-me"])
def test_user_scope_from_its_phrasings_and_the_phrase_is_cut(text: str, fact: str) -> None:
    assert directives(text) == [(fact, "user")]


@pytest.mark.parametrize("text", [
    "Remember to install ruff globally.",
    "Keep in mind we use ISO dates everywhere in this repo.",
    "Remember that in this repo I prefer rebasing.",
])
def test_scope_words_that_belong_to_the_fact_keep_project_scope(text: str) -> None:
    [(_, scope)] = directives(text)
    assert scope == "project"


def test_this_service_names_the_project_in_project_scope_only() -> None:
    assert directives("Remember: this service must stay on Python 3.9", project="ingest") == [
        ("The ingest service must stay on Python 3.9.", "project")]
    assert directives("Remember: this service must stay on Python 3.9") == [
        ("This service must stay on Python 3.9.", "project")]
    assert directives("Keep in mind that in this repo we merge.", project="web") == [
        ("In the web repo we merge.", "project")]


def test_the_project_name_comes_from_the_session_folder() -> None:
    lines = [TranscriptLine("m1", "user", "Remember that this app targets iOS 15.")]
    result = RulesExtractor().extract(lines, project_root="/srv/dev/src/mobile-app/")
    assert [c.content for c in result.candidates] == ["The mobile-app app targets iOS 15."]


@pytest.mark.parametrize(("text", "expected"), [
    ("remember to run `make lint` before committing", "Run `make lint` before committing."),
    ("Remember not to touch src/gen/.", "Do not touch src/gen/."),
    ("please remember that we use pnpm, ok?", "We use pnpm."),
    ("REMEMBER!!! The DB is read-only", "The DB is read-only."),
    ("Remember: \"never push on Fridays\"", "Never push on Fridays."),
    ("remember that settings.local.py is never committed", "settings.local.py is never committed."),
    ("remember that i prefer yarn", "I prefer yarn."),
    ("remember that the loop var is `i` and ?i=1 selects it", "The loop var is `i` and ?i=1 "
     "selects it."),
])
def test_the_stored_text_is_the_fact_alone(text: str, expected: str) -> None:
    assert [f for f, _ in directives(text)] == [expected]


def test_junk_is_refused() -> None:
    assert is_junk("That.") and is_junk("Keep it in mind.") and is_junk("Please remember this.")
    assert not is_junk("Use pnpm.") and not is_junk("No `any` in TypeScript.")
    assert finish(Fact("that for later"), project=None, scope="project") is None
    assert finish(Fact("I'll keep that in mind"), project=None, scope="project") is None


def test_clauses_and_rules() -> None:
    assert is_clause("we use pnpm") and is_clause("builds use make")
    assert is_clause("the docs are at /docs") and is_clause("I'm in CET")
    assert not is_clause("that bug from last week")
    assert not is_clause("the edge case where the list is empty")
    assert is_rule("always run ruff", strong=False) and is_rule("we use pnpm", strong=True)
    assert not is_rule("we use pnpm", strong=False)
    assert not is_rule("the file is smaller", strong=True)
    assert not is_rule("it takes two minutes to build", strong=True)
    assert not is_rule("I'll always run the tests", strong=True)


def test_types_follow_the_fact() -> None:
    assert classify("The dashboard is https://grafana.acme.test.", "project") == "reference"
    assert classify("The on-call runbook is in the wiki.", "project") == "reference"
    assert classify("Run `make lint` before every commit.", "project") == "feedback"
    assert classify("Never use sudo in scripts.", "project") == "feedback"
    assert classify("I'm a backend developer.", "user") == "user"
    assert classify("Test data lives in tests/data.", "project") == "project"


def test_a_readings_flags() -> None:
    [u] = units("This applies to all my projects.")
    assert read(u).scope_note
    [u] = units("Forget that.")
    assert read(u).retract
    [u] = units("A few things to keep in mind:")
    assert read(u).list_head
    [u] = units("Keep both in mind.")
    r = read(u)
    assert (r.anaphor, r.plural) == ("back", 2)


@pytest.mark.parametrize("text", [
    "remember" + " " * 20_000 + "x",
    "we use pnpm" + " " * 10_000 + ", keep that in mind" + " " * 10_000 + "!",
    "please " * 5_000 + "remember that x is y",
    "remember " + ", " * 10_000 + "x",
    "for all my " * 3_000 + "projects remember that x is y",
    "keep " + "x " * 10_000 + "in mind",
    "remember" + ".-,;:" * 5_000,
], ids=["spaces", "spaces-2", "fillers", "commas", "scope", "keep", "punct"])
def test_pathological_messages_are_read_in_linear_time(text: str) -> None:
    began = time.perf_counter()
    directives(text)
    assert time.perf_counter() - began < 2.0
