"""Rule machinery: the scanned text, the rule type, regex finders and span merging.

A :class:`Rule` names a kind, a priority and a *finder*: a function from the scanned text
to the ``(start, end)`` spans of secret values in it (or ``(start, end, kind)`` when one
rule reports several kinds). :func:`apply_rules` runs every rule whose cheap hints occur
in the text, drops spans that touch an existing placeholder, merges overlapping spans into
one, and replaces each merged span with ``[REDACTED:<kind>]``.

Internal to :mod:`opencode_memoryd.redaction`; other code imports
:mod:`opencode_memoryd.redaction.engine`.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from opencode_memoryd.redaction.hints import index_for
from opencode_memoryd.redaction.split import (
    continuation_end,
    cut_points,
    find_joins,
    grown_end,
    join,
    to_original,
)

#: An existing placeholder; spans touching one are never redacted again.
PLACEHOLDER_RE = re.compile(r"\[REDACTED:[a-z0-9_]+\]")

# Priorities: the lower number wins when spans of different kinds overlap.
P_BLOCK = 0  # whole private-key blocks
P_PROVIDER = 10  # provider token shapes
P_JWT = 15
P_URL = 20  # passwords in URLs
P_HEADER = 25  # Authorization headers and CLI credentials
P_ASSIGN = 30  # password=…, "token": "…"
P_ENTROPY = 40  # high-entropy strings after a key word
P_PROSE = 45  # passwords stated in prose
P_BARE = 50  # high-entropy strings without a key word


class ScanText:
    """The text being scanned, with its lower-cased twin.

    Case-insensitive rules are written in lower case and run case-sensitively on ``low``,
    which is several times faster than ``re.IGNORECASE`` on the original. That needs
    ``low`` to have the same indices as ``text``; ``str.lower`` keeps lengths except for
    ``"İ"`` (its lower case has two characters), which is folded to ``"i"`` first. Should
    lengths still differ (a future Unicode version), the rules fall back to
    ``re.IGNORECASE`` on ``text``. Spans always index ``text``.

    Attributes:
        text: the original text.
        low: ``text.lower()``.
        aligned: whether ``low`` has the same length (hence the same indices) as ``text``.
        covered: set by :func:`apply_rules` before the rules of priority :data:`P_BARE`
            run: the sorted, merged spans the other rules found.
    """

    __slots__ = ("_windows", "aligned", "covered", "low", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        # "İ" (U+0130) is the only character whose lower case is two characters long;
        # folding it to "i" first keeps the indices of ``low`` those of ``text``.
        self.low = (text.replace("\u0130", "i") if "\u0130" in text else text).lower()
        self.aligned = len(self.low) == len(text)
        self.covered: list[tuple[int, int]] = []
        self._windows: dict[tuple[tuple[str, ...], int, int], list[tuple[int, int]]] = {}

    def windows(self, needles: tuple[str, ...], before: int, after: int) -> list[tuple[int, int]]:
        """Merged ``(start, end)`` windows around each occurrence of a needle in ``low``.

        Each window runs from ``before`` characters before an occurrence to ``after``
        characters after its start (clipped to the text); overlapping windows merge.
        Rules that only match near a key word run their regex in these windows instead of
        over the whole text (``str.find`` is much faster than a regex alternation).
        Results are cached per ``(needles, before, after)``.
        """
        key = (needles, before, after)
        cached = self._windows.get(key)
        if cached is not None:
            return cached
        n = len(self.low)
        merged = _merged((max(0, i - before), min(n, i + after))
                         for i in self.positions(needles))
        self._windows[key] = merged
        return merged

    def positions(self, needles: Iterable[str]) -> Iterator[int]:
        """Every index of ``low`` where one of ``needles`` starts (unordered)."""
        low = self.low
        for needle in needles:
            i = low.find(needle)
            while i >= 0:
                yield i
                i = low.find(needle, i + 1)


class NoCase:
    """A case-insensitive pattern, written in lower case (see :class:`ScanText`).

    Args:
        pattern: the regex source, in lower case.
        flags: extra ``re`` flags.
    """

    __slots__ = ("ic", "lc")

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self.lc = re.compile(pattern, flags)
        self.ic = re.compile(pattern, flags | re.IGNORECASE)

    def finditer(self, src: ScanText) -> Iterator[re.Match[str]]:
        """Matches in ``src``; their spans index ``src.text``."""
        if src.aligned:
            return self.lc.finditer(src.low)
        return self.ic.finditer(src.text)


def group_text(src: ScanText, m: re.Match[str], group: int | str) -> str:
    """A group's text taken from the original (not lower-cased) text; ``""`` if unmatched."""
    start, end = m.span(group)
    return src.text[start:end] if start >= 0 else ""


