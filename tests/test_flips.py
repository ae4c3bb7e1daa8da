"""Grounding catches flips: a memory that keeps the user's words but turns them around
(negation, always/never, must/must not, a reversed preference or order, opposite verbs) is
refused by the extraction gate, and a faithful restatement is still kept."""

from __future__ import annotations

import json

import pytest

from flip_corpus import FAITHFUL, FLIPS
from opencode_memoryd.extract.reply import parse_reply
from opencode_memoryd.models import TranscriptLine


def gate(user: str, claim: str) -> tuple[bool, str]:
    """Run one proposed memory citing ``user`` through the real gate: (kept, reason)."""
    lines = [TranscriptLine("msg_u1", "user", user),
             TranscriptLine("msg_a1", "assistant", "Noted.")]
    reply = json.dumps({"memories": [{"content": claim, "type": "feedback",
                                      "scope": "project", "section": "conventions",
                                      "message_ids": ["msg_u1"]}], "more": False})
    accepted, rejected = parse_reply(reply, lines=lines, max_memories=10, max_chars=300)
    return bool(accepted), rejected[0][0] if rejected else ""


def test_the_corpus_is_big_enough() -> None:
    assert len(FLIPS) >= 40 and len(FAITHFUL) >= 40


def test_every_flip_is_refused_and_every_faithful_restatement_kept(
        capsys: pytest.CaptureFixture[str]) -> None:
    passed_flips = [(u, c) for u, c in FLIPS if gate(u, c)[0]]
    refused = [(u, c, gate(u, c)[1]) for u, c in FAITHFUL if not gate(u, c)[0]]
    with capsys.disabled():
        print(f"\nflips grounded: {len(passed_flips)}/{len(FLIPS)}; "
              f"faithful refused: {len(refused)}/{len(FAITHFUL)}")
    assert passed_flips == []
    assert refused == []


@pytest.mark.parametrize(("user", "claim", "reason"), [
    ("Never force-push to main.", "Always force-push to main.", "ungrounded: flipped negation"),
    ("You may skip the slow tests locally.", "Always skip the slow tests locally.",
     "ungrounded: flipped modality"),
    ("Prefer pnpm over npm.", "The user prefers npm over pnpm.", "ungrounded: flipped order"),
])
def test_a_flip_is_counted_by_its_reason(user: str, claim: str, reason: str) -> None:
    assert gate(user, claim) == (False, reason)
