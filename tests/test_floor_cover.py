"""LLM mode with the rules as a floor: a directive the model already said in other words is
stored once (the model's), and a different fact of the same message is stored beside it.

The real :class:`~opencode_memoryd.extract.llm_extractor.LlmExtractor` talks HTTP to the
scripted model of ``fake_openai``; the stored points are read back with ``list``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conftest import cli, cli_json
from fake_openai import FakeOpenAI
from opencode_memoryd.extract.floor import covers
from opencode_memoryd.models import MemoryCandidate
from test_chunk_split import DIR, backlog, llm_config, user_lines

#: (user message, the model's memory of it): the same fact in other words.
PARAPHRASES = [
    ("remember: we moved off Poetry, it's uv now",
     "Use uv for Python packaging (moved from Poetry)."),
    ("remember that the staging database listens on port 5433",
     "The staging database is on port 5433."),
    ("from now on always run the tests with pytest -x before committing",
     "The user wants `pytest -x` run before every commit."),
    ("remember: never push directly to main", "Do not push to main directly."),
    ("remember: we deploy with helm to eu-west-1", "Deployments use Helm, targeting eu-west-1."),
    ("from now on use tabs for indentation in this repo", "The project indents with tabs."),
    ("remember that we use httpx, not requests", "The project uses httpx rather than requests."),
    ("keep in mind the tests need docker running", "Docker must be running for the test suite."),
    ("remember that we switched from npm to pnpm", "The project now uses pnpm (previously npm)."),
    ("from now on write commit messages in the imperative mood",
     "Commit messages should be written in the imperative."),
    ("remember that the logs live in /var/log/app",
     "Application logs are written to /var/log/app."),
    ("remember: I prefer short answers", "The user prefers answers that are short."),
    ("remember to never commit the .env file", "The .env file must never be committed."),
    ("keep in mind that the billing service is written in Go",
     "The billing service is implemented in Go."),
    ("from now on, squash commits before merging", "Commits are squashed before a merge."),
    ("remember that the frontend uses tailwind for styling",
     "Styling in the frontend is done with Tailwind."),
]

#: (user message, the model's memory of another fact in it, the rules' directive).
OTHER_FACTS = [
    ("remember that the replica listens on port 5434. The cache is Redis 7.",
     "The cache runs Redis 7.", "The replica listens on port 5434."),
    ("remember: we vendor protobuf stubs in gen/. CI runs on GitHub Actions.",
     "CI runs on GitHub Actions.", "We vendor protobuf stubs in gen/."),
    ("from now on always run make lint before pushing. The docs are built with mkdocs.",
     "Docs are built with MkDocs.", "Always run make lint before pushing."),
    ("remember: never force-push to release branches. Our staging host is stg.example.com.",
     "The staging host is stg.example.com.", "Never force-push to release branches."),
    ("remember: we deploy the worker with nomad. The frontend is React 18.",
     "The frontend uses React 18.", "We deploy the worker with nomad."),
    ("from now on use snake_case for JSON keys. The project targets Python 3.12.",
     "The project targets Python 3.12.", "Use snake_case for JSON keys."),
    ("keep in mind the e2e suite needs a browser. Lint config lives in pyproject.toml.",
     "Lint config lives in pyproject.toml.", "The e2e suite needs a browser."),
    ("remember to never log request bodies. The API token expires every 24 hours.",
     "The API token expires every 24 hours.", "Never log request bodies."),
    ("remember that the queue listens on port 5672. The queue dashboard is on 15672.",
     "The queue dashboard is on port 15672.", "The queue listens on port 5672."),
    ("keep in mind the docs need graphviz installed. The tests need a GPU.",
     "The tests need a GPU.", "The docs need graphviz installed."),
]

#: The user says a fact, then asks to remember it in other words; the model cites the first
#: message (user message, then the directive, the model's memory).
SAID_TWICE = ("we dropped black, ruff format does our code formatting now",
              "remember: we dropped black, it's ruff format now",
              "Code formatting uses ruff format (black was dropped).")

#: Directives the model says nothing about: the floor keeps them.
MISSED = [("remember that the nightly build runs at 03:00 UTC",
           "The nightly build runs at 03:00 UTC.")]


def test_the_floor_adds_only_what_the_model_did_not_say(sample_db: Path,
                                                        tmp_path: Path) -> None:
    turns = ([m for m, _ in PARAPHRASES] + [m for m, _, _ in OTHER_FACTS]
             + [m for m, _ in MISSED] + list(SAID_TWICE[:2]))
    backlog(sample_db, len(turns), lambda i: turns[i])
    said = {m: t for m, t in PARAPHRASES} | {m: t for m, t, _ in OTHER_FACTS}

    said[SAID_TWICE[0]] = SAID_TWICE[2]

    def model(body: dict[str, Any]) -> dict[str, Any]:
        return {"memories": [{"content": said[text], "type": "project", "scope": "project",
                              "message_ids": [mid]}
                             for mid, text in user_lines(body) if text in said],
                "more": False}

    with FakeOpenAI(responder=model) as fake:
        cfg = llm_config(tmp_path, fake, "max_memories_per_chunk = 100")
        code, out = cli("--config", str(cfg), "maintain", "--dir", DIR, "--db",
                        str(sample_db))
        assert code == 0, out
        assert len(fake.chat_requests) == 1
        memories = cli_json("--config", str(cfg), "list", "--dir", DIR, "--db",
                            str(sample_db))
    got = sorted((m["content"], m["source"]) for m in memories)
    want = sorted({(t, "llm") for _, t in PARAPHRASES}
                  | {(t, "llm") for _, t, _ in OTHER_FACTS}
                  | {(d, "rules") for _, _, d in OTHER_FACTS}
                  | {(d, "rules") for _, d in MISSED} | {(SAID_TWICE[2], "llm")})
    assert got == want


def _memory(text: str, mid: str) -> MemoryCandidate:
    return MemoryCandidate(content=text, type="project", scope="project", message_ids=(mid,),
                           source="llm")


def test_a_memory_that_turns_the_directive_around_does_not_stand_for_it() -> None:
    directive = _memory("Never force-push to main.", "msg_a")
    assert not covers(_memory("Always force-push to main.", "msg_a"), directive)
    assert covers(_memory("Do not force-push to main.", "msg_a"), directive)


def test_a_memory_of_another_message_stands_for_it_only_with_every_key_term() -> None:
    assert covers(_memory("Code formatting uses ruff format (black was dropped).", "msg_b"),
                  _memory("We dropped black, it's ruff format now.", "msg_a"))
    assert not covers(_memory("Tabs render as 4 spaces.", "msg_b"),
                      _memory("Use tabs.", "msg_a"))
    assert not covers(_memory("The release is tagged by CI.", "msg_b"),
                      _memory("Tag the release after the changelog is merged.", "msg_a"))