#: One finding: ``(start, end)``, or ``(start, end, kind)`` to override the rule's kind.
Found = tuple[int, int] | tuple[int, int, str]
#: A finder: all findings of one rule in the scanned text.
Finder = Callable[[ScanText], Iterable[Found]]


@dataclass(frozen=True)
class Rule:
    """One redaction rule.

    Attributes:
        kind: the placeholder kind of its findings (unless a finding names its own).
        priority: one of the ``P_*`` values; the lower number wins on overlap.
        find: the finder.
        hints: cheap pre-checks; the rule runs only if one of them occurs in the text.
            Strings are searched in the lower-cased text when ``hints_nocase``, else in
            the original; compiled patterns are searched in the original. Empty: always
            run.
        hints_nocase: whether string hints are lower case and searched case-insensitively.
    """

    kind: str
    priority: int
    find: Finder
    hints: tuple[str | re.Pattern[str], ...] = ()
    hints_nocase: bool = False

    def may_match(self, src: ScanText) -> bool:
        """Whether one of the hints occurs in ``src`` (always true without hints)."""
        if not self.hints:
            return True
        haystack = src.low if self.hints_nocase else src.text
        for hint in self.hints:
            if isinstance(hint, str):
                if hint in haystack:
                    return True
            elif hint.search(src.text):
                return True
        return False


_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_ALNUM = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")

#: Eight or more of one character: a mask such as ghp_xxxxxxxx…, never a real token.
MASK_RUN_RE = re.compile(r"(.)\1{7,}")


def regex_finder(
    pattern: re.Pattern[str] | NoCase,
    *,
    group: int | str = 0,
    inner: re.Pattern[str] | None = None,
    left_boundary: bool | frozenset[str] = False,
    right_boundary: bool = False,
    extend: bool = False,
    check: Callable[[str], bool] | None = None,
    gate: tuple[str, ...] = (),
) -> Finder:
    """Build a finder from one regex.

    Args:
        pattern: the regex; a :class:`NoCase` pattern is matched case-insensitively.
        group: which group is the secret (0 = whole match).
        inner: narrow the match to the first match of this regex inside it.
        left_boundary: reject matches preceded by an ASCII letter or digit (or, given a
            set, by one of its characters), so that a shape inside a longer base64 or
            hex run does not count.
        right_boundary: reject matches followed by an ASCII letter or digit.
        extend: grow the end over token characters (``A-Za-z0-9_-``), so a prefix rule
            covers a longer real token entirely.
        check: the value must pass this predicate.
        gate: lower-case substrings; the regex then runs only on the lines that contain
            one (for slow regexes that never span lines; ignored for :class:`NoCase`).

    Returns:
        A finder yielding non-overlapping ``(start, end)`` spans in text order. Values
        containing a run of eight equal characters (masks) are skipped.
    """

    left_chars = left_boundary if isinstance(left_boundary, frozenset) else _ALNUM
    placement = _Placement(inner, left_chars if left_boundary else frozenset(),
                           right_boundary, extend, check)

    def find(src: ScanText) -> Iterator[tuple[int, int]]:
        text = src.text
        covered = 0  # end of the last span yielded (``extend`` can reach past the match)
        for m in _matches(pattern, gate, src):
            start, end = m.span(group)
            if start < covered or start == end:
                continue
            span = placement.place(text, start, end)
            if span is not None:
                covered = span[1]
                yield span

    return find


