"""Time in what the user said: what holds only for now, and words that date a fact.

One temporariness gate (:func:`temporary_reason`) serves the rules grammar
(:mod:`opencode_memoryd.extract.grammar`) and the check of a model's proposals
(:mod:`opencode_memoryd.extract.reply`) alike: "for now skip the e2e tests, the suite is
flaky this week" is an instruction for the moment, never a lasting memory, whichever
extractor read it. Lasting phrases ("from now on", "starting today", "always") are no
temporary marker, even where they hold one's words ("today" in "starting today").

Relative time words ("last night", "this morning", "yesterday") are true only on the day
they were said: :func:`resolve_relative` turns them into the date of the message, or drops
them when that date is unknown.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import date, timedelta

from opencode_memoryd.extract.facts import content_words, stem
from opencode_memoryd.extract.segment import units


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE | re.VERBOSE)


#: Phrases that make a directive last: masked before the temporary markers are looked for.
LASTING = _rx(r"""\b(?:from\s+(?:now|today|this\s+(?:week|session|point))\s+on(?:wards?)?
    |starting\s+(?:now|today|this\s+week)|as\s+of\s+(?:now|today)|from\s+this\s+point\s+forward
    |going\s+forward|moving\s+forward|permanently|for\s+good|until\s+further\s+notice
    |(?:not|never)\s+(?:just|only)\s+(?:for\s+)?(?:now|today|this\s+\w+))\b""")

#: A day of the week, not an event of it ("Monday", not "Monday's standup").
_WEEKDAY = r"(?:mon|tues|wednes|thurs|fri|satur|sun)day(?!'s)"
#: A one-off event a directive waits for ("until the release", "until the sandbox is fixed",
#: "until Friday"); a recurring condition ("until CI is green") is none.
_UNTIL_EVENT = (r"(?:(?:the|our|my|this|that|its)\s+(?:[\w.-]+\s+){0,2}?(?:release|migration"
                r"|upgrade|rewrite|refactor|freeze|launch|demo|deadline|outage|incident|cutover"
                r"|hotfix|fix|sprint)\b"
                r"|[\w./-]+(?:\s+[\w./-]+){0,3}?\s+(?:is|are|gets?|has\s+been|have\s+been)\s+"
                r"(?:fixed|resolved|back|restored|repaired|upgraded|migrated|released|shipped)"
                r"|[\w./-]+(?:\s+[\w./-]+){0,3}?\s+(?:lands|ships)|tomorrow|next\s+week"
                r"|(?:we|i|you|they)\s+(?:upgrade|migrate|release|ship|launch|switch|move"
                r"|cut\s+over|finish|fix)\w*"
                rf"|{_WEEKDAY}|the\s+end\s+of\s+the\s+(?:day|week|sprint|month))")
#: A one-off undertaking that "for this …" ties a directive to ("for this spike"), when the
#: phrase ends there ("for this feature flag system" names a thing, not a span).
_UNDERTAKING = (r"(?:spike|refactor|feature|ticket|story|bug|fix|change|investigation|demo"
                r"|migration|hotfix|issue|prototype|poc)(?=\s*(?:[,.;:!?)]|$)|\s+(?:only|we|i"
                r"|you|let'?s|please|keep|use|skip|don'?t|do|just|and|but|so|it|the)\b)")
#: What makes a directive hold only for now ("for now", "this week", "until the release",
#: "just this session", "temporarily", "while X is broken").
TEMPORARY = _rx(r"""\b(?:
      (?:just|only|at\s+least)\s+(?:for\s+)?(?:now|today|tonight|this\s+(?:session|task
        |conversation|chat|experiment|once|time|run|branch|week|sprint|pr))
    | (?:just\s+|only\s+)?for\s+this\s+""" + _UNDERTAKING + r"""
    | for\s+(?:now|the\s+(?:moment|time\s+being|next\s+(?:few\s+|couple\s+(?:of\s+)?
        |two\s+|three\s+|\d+\s+)?(?:days?|hours?|weeks?))
        |today|tonight|the\s+day|a\s+(?:bit|while|few\s+days)|the\s+rest\s+of\s+(?:the|this|today)
        |this\s+(?:session|task|conversation|chat|experiment|week|sprint|release|pr|run|branch
        |month|quarter|weekend))
    | for\s+the\s+current\s+(?:session|task|conversation|chat|experiment|sprint)
    | (?:on\s+|in\s+|for\s+)?this\s+(?:branch|pr|task|session|ticket)\s+only
    | only\s+(?:on|in|for)\s+this\s+(?:branch|pr|task|session|ticket)
    | during\s+(?:the|this|our)\s+(?:[\w-]+\s+)?(?:freeze|migration|outage|incident|demo
        |cutover|rewrite|upgrade|launch|release\s+week|code\s+freeze)
    | (?:it'?s|this\s+is|that'?s|it\s+is|that\s+is)\s+(?:just\s+|only\s+)?(?:temporary
        |a\s+one-?off|one-?off|a\s+one-time\s+thing|a\s+throwaway|a\s+stopgap)
    | temporar(?:y|ily) | one-?off\s+workaround | throwaway\s+test | stopgap
    | this\s+(?:week|sprint|month|weekend|morning|afternoon|evening) | today | tonight
    | after\s+today | until\s+tomorrow
    | in\s+the\s+meantime | meanwhile | at\s+the\s+moment | right\s+now
    | (?:through|thru)\s+(?:""" + _WEEKDAY + r"""|the\s+weekend
        |next\s+week|the\s+end\s+of\s+the\s+(?:day|week|sprint|month))
    | (?:don'?t|do\s+not)\s+(?:(?!(?:whose|if|when|unless|until|that|which|where|while
        |before|after)\b)\w+\s+){1,6}?yet(?=\s*[.!,;]|\s*$)
    | hold\s+off(?![^.;]*\b(?:on\s+\w+days|on\s+weekends|every|always|whenever|when|if
        |unless|until|while|before|during|after)\b)
    | (?:until|till|til|unt?il)\s+""" + _UNTIL_EVENT + r"""
    | (?:while|as\s+long\s+as)\s+(?:the\s+|our\s+|my\s+|it\s+|they\s+)?[\w./-]+(?:\s+[\w./-]+){0,3}?
        \s+(?:is|are|'s|stays?|remains?)\s+(?:still\s+)?(?:broken|down|flaky|unstable|offline
        |disabled|being\s+\w+)
    )\b""")
#: Past-tense words: "today" in a sentence that says what happened dates a fact, it does
#: not limit a directive ("we moved to uv today").
_PAST = _rx(r"""\b(?:was|were|did|had|moved|switched|migrated|changed|decided|agreed|merged
    |released|shipped|upgraded|renamed|dropped|removed|added|replaced|learned|found|broke
    |broken|started|landed|fixed|deployed|set\s+up|went)\b""")
_DATING = _rx(r"\b(?:today|tonight|this\s+(?:week|month|weekend|morning|afternoon|evening))\b")
_CONDITION = _rx(r"(?:while|as\s+long\s+as|until|till|til|untill?|during)\b")
#: "until" a date: a prohibition that ends then ("don't touch billing until Monday").
_UNTIL_DATE = _rx(r"""(?:until|till|til|untill?)\s+(?:tomorrow|tonight|next\s+\w+
    |""" + _WEEKDAY + r"""|the\s+end\s+of\s+the\s+\w+|\d)""")
_PROHIBITION = _rx(r"\b(?:don'?t|do\s+not|never|no|must\s+not|mustn'?t|shouldn'?t|should\s+not"
                   r"|cannot|can'?t|may\s+not)\b(?!\s+(?:ever\s+)?forget)")


def temporary_reason(text: str) -> str | None:
    """Whether ``text`` (a sentence, a directive, or a model's proposal) holds only for
    now: the temporary phrase found (lowercase, spaces collapsed), else ``None``.

    Lasting phrases (:data:`LASTING`) are masked first, so "from now on" and "starting
    today" are never temporary; "until" / "while" after a prohibition is the condition of
    a standing rule ("never deploy while the build is broken", "don't merge until the
    release is out"), unless it waits for a date ("don't touch billing until Monday").
    "today", "tonight" and "this week" in a sentence that
    reports something done ("we moved to uv today") date it rather than limit it:
    :func:`resolve_relative` handles them there.
    """
    masked = LASTING.sub(lambda x: "#" * len(x.group(0)), text)
    for x in TEMPORARY.finditer(masked):
        if _DATING.fullmatch(x.group(0)) and _PAST.search(masked):
            continue
        if (_CONDITION.match(x.group(0)) and not _UNTIL_DATE.match(x.group(0))
                and _PROHIBITION.search(masked, 0, x.start())):
            continue  # "never deploy while the build is broken": a standing rule's condition
        return " ".join(x.group(0).lower().split())
    return None


def temporary_source(claim: str, cited: Iterable[str]) -> str | None:
    """The temporary phrase of the sentence a proposed memory ``claim`` is drawn from, or
    ``None``: among the sentences of the ``cited`` user texts, those sharing at least
    :data:`SOURCE_MIN_SHARED` stemmed content words with the claim (or all of the
    claim's, when it has fewer) are checked with :func:`temporary_reason`. A model that
    drops "for now" from "for now skip the e2e tests" proposes a lasting "Skip the e2e
    tests": this finds the words it dropped."""
    want = {stem(w) for w in content_words(claim)}
    if not want:
        return None
    need = min(SOURCE_MIN_SHARED, len(want))
    for text in cited:
        for unit in units(text):
            if unit.kind != "sentence":
                continue
            have = {stem(w) for w in content_words(unit.text)}
            if len(want & have) >= need and (reason := temporary_reason(unit.text)):
                return reason
    return None


#: Stemmed content words a cited sentence shares with a claim to count as its source.
SOURCE_MIN_SHARED = 2

#: Relative time words and the days back from the message date they mean.
_RELATIVE: dict[str, int] = {
    "last night": 1, "yesterday": 1, "this morning": 0, "this afternoon": 0,
    "this evening": 0, "earlier today": 0, "today": 0, "tonight": 0, "this week": 0,
}
_RELATIVE_RX = _rx(r"(?:\s*,)?\s*\b(?:(?P<prep>as\s+of|since|until)\s+)?(?P<w>" + "|".join(
    sorted((w.replace(" ", r"\s+") for w in _RELATIVE), key=len, reverse=True)) + r")\b(?:\s*,)?")


_SPACE_PUNCT = re.compile(r"\s+([,;:.!?])")


def resolve_relative(text: str, said_on: date | None) -> str:
    """``text`` with its relative time words made absolute: "last night" and "yesterday"
    become "on <the day before ``said_on``>", "this morning" / "today" "on <said_on>"
    (ISO 8601 dates), "this week" "in the week of <said_on>"; with no ``said_on`` they
    are dropped. A phrase with no date word is returned unchanged."""
    def repl(x: re.Match[str]) -> str:
        whole = x.group(0)
        if said_on is None:
            return ", " if whole.rstrip().endswith(",") else " "
        word = " ".join(x.group("w").lower().split())
        day = said_on - timedelta(days=_RELATIVE[word])
        when = f"in the week of {day}" if word == "this week" else f"on {day}"
        if x.group("prep"):
            when = f"{x.group('prep')} {day}"
        return (", " if whole.lstrip().startswith(",") else " ") + when + (
            ", " if whole.rstrip().endswith(",") else " ")

    out = _RELATIVE_RX.sub(repl, text)
    if out == text:
        return text
    out = _SPACE_PUNCT.sub(r"\1", re.sub(r"\s{2,}", " ", out)).strip().lstrip(", ")
    return out[:1].upper() + out[1:] if text[:1].isupper() else out


