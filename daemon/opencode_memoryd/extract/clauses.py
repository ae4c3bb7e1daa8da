"""Word-level tests of the rules grammar: is this a clause, a rule, a verb first?

Small heuristics on English word shapes, no parser: a complement that holds no subject
pronoun, auxiliary, negation or verb-like word is a noun phrase ("remember that bug from
last week"), not a fact; a clause after "from now on" is a rule when it opens with an
imperative or a rule word, and not when it describes a change ("the file is smaller").
"""

from __future__ import annotations

import re

from opencode_memoryd.extract import lexicon as lx

_WORDS = re.compile(r"[a-z][a-z']*|\S", re.IGNORECASE)
#: Words ending in -s that are no verbs.
_NOT_VERB_S = frozenset([
    "this", "was", "has", "is", "its", "his", "us", "does", "yes", "plus", "thus", "less",
    "class", "process", "access", "address", "status", "always", "sometimes", "perhaps",
    "unless", "across", "ours", "yours",
])
#: Base-form verbs that make a clause after a subject ("builds use make").
_VERB_HINT = frozenset([
    "use", "need", "run", "go", "live", "have", "want", "like", "work", "require", "depend",
    "take", "come", "belong", "expect", "support", "stay", "hold", "mean", "contain",
    "include", "break", "fail", "happen", "get", "build", "deploy", "own", "talk", "call",
])
#: Words that may follow a verb in -s ("gets wiped", "needs the build").
_AFTER_VERB = frozenset([
    "the", "a", "an", "on", "in", "at", "to", "about", "every", "all", "only", "with", "from",
    "for", "up", "out", "no", "by", "under", "over", "into", "through",
])
#: Subject pronouns that make a clause wherever they stand.
_PERSONS = frozenset(["i", "we", "you", "they", "he", "she"])
#: Words that open a relative clause inside a noun phrase.
_RELATIVE = frozenset(["where", "which", "who", "whom", "whose", "when", "that", "if"])
_FILLER_START = re.compile(
    r"^(?:\s*(?:plea+se+|pls|plz|also|and|but|so|oh+|ok(?:ay)?|hey|btw|by\s+the\s+way|just|now"
    r"|then|well|alright|yes|yeah|sure|thanks|actually|basically|though)\b[\s,:;!.]*)*",
    re.IGNORECASE)


def words(text: str) -> list[str]:
    """The lowercase words of ``text``, a clitic split off ("i'm" -> "i", "'m")."""
    out: list[str] = []
    for w in _WORDS.findall(text.lower()):
        head, _, clitic = w.partition("'")
        out += [head, "'" + clitic] if clitic and head else [w]
    return out


def is_clause(text: str) -> bool:
    """Whether ``text`` reads as a clause (it has a subject pronoun first, an auxiliary, a
    negation, or a word that looks like a verb), not a bare noun phrase: "remember that
    bug from last week" holds none, and neither does "the edge case where the list is
    empty" (its only verb is in a relative clause)."""
    ws = words(text)
    if not ws:
        return False
    if ws[0] in lx.SUBJECTS or any(
            w in _PERSONS and i + 1 < len(ws) and ws[i + 1][:1].isalpha()
            for i, w in enumerate(ws)):
        return True  # "we use pnpm", "in this repo we merge"
    for i, w in enumerate(ws):
        verb = (w in lx.AUX or (i > 0 and w in _VERB_HINT)
                or (len(w) > 3 and w.endswith(("s", "ed")) and w not in _NOT_VERB_S))
        if w in _RELATIVE and i > 0:
            return False
        if verb:
            return True
    return False


def first_word(text: str) -> str:
    """The first word of ``text``, lowercase (``""`` when there is none)."""
    x = re.search(r"[A-Za-z][\w'-]*", text)
    return x.group(0).lower() if x else ""


def strip_filler(text: str) -> str:
    """``text`` without the filler words it opens with ("ok so please …")."""
    x = _FILLER_START.match(text)
    return text[x.end():] if x else text


def is_rule(clause: str, *, strong: bool) -> bool:
    """Whether a clause after an adverbial trigger states a rule.

    ``strong`` adverbials ("from now on", "going forward") accept a clause opening with an
    imperative, a rule opener ("always", "don't", "you should", "I want …") or a subject of
    the team ("we", "all new endpoints"), and any other clause that is no comparison ("the
    file is smaller") and does not open with "it" / "there"; weak ones ("in the future",
    "next time") only an imperative or a rule opener. A promise ("I'll …") is no rule."""
    c = strip_filler(clause).strip()
    if not c or lx.PROMISE.match(c) or c.endswith("?"):
        return False
    if first_word(c) in lx.IMPERATIVE or lx.RULE_OPENER.match(c):
        return True
    if not strong:
        return False
    if lx.COMPARATIVE.search(c):
        return False  # "the tests should be faster now": a change described
    return bool(lx.TEAM_OPENER.match(c) or lx.MODAL.search(c)) or not lx.EXPLETIVE.match(c)


def verb_first(text: str) -> bool:
    """Whether ``text`` opens with a verb (it continues a clause cut by a parenthetical:
    "The API, remember, *is* versioned"), not with a subject of its own."""
    ws = [w.lower() for w in re.findall(r"[A-Za-z][\w'-]*|\d+", text)[:2]]
    if not ws:
        return False
    if ws[0] in lx.AUX:
        return True
    return (len(ws[0]) > 3 and ws[0].endswith("s") and ws[0] not in _NOT_VERB_S
            and len(ws) > 1 and (ws[1] in _AFTER_VERB or ws[1].isdigit()))