def _matches(pattern: re.Pattern[str] | NoCase, gate: tuple[str, ...],
             src: ScanText) -> Iterator[re.Match[str]]:
    """The matches of ``pattern`` in ``src``; with ``gate``, only on the lines holding one
    of its substrings (see :func:`regex_finder`)."""
    if isinstance(pattern, NoCase):
        return pattern.finditer(src)
    if not gate or not src.aligned:
        return pattern.finditer(src.text)
    return (
        m
        for start, end in lines_containing(src.low, gate)
        for m in pattern.finditer(src.text, start, end)
    )


@dataclass(frozen=True)
class _Placement:
    """Where a match of :func:`regex_finder` puts its secret, and whether it is refused:
    ``left_chars`` (empty: no left boundary) must not precede it, ``right_boundary``
    refuses an ASCII letter or digit after it, ``extend`` grows it over token
    characters, ``check`` must accept the value."""

    inner: re.Pattern[str] | None
    left_chars: frozenset[str]
    right_boundary: bool
    extend: bool
    check: Callable[[str], bool] | None

    def place(self, text: str, start: int, end: int) -> tuple[int, int] | None:
        """The secret's span for a match at ``start:end`` of ``text``, or None."""
        if self.inner is not None:
            im = self.inner.search(text, start, end)
            if im is None:
                return None
            start, end = im.span()
        if start > 0 and text[start - 1] in self.left_chars:
            return None
        if self.extend:
            n = len(text)
            while end < n and text[end] in _TOKEN_CHARS:
                end += 1
        if self.right_boundary and end < len(text) and text[end] in _ALNUM:
            return None
        value = text[start:end]
        if MASK_RUN_RE.search(value) or (self.check is not None and not self.check(value)):
            return None
        return start, end


