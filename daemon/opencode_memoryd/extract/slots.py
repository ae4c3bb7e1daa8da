"""Value changes: "the staging URL is now staging2.acme.dev" replaces the old URL.

A correction need not name what it replaces: a fact that gives a *value slot* (a noun
phrase that holds one value: a URL, a host, a port, a branch, a version, a region, a
path, a command …) a new value in so many words ("is now", "changed to", "moved to", "is
… now", "the new … is") replaces the older fact that gives the same slot another value
("The staging URL is staging.acme.dev."). :func:`slot_change` reads the new fact,
:func:`slot_value` the old one; both are pure.

Precision first: the slot must end with one of :data:`VALUE_NOUNS` and be the same noun
phrase in both texts (determiners aside), the old fact must state it at its start ("<slot>
is <value>", "<slot>: <value>"), and the values must differ. "The API is now paginated"
names no value slot and replaces nothing.
"""

from __future__ import annotations

import re

from opencode_memoryd.extract.facts import fold

#: The head nouns of a slot that holds one value at a time.
VALUE_NOUNS = frozenset(re.findall(r"[a-z]+", """
url urls uri host hostname port domain address endpoint path version region zone timezone
branch directory dir folder name email channel command registry bucket database db server
prefix limit timeout default id account org organization location image tag team owner
mirror proxy cluster namespace runtime shell editor ide
"""))
_HEAD = "|".join(sorted(VALUE_NOUNS, key=len, reverse=True))
#: A slot: up to three words before a value noun ("the staging URL", "our default branch").
_SLOT = (r"(?P<slot>(?:(?:the|our|my|your)\s+)?(?:[\w.@/-]+\s+){0,3}?"
         rf"(?:{_HEAD}))")
#: A value: a code span, or one token and up to two capitalised ones ("VS Code").
_VALUE = r"(?P<v>`[^`\n]{1,80}`|[^\s,;()]+(?:\s+(?-i:[A-Z0-9])[^\s,;()]*){0,2})"
#: The new fact's ways of giving a slot a new value.
_CHANGES = tuple(re.compile(p, re.IGNORECASE) for p in (
    rf"^{_SLOT}\s+(?:is|are)\s+now\s+(?:set\s+to\s+|at\s+|on\s+|called\s+|named\s+)?"
    rf"{_VALUE}",
    rf"^{_SLOT}\s+(?:has\s+|have\s+)?(?:been\s+|was\s+|were\s+|got\s+)?(?:changed|moved"
    rf"|switched|updated|bumped|renamed|set)\s+to\s+{_VALUE}",
    rf"^{_SLOT}\s+(?:is|are)\s+{_VALUE}\s+now\b",
    rf"^{_SLOT}\s+(?:is|are)\s+{_VALUE}\s+(?:from\s+now\s+on|going\s+forward|these\s+days)\b",
    rf"^(?:(?:the|our|my)\s+)?new\s+{_SLOT}\s+(?:is|are)\s+{_VALUE}",
))
#: The old fact's statement of a slot's value.
_STATES = re.compile(rf"^{_SLOT}\s*(?:(?:is|are)\s+(?:now\s+)?"
                     r"(?:at\s+|on\s+|set\s+to\s+|called\s+|named\s+)?"
                     rf"|[:=]\s*){_VALUE}", re.IGNORECASE)
#: Words that are no value but a state or a quality ("is now the default", "is now
#: longer", "is private", "is now open", "is out"): a value is a name, a number, an
#: address, a path or a code span (:func:`names_a_thing`).
_NOT_VALUES = frozenset(re.findall(r"[a-z]+", """
a an the this that it its our my your their in on at to for of by with and or not no also
longer shorter bigger smaller faster slower higher lower more less different same
required optional deprecated configurable gone fixed broken ready done called named
set private public open closed locked empty full down up out off on frozen slow fast
stale old new busy free available unavailable unreachable reachable live dead missing
invalid valid wrong right fine ok okay good bad secure insecure shared read only
readonly writable enabled disabled default mandatory experimental stable unstable beta
alpha flaky red green blocked protected pinned hardcoded hard coded configured unknown
obsolete legacy final temporary permanent awesome great cool nice better worse best worst
easy hard simple fun weird odd strange possible impossible far close near enough fair sure
clear important necessary likely
"""))
#: Endings of words that describe rather than name ("pinned", "failing", "configurable").
_DESCRIBING = re.compile(r"(?:ed|ing|ly|able|ible|ful|less|ous|ive|al)$")
_DETERMINERS = frozenset({"the", "our", "my", "your", "new"})


def _slot_key(slot: str) -> str:
    words = [w for w in fold(slot).split() if w not in _DETERMINERS]
    return " ".join(words)


def _value_key(value: str) -> str:
    return fold(value).strip("`'\".!?:;").rstrip("/")


def names_a_thing(raw: str) -> bool:
    """Whether words name a thing, a value or a tool, rather than say how something is (see
    :data:`_NOT_VALUES`): a code span, a token holding a digit or one of ``. / : @ _ + # -``
    (a host, a version, a path, C#), a capitalised name, or a plain word that is no state
    or quality. The value of a slot, and the new term of "it's Y, not X"."""
    raw = raw.strip().rstrip(".!?:;")
    if not raw:
        return False
    if raw.startswith("`") or re.search(r"[\d./:@_+#-]", raw) or raw[:1].isupper():
        return True
    word = fold(raw).split()[0]
    return word not in _NOT_VALUES and not _DESCRIBING.search(word)


def _lead(text: str) -> str:
    return text.strip().lstrip("-*• ").replace("\u2019", "'")


def slot_change(text: str) -> tuple[str, str] | None:
    """The slot a fact gives a new value, and that value: ``"The staging URL is now
    staging2.acme.dev."`` -> ``("staging url", "staging2.acme.dev")``; ``None`` when the
    text changes no value slot (see the module doc). Both are folded (NFKC, casefold;
    determiners and the value's closing punctuation dropped)."""
    lead = _lead(text)
    for rx in _CHANGES:
        if (m := rx.match(lead)) and names_a_thing(m.group("v")):
            return _slot_key(m.group("slot")), _value_key(m.group("v"))
    return None


def slot_value(text: str, slot: str) -> str | None:
    """The value an older fact gives ``slot`` (a key of :func:`slot_change`) at its start
    (``"The staging URL is staging.acme.dev."`` -> ``"staging.acme.dev"``), else ``None``."""
    m = _STATES.match(_lead(text))
    if not m or _slot_key(m.group("slot")) != slot or not names_a_thing(m.group("v")):
        return None
    return _value_key(m.group("v"))


def replaces_value(new: str, old: str) -> bool:
    """Whether ``new`` gives a value slot a new value that ``old`` gives another one."""
    change = slot_change(new)
    if change is None:
        return False
    slot, value = change
    before = slot_value(old, slot)
    return before is not None and before != value
