"""Secrets split across lines: a key pasted over two lines is one secret.

Two mechanisms, both used by :func:`~opencode_memoryd.redaction.scan.apply_rules`:

* :func:`find_joins` finds line breaks between two pieces of one token (a line that ends
  in a run of token characters, the next starting with one, both random-looking); the
  rules then run on the text without those breaks, so that a key whose first half is
  too short for its rule (``hf_AbC`` / ``dEf…``) is still found whole.
  :func:`to_original` maps positions back.
* :func:`continuation_end` grows a found secret that ends at a line break over the next
  line when that line is a lone random-looking run (``password=x&y`` / ``Zq81…``).

Internal to :mod:`opencode_memoryd.redaction`; other code imports
:mod:`opencode_memoryd.redaction.engine`.
"""

from __future__ import annotations

import bisect
import re

from opencode_memoryd.redaction.heuristics import looks_like_identifier, mixed_case

#: A real, escaped (``\\n`` inside JSON) or backslash-continued line break, then blanks.
_BREAK = r"(?:\\\r?\n|\r?\n|\\n)[ \t]*"
#: The rest of a line that is one run only (a closing quote and comma allowed).
_LONE_END = r"(?=[\"'`]?[ \t]*[,;]?[ \t]*(?:\r?\n|\\n|\Z))"
#: After a line break: blanks, then the run that starts the next line.
_NEXT_RUN_RE = re.compile(r"[ \t]*(?P<b>[A-Za-z0-9+/_-]{6,400}={0,3})(?![A-Za-z0-9+/=_-])")
#: Prefixes of provider tokens: a piece starting with one is never a name, however wordy
#: its random body (Hugging Face tokens are letters only).
_TOKEN_PREFIXES = ("hf_", "api_org_", "gh", "github_pat_", "gl", "sk-", "sk_", "rk_", "xox",
                   "npm_", "pypi-", "AKIA", "ASIA", "AIza", "GOCSPX-", "whsec_", "xapp-",
                   "lsv2_", "gsk_", "shp", "dop_v1_", "dapi", "glsa_", "r8_", "sbp_")
_RUN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_-")
_CONTINUATION_RE = re.compile(_BREAK + r"(?P<run>[A-Za-z0-9+/_-]{6,400}={0,3})" + _LONE_END)
_HEX_RE = re.compile(r"^[0-9a-fA-F]+$")
_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-+/=")


def _random_piece(run: str) -> bool:
    """Letters and digits together, or both cases over 10+ characters: not a word."""
    has_digit = any(c.isdigit() for c in run)
    has_alpha = any(c.isalpha() for c in run)
    return (has_digit and has_alpha) or (len(run) >= 10 and mixed_case(run))


def _breaks(text: str) -> list[tuple[int, int]]:
    """``(start, length)`` of every line break: ``\\n``, ``\\r\\n``, an escaped ``\\n``
    (backslash and ``n``, inside JSON), and a backslash before a real one; in order."""
    out = []
    i = text.find("\n")
    while i >= 0:
        start = i - 1 if i > 0 and text[i - 1] == "\r" else i
        if start > 0 and text[start - 1] == "\\":
            start -= 1
        out.append((start, i + 1 - start))
        i = text.find("\n", i + 1)
    i = text.find("\\n")
    while i >= 0:
        out.append((i, 2))
        i = text.find("\\n", i + 2)
    out.sort()
    return out


def find_joins(text: str) -> list[tuple[int, int]]:
    """Line breaks inside split tokens, as ``(start, length)`` in ``text``, in order.

    A break counts when the line before ends in a run of 8+ token characters (standing
    alone as a word), the line after starts with a run of 6+ token characters, both look
    random (not made of words), and one has both cases (or both are hex): a constant
    and a snake_case name on consecutive lines are two words. A token in three pieces
    yields two breaks.
    """
    if "\n" not in text and "\\n" not in text:
        return []
    joins: list[tuple[int, int]] = []
    for br, length in _breaks(text):
        if br < 8 or text[br - 1] not in _RUN_CHARS:
            continue
        m = _NEXT_RUN_RE.match(text, br + length)
        if m is None:
            continue
        i = br
        while i > 0 and br - i <= 400 and text[i - 1] in _RUN_CHARS:
            i -= 1
        if br - i < 8:
            continue
        a, b = text[i:br], m.group("b")
        if (_random_piece(a) and _random_piece(b)
                and (a.startswith(_TOKEN_PREFIXES) or not looks_like_identifier(a + b))
                and not a.startswith("0x") and (mixed_case(a) or mixed_case(b)
                                                or _HEX_RE.match(a + b))):
            joins.append((br, m.start("b") - br))
    return joins


def join(text: str, joins: list[tuple[int, int]]) -> str:
    """``text`` without the breaks of ``joins``."""
    parts = []
    pos = 0
    for start, length in joins:
        parts.append(text[pos:start])
        pos = start + length
    parts.append(text[pos:])
    return "".join(parts)


def to_original(joins: list[tuple[int, int]], cuts: list[int], start: int,
                end: int) -> tuple[int, int]:
    """Map a span of the joined text back to ``text``.

    Args:
        joins: from :func:`find_joins`.
        cuts: the joined-text position of each join (:func:`cut_points`).
        start: span start in the joined text (at a cut it maps after the break).
        end: span end in the joined text (at a cut it maps before the break).
    """
    i = bisect.bisect_right(cuts, start)
    j = bisect.bisect_left(cuts, end)
    shift_start = sum(length for _, length in joins[:i])
    shift_end = sum(length for _, length in joins[:j])
    return start + shift_start, end + shift_end


def cut_points(joins: list[tuple[int, int]]) -> list[int]:
    """Where each break of ``joins`` sits in the joined text."""
    cuts = []
    removed = 0
    for start, length in joins:
        cuts.append(start - removed)
        removed += length
    return cuts


def continuation_end(text: str, end: int) -> int:
    """Where a secret ending at ``end`` really ends, when its value goes on next line.

    When ``text[end]`` starts a line break, the character before is a token character,
    and the next line is a lone random-looking run of token characters, the secret runs
    to the end of that run, over any number of lines.

    Returns:
        The new end (``end`` itself when the value does not continue).
    """
    while 0 < end < len(text) and text[end - 1] in _TOKEN_CHARS:
        m = _CONTINUATION_RE.match(text, end)
        if m is None or not _random_piece(m.group("run")):
            break
        end = m.end("run")
    return end