def lines_containing(low: str, needles: tuple[str, ...]) -> list[tuple[int, int]]:
    """Sorted, merged ``(start, end)`` spans of the lines of ``low`` containing a needle.

    A span runs from the start of the line to its ``\\n`` (excluded) or the end of text.
    """
    spans: list[tuple[int, int]] = []
    for needle in needles:
        i = low.find(needle)
        while i >= 0:
            start = low.rfind("\n", 0, i) + 1
            end = low.find("\n", i)
            end = len(low) if end < 0 else end
            spans.append((start, end))
            i = low.find(needle, end)
    spans.sort()
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _merged(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted spans with overlapping ones merged."""
    out: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            if end > out[-1][1]:
                out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
    return out


def apply_rules(text: str, rules: Sequence[Rule]) -> tuple[str, dict[str, int]]:
    """Run ``rules`` over ``text`` and replace what they find with placeholders.

    The rules see the text with the line breaks inside split tokens removed
    (:func:`~opencode_memoryd.redaction.split.find_joins`); their spans are mapped back, so
    a span over such a break also removes the break. Spans that overlap an existing
    ``[REDACTED:…]`` placeholder are dropped. Overlapping spans merge into one span covering
    them all, named after the finding with the lowest priority number (then the longest),
    and a span ending where its value goes on next line grows over that line
    (:func:`~opencode_memoryd.redaction.split.continuation_end`).

    Args:
        text: a non-empty text.
        rules: the rules to run.

    Returns:
        ``(scrubbed text, {kind: replaced spans})``, keys sorted; ``(text, {})`` (the same
        string) when nothing was found.
    """
    scrubbed, counts, _values = apply_rules_found(text, rules)
    return scrubbed, counts


def apply_rules_found(text: str, rules: Sequence[Rule]
                      ) -> tuple[str, dict[str, int], list[tuple[str, str]]]:
    """As :func:`apply_rules`, and the values found: ``(scrubbed, counts, values)``.

    ``values`` holds ``(value, kind)`` for each finding that was replaced, in text order,
    each value as the rules saw it: a key split over lines or string literals
    (:func:`~opencode_memoryd.redaction.split.find_joins`) is given whole, without the
    break. A finding that merged with others is given on its own too. For the caller
    to recognise the same value elsewhere; never logged or stored as it is.
    """
    joins = find_joins(text)
    joined = join(text, joins) if joins else text
    found = _find_all(ScanText(joined), rules)
    if not found:
        return text, {}, []
    spans = found
    if joins:
        cuts = cut_points(joins)
        found = [(s, grown_end(joined, cuts, s, e), p, k) for s, e, p, k in found]
        spans = [(*to_original(joins, cuts, s, e), p, k) for s, e, p, k in found]
    kept = _without_placeholders(text, spans)
    if not kept:
        return text, {}, []
    keep = set(kept)
    # one kind per value: that of the finding that names its span (lowest priority)
    best: dict[str, tuple[int, int, str]] = {}
    for (s, e, p, k), mapped in zip(found, spans, strict=True):
        value = joined[s:e]
        if mapped in keep and (value not in best or (p, s) < best[value][:2]):
            best[value] = (p, s, k)
    scrubbed, counts = _replace(text, kept)
    return scrubbed, counts, sorted(((v, k) for v, (_p, _s, k) in best.items()),
                                    key=lambda x: best[x[0]][1])


def _find_all(src: ScanText, rules: Sequence[Rule]) -> list[tuple[int, int, int, str]]:
    """Every finding of every rule as ``(start, end, priority, kind)``."""
    spans: list[tuple[int, int, int, str]] = []
    for rule, may in zip(rules, index_for(rules).may_match(src), strict=True):
        if not may:
            continue
        if rule.priority >= P_BARE and not src.covered and spans:
            src.covered = _merged((s, e) for s, e, _, _ in spans)
        for found in rule.find(src):
            kind = found[2] if len(found) == 3 else rule.kind
            spans.append((found[0], found[1], rule.priority, kind))
    return spans


def _without_placeholders(text: str, spans: list[tuple[int, int, int, str]]
                          ) -> list[tuple[int, int, int, str]]:
    """``spans`` without those overlapping a placeholder of an earlier pass."""
    protected = [m.span() for m in PLACEHOLDER_RE.finditer(text)]
    if not protected:
        return spans
    starts = [s for s, _ in protected]

    def overlaps_placeholder(start: int, end: int) -> bool:
        i = bisect.bisect_right(starts, end - 1) - 1
        return i >= 0 and protected[i][1] > start

    return [s for s in spans if not overlaps_placeholder(s[0], s[1])]


def _replace(text: str, spans: list[tuple[int, int, int, str]]) -> tuple[str, dict[str, int]]:
    """Merge overlapping spans (continuations included) and replace them with placeholders."""
    spans.sort()
    out: list[str] = []
    counts: dict[str, int] = {}
    pos = 0
    i = 0
    while i < len(spans):
        start, end, best_priority, best_kind = spans[i]
        best_len = end - start
        i += 1
        while True:
            while i < len(spans) and spans[i][0] < end:
                s, e, p, k = spans[i]
                if (p, -(e - s)) < (best_priority, -best_len):
                    best_priority, best_kind, best_len = p, k, e - s
                end = max(end, e)
                i += 1
            more = continuation_end(text, end)
            if more == end:
                break
            end = more
        out.append(text[pos:start])
        out.append(f"[REDACTED:{best_kind}]")
        counts[best_kind] = counts.get(best_kind, 0) + 1
        pos = end
    out.append(text[pos:])
    return "".join(out), {k: counts[k] for k in sorted(counts)}
