"""Whether text the agent writes reads as an instruction aimed at the agent, or as an escape
from the context block (:func:`instruction_like`).

A heuristic with named reasons, applied to the agent's own notes only (never to the user's
words): a refused note costs the agent one message telling it to ask the user, a missed one
reaches the block as a quoted, marked, unconfirmed note. The text is checked in several
foldings, so that a disguise does not hide a pattern:

* format and invisible characters removed, white space folded (:func:`~.fence.clean`), then
  NFKC (fullwidth U+FF1C is ``<``);
* look-alike letters of Cyrillic and Greek mapped to Latin ones (``ignore`` with a Cyrillic
  U+043E) and digits inside words read as letters (``1gn0re``);
* letters spelled apart joined (``i g n o r e``);
* base64 runs decoded (a note carrying ``aWdub3JlIGFsbC...``) and checked again.

The patterns (:data:`~opencode_memoryd.injection.AGENT_PATTERNS`, shared with the gate on
generated text, :func:`~opencode_memoryd.injection.instruction_reason`) cover overriding
earlier instructions in English and eleven other languages, claiming the user's consent or
hiding from the user, piping downloads or decoded text into a shell, running code fetched
from the network, prompt tags and our marker, sending secrets or credential files away,
remote images with a query, HTML images and links whose address carries data (an
exfiltration channel when a client renders or follows them), and destructive commands.
"""

from __future__ import annotations

import unicodedata

from opencode_memoryd.injection import AGENT_PATTERNS, MAX_DECODE_DEPTH, decoded_runs, skeletons
from opencode_memoryd.usecases.fence import clean


def foldings(text: str) -> list[str]:
    """The forms of ``text`` the patterns are matched on (see the module docstring): the
    cleaned NFKC text, its look-alike and leetspeak skeleton, and that with letters spelled
    apart joined."""
    return skeletons(unicodedata.normalize("NFKC", clean(text)))


def instruction_like(text: str, _depth: int = 0) -> str | None:
    """Why ``text`` reads as an instruction aimed at the agent or as an escape from the
    context block (e.g. ``overrides instructions``, ``pipes a download into a shell``,
    ``links to an address that carries data``; ``... (base64)`` when found in a decoded
    run), or ``None`` when it reads as a plain note."""
    for form in foldings(text):
        for why, rx in AGENT_PATTERNS:
            if rx.search(form):
                return why
    if _depth < MAX_DECODE_DEPTH:
        for plain in decoded_runs(unicodedata.normalize("NFKC", clean(text))):
            inner = instruction_like(plain, _depth + 1)
            if inner is not None:
                return inner if inner.endswith("(base64)") else f"{inner} (base64)"
    return None
