"""Secrets split across lines: a key pasted over two lines is one secret.

Two mechanisms, both used by :func:`~opencode_memoryd.redaction.scan.apply_rules`:

* :func:`find_joins` finds line breaks between two pieces of one token (a line that ends
  in a run of token characters, the next starting with one, both random-looking; a
  backslash before the break, as in a shell's line continuation, included) and the glue
  between string literals that make one token together (``"sk-proj-ab" + "cD…"``,
  ``'ghp_' 'xY…'``, :func:`concat_joins`); the rules then run on the text without
  them, so that a key whose first part is too short for its rule is still found whole.
  :func:`to_original` maps positions back.
* :func:`continuation_end` grows a found secret that ends at a line break over the next
  line when that line is a lone random-looking run (``password=x&y`` / ``Zq81…``).

Internal to :mod:`opencode_memoryd.redaction`; other code imports
:mod:`opencode_memoryd.redaction.engine`.
"""

from __future__ import annotations

import bisect
import itertools
import re

from opencode_memoryd.redaction.heuristics import looks_like_identifier, mixed_case

#: A real, escaped (``\\n`` inside JSON) or backslash-continued line break, then blanks.
_BREAK = r"(?:\\\r?\n|\r?\n|\\n)[ \t]*"
#: The rest of a line that is one run only (a closing quote and comma allowed).
_LONE_END = r"(?=[\"'`]?[ \t]*[,;]?[ \t]*(?:\r?\n|\\n|\Z))"
#: After a line break: blanks, then the run that starts the next line.
_NEXT_RUN_RE = re.compile(r"[ \t]*(?P<b>[A-Za-z0-9+/_-]{6,400}={0,3})(?![A-Za-z0-9+/=_-])")
#: After a shell's line continuation or a prefixed piece: the rest of the token.
_NEXT_LOOSE_RE = re.compile(r"[ \t]*(?P<b>[A-Za-z0-9+/=_.-]{4,400})")
#: After a prefixed piece: a line that is one run of token characters.
_NEXT_LONE_RE = re.compile(r"[ \t]*(?P<b>[A-Za-z0-9+/_.-]{4,400}={0,3})" + _LONE_END)
#: Prefixes of provider tokens: a piece starting with one is never a name, however wordy
#: its random body (Hugging Face tokens are letters only).
_TOKEN_PREFIXES = ("hf_", "api_org_", "gh", "github_pat_", "gl", "sk-", "sk_", "rk_", "xox",
                   "npm_", "pypi-", "AKIA", "ASIA", "AIza", "GOCSPX-", "whsec_", "xapp-",
                   "lsv2_", "gsk_", "shp", "dop_v1_", "dapi", "glsa_", "r8_", "sbp_")
#: The prefixes of three characters or more (``gh`` or ``gl`` begin ordinary words).
_LONG_PREFIXES = (*(p for p in _TOKEN_PREFIXES if len(p) >= 3), "ghp_", "gho_", "ghu_",
                  "ghs_", "ghr_", "glpat-", "glrt-", "gldt-", "glptt-", "glcbt-", "SG.", "key-")
_RUN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_-")
#: A word a shell's line continuation cuts may hold dots too (``SG.…``, JWTs).
_CONTINUED_CHARS = _RUN_CHARS | {"."}
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


def find_joins(text: str, *, literals: bool = True) -> list[tuple[int, int]]:
    """What to remove from ``text`` to make split tokens whole, as ``(start, length)``
    in order, never overlapping: line breaks inside tokens (:func:`break_joins`,
    :func:`yaml_joins`) and, with ``literals``, the glue between concatenated string
    literals (:func:`concat_joins`)."""
    breaks = break_joins(text)
    concats = (concat_joins(text) if literals else []) + yaml_joins(text)
    if not concats:
        return breaks
    if not breaks:
        return concats
    out: list[tuple[int, int]] = []
    for start, length in sorted(breaks + concats):
        if out and start < out[-1][0] + out[-1][1]:
            continue  # overlaps the one before
        out.append((start, length))
    return out


#: A string literal of token characters only, in double, single or back quotes.
_LITERAL_RE = re.compile(r"""(["'`])([A-Za-z0-9+/=_.:-]{1,400})\1""")
#: Between two literals of one concatenated string: blanks and line breaks (a backslash
#: before one allowed) around at most one operator: ``+`` (JavaScript, Python, Java, C#),
#: ``.`` (PHP, Perl), ``..`` (Lua), ``~`` (D), ``&`` (Visual Basic), ``||`` (SQL); none
#: for adjacent literals (Python, C, a shell word such as ``'ab'"cd"``).
_GLUE_RE = re.compile(r"(?:\s|\\\r?\n|\\n)*(?:\+|\.\.?|~|&|\|\|)?(?:\s|\\\r?\n|\\n)*")
#: Shortest concatenated value looked at, in characters.
_CONCAT_MIN = 16


def concat_joins(text: str) -> list[tuple[int, int]]:
    """The glue between string literals concatenated into one token, as ``(start,
    length)`` in ``text``, in order: from the closing quote of one literal to the opening
    quote of the next, both included.

    Literals count when they hold token characters only and nothing but blanks, line
    breaks and one concatenation operator (:data:`_GLUE_RE`) stands between them, and
    their contents together are a token: :data:`_CONCAT_MIN` characters or more, and
    a provider prefix or random-looking (not a name made of words). ``"hello" + "world"``
    and ``"src/" + "main.py"`` are left alone.
    """
    if sum(text.count(q) for q in "\"'`") < 4:
        return []
    literals = list(_LITERAL_RE.finditer(text))
    joins: list[tuple[int, int]] = []
    i = 0
    while i < len(literals):
        chain = [literals[i]]
        i += 1
        while i < len(literals) and _GLUE_RE.fullmatch(text, chain[-1].end(),
                                                       literals[i].start()):
            chain.append(literals[i])
            i += 1
        if len(chain) < 2:
            continue
        value = "".join(m.group(2) for m in chain)
        if len(value) < _CONCAT_MIN or not (value.startswith(_TOKEN_PREFIXES)
                                            or _random_piece(value)):
            continue
        for a, b in itertools.pairwise(chain):
            joins.append((a.end() - 1, b.start() + 1 - (a.end() - 1)))
    return joins


