"""What follows a trigger: a fact, an anaphor, a list head, or nothing.

The rules grammar (:mod:`opencode_memoryd.extract.grammar`) calls :func:`complement` with
the masked text after a trigger. The forms, tried in order:

- an **anaphor**: a pronoun (or none) and nothing that says more — "remember that.", "keep
  it in mind going forward", "remember that one, it bit us before";
- a **colon**: "remember: X", "remember this - X", "make a note of this: X", "one more thing
  to keep in mind for this repo: X"; with nothing after the colon, a **list head**;
- a **comma**: "remember, X"; **to**: "remember to X", "remember not to X";
- **that**: "remember that X", where X must read as a clause ("remember that bug from
  last week" does not);
- a bare **clause**: "remember we use pnpm", "keep in mind the tests need docker".

Questions ("remember what …", "remember when …"), "remember me" and "remember nothing"
are no complement.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from opencode_memoryd.extract import lexicon as lx

How = Literal["plain", "to", "not_to", "never_to"]


@dataclass(frozen=True, slots=True)
class Complement:
    """The reading of what follows a trigger.

    Attributes:
        kind: ``fact``, ``anaphor``, ``list`` or ``reject``.
        start: offset of the fact's text in the sentence (``fact`` only).
        how: ``to`` for "remember to X", ``not_to`` / ``never_to`` for "remember not/never
            to X", else ``plain``.
        check: the fact must read as a clause (:func:`opencode_memoryd.extract.clauses.is_clause`).
        comma: the fact follows a comma ("remember, X"): maybe a parenthetical.
        pro: the anaphor's pronoun ("that", "these", "both", ``""`` for none).
        bare: the fact follows the trigger with nothing between ("remember X"): in a
            question that is a recall question ("can you remember the staging URL?").
    """

    kind: Literal["fact", "anaphor", "list", "reject"]
    start: int = 0
    how: How = "plain"
    check: bool = False
    comma: bool = False
    pro: str = ""
    bare: bool = False


REJECT = Complement("reject")

_LEAD = re.compile(r"^(?:[\s,]*(?:though|also|please|too|again|always|just|for\s+(?:the\s+)?future"
                   r"(?:\s+(?:sessions?|work|reference))?|for\s+later|for\s+next\s+time"
                   r"|going\s+forward|from\s+now\s+on|in\s+(?:the\s+)?future)\b)*\s*",
                   re.IGNORECASE)
_COLON = re.compile(
    r"^\s*(?:(?:this|that|these|those|the\s+following(?:\s+\w+)?|both|it)\s*)?"
    r"(?:(?:please|pls|too|also|again|now)\s*)?"
    # a short qualifier before the colon: "for this repo:", "the rule we agreed on:"
    r"(?:(?:for|about|in|on|regarding|with|when|while|and|&|the|an?|my|our|from|during|before"
    r"|after|what)\s+(?:(?!\b(?:is|are|was|were|be|has|have|must|should|will|can)\b)[^:.\n])"
    r"{1,40}?(?<!\d)\s*(?=:(?!\d)))?"
    r"(?::|-+>?|=>|\u2014|\u2013|\u2192|\.{2,})\s*", re.IGNORECASE)
_COMMA = re.compile(r"^\s*[,)]\s*(?:that\s+)?", re.IGNORECASE)
_TO = re.compile(r"^\s*(?:(?P<neg>not|never)\s+)?to\s+", re.IGNORECASE)
_THAT = re.compile(r"^\s*that\s+", re.IGNORECASE)
_NO_FACT = re.compile(r"^\s*(?:what|which|who|whom|whose|where|when|why|how|if|whether|me|nothing"
                      r"|none|no|anything|any\s+of)\b", re.IGNORECASE)
_DO_THAT = re.compile(r"^(?:do|follow|keep)\s+(?:that|this|it|so)\b", re.IGNORECASE)
_NOUN_COMMA = re.compile(r"^\s*\w+\s*,")
_QUALIFIER = re.compile(r"^\s*(?:when|whenever|while|if|before|after|during|for|next\s+time)\b",
                        re.IGNORECASE)
_IS_THAT = re.compile(r"^\s*(?:is|are|was)\s*(?::|that\b)?\s*", re.IGNORECASE)
_THE_FACT_THAT = re.compile(r"^\s*the\s+fact\s+that\s+", re.IGNORECASE)
_PRONOUN = re.compile(r"^(?:this|that|it|these|those|them|both|all)\b", re.IGNORECASE)
_PRONOUN_IN = re.compile(r"\b(?:this|that|it|these|those|them|both)\b", re.IGNORECASE)


def _anaphor(r: str, trigger: str) -> Complement | None:
    x = lx.ANAPHORIC_REST.match(r) or lx.ANAPHOR_REMARK.match(r)
    if not x:
        return None
    pro = (x.group("pro") or "").lower()
    if x.re is lx.ANAPHOR_REMARK and pro.startswith("this"):
        return None  # "remember this, X": X is the fact
    own = _PRONOUN_IN.search(trigger)  # "note that down", "save this to memory"
    return Complement("anaphor", pro=pro or (own.group(0).lower() if own else ""))


def _how(x: re.Match[str]) -> How:
    neg = (x.group("neg") or "").lower()
    return "not_to" if neg == "not" else "never_to" if neg == "never" else "to"


def _colon(r: str, base: int) -> Complement | None:
    if x := _COLON.match(r):
        return Complement("fact", base + x.end()) if r[x.end():].strip() else Complement("list")
    return None


def _clause(r: str, base: int) -> Complement:
    if (c := _colon(r, base)) is not None:
        return c
    if x := _COMMA.match(r):
        if y := _TO.match(r[x.end():]):
            return Complement("fact", base + x.end() + y.end(), how=_how(y), comma=True)
        return Complement("fact", base + x.end(), comma=True)
    if x := _TO.match(r):
        if _DO_THAT.match(r[x.end():]):
            return Complement("anaphor", pro="that")  # "remember to do that in every branch"
        return Complement("fact", base + x.end(), how=_how(x))
    if _NO_FACT.match(r) or _NOUN_COMMA.match(r):
        return REJECT
    if x := _THAT.match(r):
        after = r[x.end():]
        if _QUALIFIER.match(after) and not re.search(r"[,;:]", after):
            return Complement("anaphor", pro="that")  # "remember that when debugging X"
        return Complement("fact", base + x.end(), check=True)
    return Complement("fact", base, check=True, bare=True)


def complement(kind: str, trigger: re.Match[str], r: str, base: int) -> Complement:
    """Read what follows a trigger of ``kind`` (:data:`opencode_memoryd.extract.lexicon.KINDS`).

    Args:
        kind: the trigger's kind.
        trigger: the trigger's match in the masked sentence.
        r: the masked text after the trigger, up to the next trigger's clause.
        base: the offset of ``r`` in the sentence.
    """
    lead = _LEAD.match(r)
    skip = lead.end() if lead else 0
    r, base = r[skip:], base + skip
    text = trigger.group(0).lower()
    if kind == "keepobj":
        obj = (trigger.group("obj") or "").strip().lower()
        if not _PRONOUN.match(obj):
            return REJECT  # "keep the sidebar in mind" holds no fact
        return _colon(r, base) or Complement("anaphor", pro=obj)
    if (ana := _anaphor(r, text)) is not None:
        return ana
    if kind in lx.NEEDS_PUNCT:
        x = _COLON.match(r) or _COMMA.match(r)
        if x and r[x.end():].strip():
            return Complement("fact", base + x.end())
        return Complement("list") if x and x.re is _COLON else REJECT
    if kind in ("frame", "forref") and (x := _IS_THAT.match(r)):
        return Complement("fact", base + x.end())
    if kind in ("note", "store") and _PRONOUN_IN.search(text):
        return _colon(r, base) or REJECT
    if kind == "note":
        return _note(r, base, text)
    return _clause(r, base)


def _note(r: str, base: int, text: str) -> Complement:
    """Read what follows a "note" trigger whose lower-cased words are ``text`` (``r`` and
    ``base`` as in :func:`complement`): "note down: X", "note the fact that X", "note X"."""
    if text.endswith("down"):
        if x := _COLON.match(r) or _THAT.match(r):
            return Complement("fact", base + x.end(), check=x.re is _THAT)
        return REJECT  # "note down the steps you took" is a task
    if x := _THE_FACT_THAT.match(r):
        return Complement("fact", base + x.end())
    return _clause(r, base)
