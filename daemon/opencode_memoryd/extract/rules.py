"""The rules extractor: explicit "remember …" directives, no LLM at all.

It reads only human text (``user`` transcript lines) and captures sentences that hold an
explicit directive: *remember (that) …*, *please remember: …*, *keep in mind (that) …*,
*note for the future: …*, *for future reference, …*, *don't forget (that) …*,
*from now on(,) always/never …*. The stored fact is the sentence without its trigger words;
a directive said to hold for all the user's projects gets user scope.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from opencode_memoryd.models import (
    ExtractionResult,
    MemoryCandidate,
    MemoryType,
    Scope,
    TranscriptLine,
    normalize_text,
)

_TRIGGER = re.compile(
    r"""^\s*(?:(?:please|pls|also|and|ok(?:ay)?|so|hey)[\s,]+)*
    (?:
        (?:always\s+)?remember(?:\s+this)?(?:\s+that)?\s*[:,\-\u2013]?\s+
      | keep\s+in\s+mind(?:\s+that)?\s*[:,\-\u2013]?\s+
      | note\s+for\s+(?:the\s+)?future\s*[:,\-\u2013]?\s+
      | for\s+future\s+reference\s*[:,\-\u2013]?\s+
      | (?:do\s+not|don'?t)\s+forget(?:\s+that)?\s*[:,\-\u2013]?\s+
      | (?:from\s+now\s+on|going\s+forward|in\s+(?:the\s+)?future)\s*[:,\-\u2013]?\s+
          (?=(?:always|never|(?:please\s+)?(?:use|do|don'?t|avoid|prefer|make|keep|run|write)\b))
    )
    (?P<fact>.+)$""",
    re.IGNORECASE | re.VERBOSE | re.DOTALL,
)

_USER_SCOPE = re.compile(
    r"""[\s,;:]*\b(?:
        (?:for|in|across)\s+(?:all|every|each)\s+(?:of\s+)?(?:my|our|the)?\s*(?:projects?|repos?|repositories|codebases?)
      | (?:everywhere|globally|in\s+general|regardless\s+of\s+(?:the\s+)?project)
    )\b[\s,;:]*""",
    re.IGNORECASE | re.VERBOSE,
)

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_URL = re.compile(r"https?://\S+")
_FEEDBACK = re.compile(r"\b(always|never|don'?t|do not|avoid|prefer|instead of|must not)\b",
                       re.IGNORECASE)
_ABOUT_USER = re.compile(r"^\s*(i|i'm|i am|my)\b", re.IGNORECASE)


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]


def _clean(fact: str) -> str:
    fact = fact.strip().strip("\"'` ").strip()
    fact = re.sub(r"\s+", " ", fact)
    fact = fact.rstrip(" ,;:")
    if not fact:
        return ""
    fact = fact[0].upper() + fact[1:]
    if fact[-1] not in ".!?":
        fact += "."
    return fact


def _classify(fact: str, scope: Scope) -> MemoryType:
    if _URL.search(fact):
        return "reference"
    if _FEEDBACK.search(fact):
        return "feedback"
    if scope == "user" or _ABOUT_USER.search(fact):
        return "user"
    return "project"


def directives(text: str) -> list[tuple[str, Scope]]:
    """Find the explicit directives in one human message.

    Returns:
        ``(fact, scope)`` for each directive sentence: the fact without its trigger words,
        capitalised and ending with a full stop; scope ``user`` when the sentence says it
        holds for all the user's projects, else ``project``.
    """
    out: list[tuple[str, Scope]] = []
    for sentence in _sentences(text):
        m = _TRIGGER.match(sentence)
        if not m:
            continue
        fact = m.group("fact")
        scope: Scope = "project"
        if _USER_SCOPE.search(fact):
            scope = "user"
            fact = _USER_SCOPE.sub(" ", fact)
        fact = _clean(fact)
        if len(normalize_text(fact)) >= 3:
            out.append((fact, scope))
    return out


class RulesExtractor:
    """Extract explicit directives from human text (``extraction.mode = "rules"``).

    Args:
        max_chars: longest memory kept; longer directives are refused with a reason.
    """

    name = "rules"

    def __init__(self, *, max_chars: int = 400) -> None:
        self.max_chars = max_chars

    def extract(
        self, lines: Sequence[TranscriptLine], *, project_root: str | None = None
    ) -> ExtractionResult:
        """Return one candidate per directive found in the ``user`` lines of ``lines``."""
        del project_root  # the rules need no context
        seen: set[str] = set()
        accepted: list[MemoryCandidate] = []
        rejected: list[tuple[str, str]] = []
        for line in lines:
            if line.role != "user":
                continue
            for fact, scope in directives(line.text):
                if len(fact) > self.max_chars:
                    rejected.append(("too_long", fact[:60]))
                    continue
                key = normalize_text(fact)
                if key in seen:
                    rejected.append(("duplicate_in_reply", fact[:60]))
                    continue
                seen.add(key)
                accepted.append(MemoryCandidate(
                    content=fact, type=_classify(fact, scope), scope=scope,
                    message_ids=(line.message_id,), source="rules",
                ))
        return ExtractionResult(candidates=tuple(accepted), model="rules",
                                rejected=tuple(rejected))