#: A YAML block scalar (``key: >-``, ``key: |``), then its lines, each one run.
_YAML_BLOCK_RE = re.compile(
    r"^[ \t]*[^\s:#][^\n:]*:[ \t]*[>|][-+]?[ \t]*\r?\n"
    r"(?P<body>(?:[ \t]+[A-Za-z0-9+/=_.-]{2,400}[ \t]*(?:\r?\n|\Z)){2,40})", re.MULTILINE)
_YAML_LINE_RE = re.compile(r"[ \t]+(?P<run>[A-Za-z0-9+/=_.-]+)[ \t]*(?:\r?\n|\Z)")


def yaml_joins(text: str) -> list[tuple[int, int]]:
    """The line breaks inside a YAML block scalar whose lines are one run each and
    together a random-looking token of 16+ characters (``api_key: >-`` then the key in
    two lines), as ``(start, length)`` in ``text``: from the end of one line's run to the
    start of the next."""
    if ">" not in text and "|" not in text:
        return []
    joins: list[tuple[int, int]] = []
    for block in _YAML_BLOCK_RE.finditer(text):
        runs = [m.span("run") for m in _YAML_LINE_RE.finditer(text, block.start("body"),
                                                              block.end("body"))]
        value = "".join(text[a:b] for a, b in runs)
        if len(runs) < 2 or len(value) < 16 or not _random_piece(value):
            continue
        joins += [(end, start - end) for (_, end), (start, _) in itertools.pairwise(runs)]
    return joins


def break_joins(text: str) -> list[tuple[int, int]]:
    """Line breaks inside split tokens, as ``(start, length)`` in ``text``, in order.

    A break counts when the line before ends in a run of 8+ token characters (standing
    alone as a word), the line after starts with a run of 6+ token characters, both look
    random (not made of words), and one has both cases (or both are hex): a constant
    and a snake_case name on consecutive lines are two words. A backslash before the
    break (a shell's line continuation) or a run that starts with a provider prefix
    (``AKIA…``) needs only 4 characters before the break, 16 in all, and the two runs
    random-looking together. A token in three pieces yields two breaks.
    """
    if "\n" not in text and "\\n" not in text:
        return []
    joins = [_join_at(text, br, length) for br, length in _breaks(text)]
    return [j for j in joins if j is not None]


def _join_at(text: str, br: int, length: int) -> tuple[int, int] | None:
    """The join of the break at ``br`` (``length`` characters) as ``(start, length)``, or
    None when it does not split a token (the rules of :func:`break_joins`)."""
    if br < 4 or text[br - 1] not in _CONTINUED_CHARS:
        return None
    i = br
    while i > 0 and br - i <= 400 and text[i - 1] in _CONTINUED_CHARS:
        i -= 1
    continued = text[br] == "\\" and text[br + 1] in "\r\n"
    if continued or text.startswith(_LONG_PREFIXES, i):
        # a shell's line continuation goes on with the same word; a provider prefix
        # says what the word is, whatever its case, when the next line is one run
        m = (_NEXT_LOOSE_RE if continued else _NEXT_LONE_RE).match(text, br + length)
        if (m is not None and br - i >= 4 and _random_piece(text[i:br] + m.group("b"))
                and (continued or len(m.group("b")) >= 6)):
            return br, m.start("b") - br
        if continued:
            return None
    return _word_join(text, br, length, i)


def _word_join(text: str, br: int, length: int, i: int) -> tuple[int, int] | None:
    """The join of a break at ``br`` between two random-looking runs of token characters
    (the run before starts at or after ``i``), or None."""
    while i < br and text[i] not in _RUN_CHARS:  # a word of token characters only, from here on
        i += 1
    i = max(i, text.rfind(".", i, br) + 1)
    m = _NEXT_RUN_RE.match(text, br + length)
    if m is None or br - i < 8:
        return None
    a, b = text[i:br], m.group("b")
    if (_random_piece(a) and _random_piece(b)
            and (a.startswith(_TOKEN_PREFIXES) or not looks_like_identifier(a + b))
            and not a.startswith("0x") and (mixed_case(a) or mixed_case(b)
                                            or _HEX_RE.match((a + b).replace("-", "")))):
        return br, m.start("b") - br
    return None


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


#: What a token of several joined pieces may go on with past a rule's match.
_JOINED_CHARS = _CONTINUED_CHARS | {"="}


def grown_end(joined: str, cuts: list[int], start: int, end: int) -> int:
    """The end of a finding ``[start, end)`` of the joined text, grown over the token
    characters after it when it reaches a join (``start < cut <= end``): the pieces were
    one token, so what follows the rule's match in the last piece is the token's too (a
    rule of fixed length would leave a tail).

    Args:
        joined: the text without the joins (:func:`join`).
        cuts: where each join sits in ``joined`` (:func:`cut_points`).
        start: the finding's start in ``joined``.
        end: its end in ``joined``.
    """
    i = bisect.bisect_right(cuts, start)
    if i >= len(cuts) or cuts[i] > end:
        return end
    n = len(joined)
    while end < n and joined[end] in _JOINED_CHARS:
        end += 1
    return end