#: A first-person report of what was just done or is about to be ("I pushed the fix", "we
#: just merged it", "I'm heading out"): news, not a standing fact.
_REPORT = re.compile(r"^\W*(?:i|we)(?:'m|'ve|'ll|'d|\s+(?:am|are|have|has|had|will|just|already"
                     r"|was|were|did|\w+ed)\b)", re.IGNORECASE)
#: A state that passes ("the build is broken", "CI is red again", "my laptop is dying",
#: "Bob is on vacation"), or something going on right now ("the server is restarting"):
#: a progressive form, save the verbs that describe a standing setup ("is using Postgres",
#: "is running on port 8080") and a flow somewhere ("is logging to Datadog").
_PASSING_STATE = re.compile(
    r"\b(?:is|are|'s|'re|am|'m)\s+(?:currently\s+|still\s+|now\s+|really\s+|super\s+"
    r"|so\s+|very\s+|kinda\s+|a\s+bit\s+|totally\s+|completely\s+)?(?:broken|down|red"
    r"|failing|flaky|offline|fixed|back|green|done|merged|ready|here|out|over|slow|unreachable"
    r"|unavailable|unresponsive|closed|sick|ill|dying|dead|empty|busy|away|late|stuck|blocked"
    r"|frozen|hung|missing|pending|weird|wonky|laggy|on\s+(?:vacation|leave|holiday|pto|a\s+call"
    r"|fire|break|lunch)|out\s+of\s+(?:the\s+)?office|ooo|under\s+maintenance|in\s+progress"
    r"|(?!(?:us|runn|target|host|serv|point|depend|liv|stor|listen|build|support|ship|includ"
    r"|contain|expect|follow|requir|accept|return|hold|keep|handl|mount|wrapp|extend)ing\b"
    r"|(?:some|any|every|no)thing\b|string\b|spring\b)[a-z]+ing"
    r"(?!\s+(?:to|into|via|through)\b))\b", re.IGNORECASE)
#: News of something that just happened to a thing ("the meeting got moved", "the wifi
#: password changed", "staging went down", "the deploy was postponed").
_NEWS = re.compile(
    r"\b(?:got\s+(?:\w+ed|\w+en|stuck|lost|hit|shut)|(?:was|were)\s+(?:cancell?ed|postponed"
    r"|delayed|rescheduled|pushed|bumped|moved\s+to\s+(?:monday|tuesday|wednesday|thursday"
    r"|friday|tomorrow|next))|broke|crashed|died|went\s+(?:down|away|offline)"
    r"|came\s+back|blew\s+up)\b|\bchanged\W*$", re.IGNORECASE)
#: A wish, a need, a feeling or an opinion of the moment ("I need coffee", "I think it's
#: the cache", "I feel sick", "I have to leave at 5").
_MOMENT_SELF = re.compile(
    r"^\W*i\s+(?:really\s+|just\s+|kinda\s+|still\s+|also\s+|so\s+)?(?:wanna"
    r"|feel|felt|think|guess|hope|wonder|wish|believe|suspect|bet|reckon|gotta|have\s+to"
    r"|must|should|might|may|could|can't|cannot|forgot|miss|love"
    r"\s+(?:this|that|it)|hate\s+(?:this|that|it)|see|know|get\s+it|agree)\b", re.IGNORECASE)
#: A want or need of the moment, announced ("FYI: I need coffee"); "I want you to …" and
#: "I need all PRs reviewed" are rules.
_WANT_NOW = re.compile(
    r"^\W*i\s+(?:really\s+|just\s+|kinda\s+|still\s+|also\s+|so\s+)?(?:want|need|'d\s+like"
    r"|would\s+like)\b(?!\s+(?:you|all|every|each|always|never|any|no|our|the\s+agent)\b)",
    re.IGNORECASE)


def is_standing(text: str, *, strict: bool) -> bool:
    """Whether ``text``, announced ("Heads-up: X", "PSA: X", "worth knowing: X"), states
    a standing fact: a rule ("never force-push"), or a clause (:func:`is_clause`) that is
    no first-person report ("I pushed the fix") or wish, need, feeling or opinion of the
    moment ("I need coffee", "I think it's the cache") and, when ``strict`` (no "for
    later" / "for future sessions" says it is meant to last), neither tied to the moment
    ("today", "right now"), nor about "it" / "this" ("this bug took me days"), nor a
    passing state or something going on ("the build is broken", "Bob is on vacation",
    "the server is restarting"), nor news ("the meeting got moved", "the wifi password
    changed"). Not ``strict``, an imperative is one too ("Tip for
    next time: run make dev"); ``strict``, it is a suggestion for now ("Tip: restart
    it")."""
    c = strip_filler(text).strip()
    if strict and _WANT_NOW.match(c):
        return False  # "FYI: I need coffee"
    if lx.RULE_OPENER.match(c):
        return True  # "PSA: never force-push to main"
    if not strict and first_word(c) in lx.IMPERATIVE:
        return True  # "Pro tip for later: run make dev"
    if not is_clause(c) or _REPORT.match(c) or _MOMENT_SELF.match(c):
        return False
    return not strict or not (lx.MOMENT.search(c) or lx.EXPLETIVE.match(c)
                              or _PASSING_STATE.search(c) or _NEWS.search(c))
