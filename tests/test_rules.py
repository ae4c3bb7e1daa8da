"""The rules extractor: explicit directives in human text only."""

from __future__ import annotations

import pytest

from opencode_memoryd.extract.rules import RulesExtractor, directives
from opencode_memoryd.models import TranscriptLine


@pytest.mark.parametrize(("text", "expected"), [
    ("remember that we always use pnpm, never npm",
     [("We always use pnpm, never npm.", "project")]),
    ("please remember: our API base path is /api/v2", [("Our API base path is /api/v2.",
                                                        "project")]),
    ("Keep in mind that the CI runs on Python 3.12.", [("The CI runs on Python 3.12.",
                                                        "project")]),
    ("note for the future: staging is https://staging.acme.test",
     [("Staging is https://staging.acme.test.", "project")]),
    ("From now on, always run ruff before committing",
     [("Always run ruff before committing.", "project")]),
    ("Don't forget that the API is rate limited", [("The API is rate limited.", "project")]),
    ("Remember for all my projects: I use tabs, not spaces.", [("I use tabs, not spaces.",
                                                                 "user")]),
    ("fix the bug. Remember: never push to main on Fridays. thanks",
     [("Never push to main on Fridays.", "project")]),
], ids=["remember-that", "please-remember", "keep-in-mind", "note-future", "from-now-on",
        "dont-forget", "user-scope", "mid-message"])
def test_directives_are_captured_without_trigger_words(
        text: str, expected: list[tuple[str, str]]) -> None:
    assert directives(text) == expected


@pytest.mark.parametrize("text", [
    "do you remember what we did yesterday?",
    "I remember that bug",
    "what was our python version constraint again?",
    "from now on the file is smaller",
    "remember",
])
def test_non_directives_are_ignored(text: str) -> None:
    assert directives(text) == []


def test_only_user_lines_are_mined() -> None:
    lines = [
        TranscriptLine("msg_a", "assistant", "Remember: always use yarn."),
        TranscriptLine("msg_b", "tool", "bash echo 'remember that x is y'"),
        TranscriptLine("msg_c", "user", "remember that builds use make"),
        TranscriptLine("msg_d", "user", "Remember that builds use make."),
    ]
    result = RulesExtractor().extract(lines)
    assert [(c.content, c.message_ids) for c in result.candidates] == [
        ("Builds use make.", ("msg_c",))]
    assert result.rejected == (("duplicate_in_reply", "Builds use make."),)
    assert result.tokens_in == result.tokens_out == 0


def test_types_follow_the_fact() -> None:
    lines = [TranscriptLine("m1", "user", "remember the dashboard is https://grafana.acme.test"),
             TranscriptLine("m2", "user", "remember: never use sudo in scripts"),
             TranscriptLine("m3", "user", "remember that the db is postgres 16")]
    types = [c.type for c in RulesExtractor().extract(lines).candidates]
    assert types == ["reference", "feedback", "project"]
