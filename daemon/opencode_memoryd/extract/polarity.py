"""Flips: a memory that shares the user's words but says the opposite.

Word grounding (:func:`~opencode_memoryd.extract.facts.unsupported`) cannot see that
"Always force-push to main." turns "Never force-push to main" around: every word but one is
there. :func:`flip_reason` compares what word sharing ignores, clause by clause:

* **polarity**: the parity of negations (``not``, ``n't``, ``never``, ``no``, ``avoid``,
  ``without`` …) and of the negative member of opposite pairs (``disable`` for
  ``enable``, ``deny`` for ``allow``, ``exclude`` for ``include`` …, :data:`_NEGATIVE`), so
  "don't enable X" and "disable X" agree and "enable X" and "disable X" do not;
* **modality**: a claim that makes a rule of what the user allowed (``always``/``must``/
  ``required`` against ``sometimes``/``may``/``can``/``optional``), or the reverse;
* **order**: "prefer A over B" (also ``rather than``, ``instead of``, ``than``, ``before``;
  ``after`` reversed) against the user's "B over A".

Each clause of the claim (split at ``,``, ``;``, ``:``, ``but``, ``while``) is compared
with each clause of the user text that shares a content word with it, and is a flip when
it disagrees with every one of them ("The password is [REDACTED] and must never be
printed" agrees with the "don't print it" of "the password is in …, don't print it"); a
clause that shares no word is left to the word grounding. Negation detection after NegEx
(W. W. Chapman et al., "A Simple Algorithm for Identifying Negated Findings and Diseases
in Discharge Summaries", J. Biomed. Inform. 34(5), 2001): a fixed list of cue words,
scoped to the clause.
"""

from __future__ import annotations

import re

from opencode_memoryd.extract.facts import FRAME_STEMS, content_words, stem

_NEGATORS = frozenset({
    "not", "no", "never", "nor", "neither", "without", "avoid", "cannot", "nothing", "none",
    "nobody", "nowhere", "stop", "refrain", "skip", "omit", "ignore", "forget",
    # contractions typed without the apostrophe
    "dont", "doesnt", "didnt", "cant", "wont", "shouldnt", "mustnt", "isnt", "arent",
    "wasnt", "werent", "couldnt", "wouldnt", "havent", "hasnt", "neednt",
})
#: The negative member of opposite pairs (the positive one counts as no negation).
_NEGATIVE = frozenset({
    "disable", "disabled", "disallow", "disallowed", "deny", "denied", "forbid",
    "forbidden", "prohibit", "prohibited", "exclude", "excluded", "reject", "rejected",
    "remove", "removed", "off", "false", "decrease", "lower", "hide", "hidden", "unlock",
    "optional", "private", "fail", "fails", "failing", "unset", "drop", "block", "blocked",
    "disabling", "excluding", "removing", "rejecting", "denying", "blocking", "hiding",
    "dropping", "decreasing", "lowering", "uninstall", "unpin", "unpinned", "deprecated",
})
_UNIVERSAL = frozenset({"always", "must", "required", "mandatory", "every", "never",
                        "shall", "need", "needs"})
_PERMISSIVE = frozenset({"sometimes", "may", "can", "could", "optional", "occasionally",
                         "allowed", "might", "optionally", "fine"})
_ORDER = re.compile(r"\b(over|rather than|instead of|than|before|after)\b", re.IGNORECASE)
_CLAUSE = re.compile(r"[,;:\n]|\s—\s|\s-\s|\b(?:but|while|whereas)\b|(?<=[.!?])\s", re.IGNORECASE)
_TOKEN = re.compile(r"[a-z]+(?:'[a-z]+)?")
_MARKERS = _NEGATORS | _NEGATIVE | _UNIVERSAL | _PERMISSIVE | {"prefer", "rather",
                                                              "instead", "over", "than",
                                                              "before", "after"}


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.casefold().replace("\u2019", "'"))


_NEGATIVE_STEMS = frozenset(stem(w) for w in _NEGATORS | _NEGATIVE)


def _negations(tokens: list[str]) -> int:
    return sum(t.endswith("n't") or t in _NEGATORS or t in _NEGATIVE
               or stem(t) in _NEGATIVE_STEMS for t in tokens)


def _modality(tokens: list[str]) -> str:
    """``universal``, ``permissive`` or ``""`` (none, or both)."""
    uni = any(t in _UNIVERSAL for t in tokens)
    per = any(t in _PERMISSIVE for t in tokens)
    return "universal" if uni and not per else "permissive" if per and not uni else ""


def _stems(text: str) -> set[str]:
    return {stem(w) for w in content_words(text)} - FRAME_STEMS - {stem(m) for m in _MARKERS}


def _order(text: str) -> tuple[set[str], set[str]] | None:
    """``(preferred or first, the other)`` stems of a clause with an order word."""
    m = _ORDER.search(text)
    if m is None:
        return None
    left, right = _stems(text[:m.start()]), _stems(text[m.end():])
    if m.group(1).lower() == "after":
        left, right = right, left
    return (left, right) if left and right else None


def _clauses(text: str) -> list[str]:
    return [c.strip() for c in _CLAUSE.split(text) if c and c.strip()]


def _clause_flip(claim: str, source: str) -> str | None:
    a, b = _tokens(claim), _tokens(source)
    if _negations(a) % 2 != _negations(b) % 2:
        return "negation"
    ma, mb = _modality(a), _modality(b)
    if ma and mb and ma != mb:
        return "modality"
    oa, ob = _order(claim), _order(source)
    if oa and ob:
        (pa, qa), (pb, qb) = oa, ob
        if (pa & qb - pb) and (qa & pb - qb):
            return "order"
    return None


def flip_reason(claim: str, source: str) -> str | None:
    """Why ``claim`` says the opposite of ``source`` (the user text it cites), or ``None``.

    Reasons: ``negation`` (one negates what the other asserts), ``modality`` (a rule
    against a permission), ``order`` (the preference or sequence reversed); see the
    module docstring. Clauses of ``claim`` with no content word in common with ``source``
    are not judged here.
    """
    sources = [(c, _stems(c)) for c in _clauses(source)]
    for part in _clauses(claim):
        words = _stems(part) or {stem(w) for w in content_words(part)}
        reasons = [_clause_flip(part, text) for text, have in sources if words & have]
        if reasons and all(reasons):
            return reasons[0]
    return None
