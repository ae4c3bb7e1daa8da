"""The gate for generated text: a model's session summary or project brief, an OpenCode
compaction summary.

Generated text is written from tool output, assistant text and files, all of which an
attacker can write into (a cloned README, a fetched page, a command's output). So it goes
through the same checks as a proposed fact (:mod:`opencode_memoryd.extract.reply`), one
sentence at a time: a sentence is kept only when it reads as no instruction
(:func:`~opencode_memoryd.injection.instruction_reason`), is no junk
(:func:`~opencode_memoryd.extract.reply.junk_reason`), and is grounded in what it may
draw on (:func:`~opencode_memoryd.extract.reply.grounding_gap`): the user's own words in
the session, and facts recorded from its tool calls (file names, command names), or for a
brief the facts read from the project's manifests. Every other sentence is left out; a
text none of whose sentences is kept is ``""``.
"""

from __future__ import annotations

import re

from opencode_memoryd.extract.reply import grounding_gap, junk_reason
from opencode_memoryd.injection import instruction_reason

_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=\S)|\s*\n+\s*|;\s+")


def sentences(text: str) -> list[str]:
    """``text`` split into sentences (at ``. ! ?`` before a space, at line breaks and at
    ``;``), stripped; empty ones left out."""
    return [s.strip() for s in _SENTENCE.split(text) if s and s.strip()]


def refusal(sentence: str, grounds: str) -> str | None:
    """Why one generated ``sentence`` may not be stored, or ``None`` when it may:
    ``instruction: <reason>``, ``junk: <reason>`` or ``ungrounded: <reason>`` (against
    ``grounds``: the user's words and the recorded facts, one text). Fixed strings only."""
    reason = instruction_reason(sentence)
    if reason:
        return f"instruction: {reason}"
    junk = junk_reason(sentence)
    if junk and junk != "bare path":
        return f"junk: {junk}"
    gap = grounding_gap(sentence, grounds)
    return f"ungrounded: {gap}" if gap else None


def gate(text: str, grounds: str) -> tuple[str, list[str]]:
    """The sentences of ``text`` that pass :func:`refusal` against ``grounds``, joined
    by a space, and the reasons of those left out (in order)."""
    kept: list[str] = []
    refused: list[str] = []
    for s in sentences(text):
        reason = refusal(s, grounds)
        if reason:
            refused.append(reason)
        else:
            kept.append(s if s[-1] in ".!?" else s + ".")
    return " ".join(kept), refused
