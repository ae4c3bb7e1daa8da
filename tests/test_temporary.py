"""One temporariness gate for the rules grammar and a model's proposals.

Each case is a user message that asks for something only for now, and the lasting memory
a model that dropped the time words would propose from it. Neither mode may store it:
the rules grammar reads the message, the model's proposal goes through the reply gate of
the real :class:`LlmExtractor` talking HTTP to the fake server. Lasting negatives ("from
now on", "always", "starting today") must still be stored in both modes.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date

import pytest

from fake_openai import FakeOpenAI, Reply
from opencode_memoryd.extract.llm_extractor import LlmExtractor
from opencode_memoryd.extract.rules import RulesExtractor
from opencode_memoryd.extract.temporal import resolve_relative, temporary_reason
from opencode_memoryd.llm.chat import ChatClient
from opencode_memoryd.models import TranscriptLine

#: (user message, what a model proposes from it without the time words).
TEMPORARY = [
    ("For now skip the e2e tests, the suite is flaky this week. Remember that.",
     "Skip the Playwright e2e tests."),
    ("Remember: skip the e2e tests for now, the suite is flaky.", "Skip the e2e tests."),
    ("Keep in mind we pin numpy to 1.26.4 for the moment.", "We pin numpy to 1.26.4."),
    ("Remember that the linter is off until the release.", "The linter is off."),
    ("Just this session, remember to write the logs to /tmp/debug.log.",
     "Write the logs to /tmp/debug.log."),
    ("Keep in mind: use the mock server while the auth service is down.",
     "Use the mock server for auth."),
    ("Remember to disable the cache temporarily.", "Disable the cache."),
    ("Note for later: main is frozen this sprint.", "Main is frozen."),
    ("Keep in mind that we deploy from the hotfix branch today.",
     "We deploy from the hotfix branch."),
    ("Remember that we use the backup registry until the outage is resolved.",
     "We use the backup registry."),
    ("Heads-up: for the time being the staging API needs the v1 token.",
     "The staging API needs the v1 token."),
    ("Remember to use node 18 until the upgrade is done.", "Use node 18."),
    ("Keep in mind, tonight the payments sandbox is offline, so mock it.",
     "Mock the payments sandbox."),
    ("Remember that the deploy is paused until the migration lands.", "The deploy is paused."),
    # a branch or a PR only, a few days, a freeze, an event of ours
    ("Remember: skip lint on this branch only.", "Skip lint."),
    ("Keep in mind: only on this PR, disable the coverage gate.",
     "Disable the coverage gate."),
    ("Remember: for the next couple of days, don't touch billing.", "Don't touch billing."),
    ("Note for later: during the freeze, merge nothing to main.", "Merge nothing to main."),
    ("Remember: until we upgrade, stick with Node 18.", "Stick with Node 18."),
]
#: (user message, the lasting memory both modes store).
LASTING = [
    ("From now on, always run the linter before a commit.",
     "Always run the linter before a commit."),
    ("Remember that we always use pnpm, never npm.", "We always use pnpm, never npm."),
    ("Starting today, we use pnpm for every package.", "We use pnpm for every package."),
    ("Going forward, the API answers in UTC.", "The API answers in UTC."),
    ("Remember that we dropped Webpack for good, Vite builds everything.",
     "We dropped Webpack for good, Vite builds everything."),
    # "until" / "while" as the condition of a standing rule
    ("Remember: never deploy while the build is broken.",
     "Never deploy while the build is broken."),
    ("Keep in mind: don't merge until CI is green.", "Don't merge until CI is green."),
    ("Remember that feature branches live until they are merged.",
     "Feature branches live until they are merged."),
    ("Remember: never merge to main during the freeze.",
     "Never merge to main during the freeze."),
]


def _lines(message: str) -> list[TranscriptLine]:
    return [TranscriptLine("msg_u1", "user", message),
            TranscriptLine("msg_a1", "assistant", "Understood.")]


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


def _llm(fake: FakeOpenAI, message: str, proposal: str) -> list[str]:
    fake.script(Reply({"memories": [{
        "content": proposal, "type": "feedback", "scope": "project", "section": "conventions",
        "message_ids": ["msg_u1"]}], "more": False}))
    chat = ChatClient(base_url=fake.base_url, api_key=None, model="extract-model",
                      max_retries=0)
    result = LlmExtractor(chat, max_memories=5, max_chars=400).extract(
        _lines(message), project_root="/srv/dev/src/acme-web")
    return [c.content for c in result.candidates]


@pytest.mark.parametrize(("message", "proposal"), TEMPORARY)
def test_a_temporary_instruction_is_stored_by_neither_mode(
        fake: FakeOpenAI, message: str, proposal: str) -> None:
    rules = RulesExtractor().extract(_lines(message), project_root="/srv/dev/src/acme-web")
    assert rules.candidates == ()
    assert _llm(fake, message, proposal) == []


@pytest.mark.parametrize(("message", "fact"), LASTING)
def test_a_lasting_instruction_is_stored_by_both_modes(
        fake: FakeOpenAI, message: str, fact: str) -> None:
    rules = RulesExtractor().extract(_lines(message), project_root="/srv/dev/src/acme-web")
    assert [c.content for c in rules.candidates] == [fact]
    assert _llm(fake, message, fact) == [fact]


def test_the_gate_names_the_phrase_and_spares_lasting_ones() -> None:
    assert temporary_reason("for now skip the e2e tests") == "for now"
    assert temporary_reason("Skip lint while CI is broken") == "while ci is broken"
    assert temporary_reason("from now on skip the e2e tests") is None
    assert temporary_reason("Starting today, use pnpm") is None
    assert temporary_reason("We moved to uv today") is None  # a date, not a limit


def test_a_proposal_from_an_unrelated_sentence_of_the_message_is_kept(
        fake: FakeOpenAI) -> None:
    message = "For now skip the e2e tests. From now on, always use pnpm."
    assert _llm(fake, message, "Always use pnpm.") == ["Always use pnpm."]


@pytest.mark.parametrize(("text", "dated", "dropped"), [
    ("The staging DB was reset last night, so seed data is gone.",
     "The staging DB was reset on 2026-11-19, so seed data is gone.",
     "The staging DB was reset, so seed data is gone."),
    ("This morning we moved to uv.", "On 2026-11-20 we moved to uv.", "We moved to uv."),
    ("Since yesterday the API needs a token.", "Since 2026-11-19 the API needs a token.",
     "The API needs a token."),
    ("We moved to uv this week.", "We moved to uv in the week of 2026-11-20.",
     "We moved to uv."),
    ("We use uv.", "We use uv.", "We use uv."),
])
def test_relative_time_words_are_resolved_or_dropped(text: str, dated: str,
                                                     dropped: str) -> None:
    assert resolve_relative(text, date(2026, 11, 20)) == dated
    assert resolve_relative(text, None) == dropped
