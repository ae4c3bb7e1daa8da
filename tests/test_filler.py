"""Conversational filler is cut from rules-mode memories, and no fact word goes with it.

Each pair is a message as a user types it and the memory the rules extractor stores. The
memory is the pair's "after"; besides, every content word of the message that the memory
leaves out must be a trigger or filler word (:data:`DROPPABLE`): the cut never takes a
word of the fact.
"""

from __future__ import annotations

import pytest

from opencode_memoryd.extract.facts import content_words
from opencode_memoryd.extract.rules import TRIGGER_WORDS, directives

#: (before, after).
PAIRS = [
    ("Before we dive in: remember that we use pnpm, never npm.", "We use pnpm, never npm."),
    ("Before we dive in, keep in mind the CI runs on Python 3.12.",
     "The CI runs on Python 3.12."),
    ("Before we get started: remember that the API is versioned under /v2.",
     "The API is versioned under /v2."),
    ("Before we begin, please remember that staging deploys on every merge.",
     "Staging deploys on every merge."),
    ("First things first: remember that all timestamps are UTC.", "All timestamps are UTC."),
    ("First of all, keep in mind that the monorepo uses Turborepo.",
     "The monorepo uses Turborepo."),
    ("As I said before, remember that we squash-merge every PR.", "We squash-merge every PR."),
    ("Like I said, keep in mind that the docs are built with MkDocs.",
     "The docs are built with MkDocs."),
    ("Just to be clear, from now on we use tabs in Makefiles.", "We use tabs in Makefiles."),
    ("Oh and remember that the staging DB resets nightly.", "The staging DB resets nightly."),
    ("Oh, and by the way, remember that deploys go through GitHub Actions.",
     "Deploys go through GitHub Actions."),
    ("By the way, keep in mind that we squash-merge every PR.", "We squash-merge every PR."),
    ("Anyway, remember that the API key rotates monthly.", "The API key rotates monthly."),
    ("While I remember: the billing service is written in Go, keep that in mind.",
     "The billing service is written in Go."),
    ("Remember that we use pnpm, ask me if you're unsure.", "We use pnpm."),
    ("Keep in mind that the payment code is owned by the billing team; if in doubt, ask me.",
     "The payment code is owned by the billing team."),
    ("Remember that the fixtures live in tests/data - ping me if anything is unclear.",
     "The fixtures live in tests/data."),
    ("One more thing: remember that feature flags live in LaunchDarkly.",
     "Feature flags live in LaunchDarkly."),
    ("Heads-up for future sessions: before we start, the dev DB must be seeded.",
     "The dev DB must be seeded."),
    # the fact keeps what only looks like filler
    ("Before you deploy, remember to run the migrations.",
     "Before you deploy, run the migrations."),
    ("Remember: ask me before adding a dependency.", "Ask me before adding a dependency."),
    ("Remember that the first release is 1.0 and the way we tag is vX.Y.Z.",
     "The first release is 1.0 and the way we tag is vX.Y.Z."),
]

#: Content words that filler and triggers are made of: the only ones a memory may leave out.
DROPPABLE = TRIGGER_WORDS | frozenset([
    "dive", "get", "started", "begin", "first", "things", "said", "like", "clear", "oh",
    "way", "anyway", "ask", "unsure", "doubt", "ping", "anything", "unclear", "heads",
    "sessions", "start",
])


@pytest.mark.parametrize(("before", "after"), PAIRS)
def test_filler_is_cut_and_no_fact_word_is_lost(before: str, after: str) -> None:
    got = directives(before, project="acme-web")
    assert got == [(after, "project")]
    kept = content_words(got[0][0])
    assert kept <= content_words(before)
    lost = content_words(before) - kept
    assert lost <= DROPPABLE, lost
