"""The context-block section of a memory, chosen by rules (no LLM).

Every memory is shown in one section of the context block
(:data:`~opencode_memoryd.models.SECTIONS`). The LLM extractor proposes one with each
memory; the rules extractor, a memory added by hand, a reply without a valid section and
the one-time migration of a store written before sections existed use
:func:`section_for`:

* a ``project-brief`` is the ``brief``, a ``session-summary`` is ``progress``;
* a user-scope memory, or a fact about the user (type ``user``), is a ``user`` preference;
* ``feedback`` (how the user wants the agent to work) is ``conventions``;
* ``reference`` (where things are) is ``reference``;
* a ``project`` fact is read for cues: a URL or "docs/dashboard/ticket … at" makes it a
  ``reference``; "always/never/must/should/prefer/avoid/convention/style…", or a folder
  layout (where things of a kind go: "React components live in src/components", "handlers
  go in internal/httpapi": a plural placing verb before a relative path) makes it
  ``conventions``; "done/finished/in progress/next step/blocked/TODO…" makes it
  ``progress``; anything else (the stack, versions, layout, services) is ``architecture``.
"""

from __future__ import annotations

import re

from opencode_memoryd.models import SECTIONS

_URL = re.compile(r"\bhttps?://\S+", re.IGNORECASE)
_REFERENCE = re.compile(
    r"\b(?:docs?|documentation|dashboards?|runbooks?|wiki|tickets?|issues?|board|"
    r"spec(?:ification)?s?)\b[^.]{0,40}\b(?:at|in|on|under|lives?|is|are)\b",
    re.IGNORECASE)
_CONVENTION = re.compile(
    r"\b(?:always|never|must|mustn'?t|should(?:n'?t)?|prefer(?:s|red)?|avoid|do not|don'?t|"
    r"instead of|conventions?|style|naming|formatt(?:ed|ing)|lint(?:ed|ing|er)?|"
    r"required?|only use|not allowed|forbidden|compatible with)\b",
    re.IGNORECASE)
#: Where things of a kind go: a plural placing verb, then a relative folder path
#: ("components live in src/components", "handlers go in internal/httpapi"). One thing's
#: place ("the quota module lives in lib/quota/") is a fact, not a rule for new files; an
#: absolute path ("/api/v2") or a URL is no layout.
_LAYOUT = re.compile(
    r"\b(?:live|go|belong|sit|are(?:\s+(?:kept|stored|placed|put))?)\s+"
    r"(?:in|under|into|inside)\s+(?:the\s+)?`?(?:\./)?[A-Za-z_][\w.-]*/(?![/\w.-]*:)",
    re.IGNORECASE)
_PROGRESS = re.compile(
    r"\b(?:done|finished|completed?|in progress|wip|work in progress|next steps?|"
    r"blocked|todo|to do|remaining|pending|not yet|still (?:fails?|failing|broken)|"
    r"migrat(?:ed|ion is)|was (?:fixed|added|removed|merged)|half[- ]done|halfway|"
    r"in the middle of|ongoing|under ?way|currently (?:working|migrating|moving|rewriting))\b",
    re.IGNORECASE)


def section_for(type_: str, scope: str, text: str) -> str:
    """The section of a memory by its type, scope and text (see the module docstring).

    Args:
        type_: the memory type (one of :data:`~opencode_memoryd.models.MEMORY_TYPES`;
            an unknown one is read like ``project``).
        scope: ``user`` or ``project``.
        text: the memory's content.

    Returns:
        One of :data:`~opencode_memoryd.models.SECTIONS`. Pure and deterministic.
    """
    if type_ == "project-brief":
        return "brief"
    if type_ == "session-summary":
        return "progress"
    if scope == "user" or type_ == "user":
        return "user"
    if type_ == "feedback":
        return "conventions"
    if type_ == "reference":
        return "reference"
    if _URL.search(text) or _REFERENCE.search(text):
        return "reference"
    if _CONVENTION.search(text) or _LAYOUT.search(text):
        return "conventions"
    if _PROGRESS.search(text):
        return "progress"
    return "architecture"


def valid_section(value: object) -> str | None:
    """``value`` lower-cased and stripped when it is one of the sections, else ``None``."""
    if not isinstance(value, str):
        return None
    v = value.strip().lower()
    return v if v in SECTIONS else None
