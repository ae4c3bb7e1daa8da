"""The rules grammar: what one sentence asks to remember.

A sentence (:class:`opencode_memoryd.extract.segment.Unit`) is read in four steps:

1. **Scope.** Phrases that make a directive hold for all the user's projects ("for every
   repo I work on", "across all my projects", "globally" standing apart) are found and
   cut out (:func:`find_scope`).
2. **Triggers.** Every trigger phrase (:data:`opencode_memoryd.extract.lexicon.TRIGGER`)
   is found in the masked text, so none is found inside quotes or code. A trigger counts
   only where what stands before it in its clause is filler, a request frame ("I want
   you to", "can you") or a clause boundary: "I remember", "do you remember", "don't
   remember", "you don't have to remember" and "he said: remember" are no directives.
3. **Complement.** What follows the trigger decides its reading: a fact ("remember
   that X", "remember: X", "remember to X", "one more thing to keep in mind: X"), an
   anaphor ("remember that.", "keep it in mind going forward"), or a list head ("things to
   remember:"). An anaphor after a clause of the same sentence makes that clause the fact
   ("X, keep that in mind"); an anaphor standing alone points at another sentence, which
   :mod:`opencode_memoryd.extract.rules` resolves. An adverbial trigger ("from now on",
   "going forward", "next time") makes the rest of its clause the fact when it is a rule.
   An announcement ("heads-up:", "PSA:", "FYI for next time,", "worth knowing:") makes
   what follows its colon or comma the fact when that is a standing fact, not news of
   the moment (:func:`_idle_announcement`).
4. **Negation.** A sentence that takes something back ("forget that", "scratch that",
   "no need to remember that") is a retraction; one that holds only for now ("just for
   this session") yields nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from opencode_memoryd.extract import lexicon as lx
from opencode_memoryd.extract.clauses import (
    first_word,
    is_clause,
    is_rule,
    is_standing,
    strip_filler,
    verb_first,
)
from opencode_memoryd.extract.complement import Complement, How, complement
from opencode_memoryd.extract.segment import MASK, Unit
from opencode_memoryd.extract.temporal import temporary_reason
from opencode_memoryd.models import Scope


@dataclass(frozen=True, slots=True)
class Fact:
    """A fact as the sentence says it, before :func:`opencode_memoryd.extract.rules.finish`.

    Attributes:
        text: the words of the fact, trigger and scope phrase cut out.
        how: ``to`` for "remember to X" (an imperative), ``not_to`` / ``never_to`` for
            "remember not/never to X", else ``plain``.
    """

    text: str
    how: How = "plain"


@dataclass(slots=True)
class Reading:
    """What one sentence says (see the module doc).

    Attributes:
        facts: the facts the sentence itself holds.
        scope: ``user`` when a user-scope phrase was found in the sentence.
        anaphor: ``back`` (points at the previous sentence), ``either`` (the previous one,
            or the next when nothing precedes), or ``None``.
        plural: how many sentences the anaphor points at: 1, 2 for "both", more for
            "these" / "them" / "all of this".
        list_head: a trigger with nothing after its colon ("Things to remember:").
        retract: the sentence takes back the previous one ("forget that").
        scope_note: the sentence only says "this holds for all my projects".
        statement: the sentence may be what an anaphor points at.
        text: the sentence without its scope phrase (the fact an anaphor stores).
    """

    facts: list[Fact] = field(default_factory=list)
    scope: Scope = "project"
    anaphor: Literal["back", "either"] | None = None
    plural: int = 1
    list_head: bool = False
    retract: bool = False
    scope_note: bool = False
    statement: bool = False
    text: str = ""


#: Sentences longer than this (in characters) are not read: no directive is that long.
MAX_SENTENCE = 2000


def tail_start(m: str, end: int) -> int:
    """Where the run of filler, request frames and punctuation that ends at ``end`` in
    ``m`` starts (``end`` when there is none): what stands before a trigger and does not
    stop it from being one ("so please", "I want you to", ", and also")."""
    pos = end
    while True:
        j = pos
        while j > 0 and m[j - 1] in lx.TAIL_PUNCT:
            j -= 1
        x = lx.TAIL_PHRASE.search(m, max(0, j - 48), j)
        if x is None or x.end() != j or x.start() == j:
            return j
        if x.group(0).lower() == "remember" and m[j:j + 1] not in (",", ":"):
            return j  # "remember, from now on …": a filler only before its comma
        pos = x.start()


# --- aligned edits of a sentence and its masked copy --------------------------------------


def _apply(t: str, m: str, edits: list[tuple[int, int, str]]) -> tuple[str, str]:
    out_t: list[str] = []
    out_m: list[str] = []
    pos = 0
    for start, end, repl in sorted(edits):
        if start < pos:
            continue
        out_t += [t[pos:start], repl]
        out_m += [m[pos:start], repl]
        pos = end
    out_t.append(t[pos:])
    out_m.append(m[pos:])
    return "".join(out_t), "".join(out_m)


def _sub(rx: re.Pattern[str], t: str, m: str, repl: str) -> tuple[str, str]:
    return _apply(t, m, [(x.start(), x.end(), repl) for x in rx.finditer(m)])


_SPACE_BEFORE_PUNCT = re.compile(r"(?<![ \t])[ \t]+(?=[,;:.!?)](?:\s|$))")
_DOUBLE_PUNCT = re.compile(r"[,;](?=\s*[,;:.!?])")
_LEADING_PUNCT = re.compile(r"^[\s,;:.\-\u2014\u2013]+")
_SPACES = re.compile(r"(?<![ \t])[ \t]{2,}")


def _squeeze(t: str, m: str) -> tuple[str, str]:
    for rx, repl in ((_SPACE_BEFORE_PUNCT, ""), (_DOUBLE_PUNCT, ""), (_LEADING_PUNCT, ""),
                     (_SPACES, " ")):
        t, m = _sub(rx, t, m, repl)
    return t, m


# --- scope --------------------------------------------------------------------------------

_BOUNDED_BEFORE = re.compile(r"(?:^|[,;:(\-\u2014\u2013]|\b(?:remember|mind|forget|note"
                             r"|reference))\s*$",
                             re.IGNORECASE)
_COLON_AFTER = re.compile(r"\s*:\s*")
_BOUNDED_AFTER = re.compile(r"^\s*(?:$|[,;:.!?)\-\u2014\u2013])")


@dataclass(frozen=True, slots=True)
class ScopeFound:
    """The user-scope phrases of a sentence (:func:`find_scope`).

    Attributes:
        user: a phrase was found.
        start: one stood at the start of the sentence.
        end: one stood at its end.
        framed: one says so itself ("this is true of all my projects: …").
        text: the sentence without them.
        masked: the masked sentence without them.
        after_colon: the text after a colon that follows a phrase ("For all my projects:
            X", "I'd like this to apply to all my repos: X"), or ``""``.
    """

    user: bool
    start: bool
    end: bool
    framed: bool
    text: str
    masked: str
    after_colon: str = ""


def find_scope(t: str, m: str) -> ScopeFound:
    """Find and cut the user-scope phrases of sentence ``t`` (masked: ``m``)."""
    strong = list(lx.STRONG_SCOPE.finditer(m))
    framed = any(x.group("frame") for x in strong)
    spans = [x.span() for x in strong]
    for x in lx.WEAK_SCOPE.finditer(m):
        before, after = m[:x.start()], m[x.end():]
        if lx.WEAK_SCOPE_VETO_BEFORE.search(before) or lx.WEAK_SCOPE_VETO_AFTER.match(after):
            continue
        if lx.PROJECT_REF.search(before + " " + after):
            continue
        if _BOUNDED_BEFORE.search(before) or _BOUNDED_AFTER.match(after):
            spans.append(x.span())
    if not spans:
        return ScopeFound(False, False, False, False, t, m)
    start = any(tail_start(m, a) == 0 for a, _ in spans)
    end = any(not m[b:].strip(" .!?") for _, b in spans)
    colons = [c.end() for a, b in spans
              if (c := _COLON_AFTER.match(m, b)) and len(m[:a].split()) <= 8]
    after_colon = t[colons[0]:] if colons else ""
    t, m = _squeeze(*_apply(t, m, [(a, b, " ") for a, b in spans]))
    return ScopeFound(True, start, end, framed, t, m, after_colon)


# --- one sentence -------------------------------------------------------------------------

_REMEMBER_TAG = re.compile(r"((?:^|[,\u2014\u2013-])\s*(?:" + lx.REMEMBER + r")\s*)\?+(\s*)$",
                           re.IGNORECASE)
_TAG_QUESTION = re.compile(r"[,\s]+(?:ok(?:ay)?|right|alright|yeah|got\s+it|understood|yes)"
                           r"\s*\?+\s*$", re.IGNORECASE)
_QUESTION_END = re.compile(r"\?[\s\"')\]" + MASK + r"]*$")
_PRONOUN_ONLY = re.compile(r"^[\s,;:\u2014\u2013-]*(?:(?:this|that|it|these|those|them|both)"
                           r"[\s,;:\u2014\u2013-]*)?$", re.IGNORECASE)
#: A temporary sentence that speaks of the one before ("It's just for now.", "Only until
#: the release."): it takes that one back.
_POINTS_BACK = re.compile(r"^\W*(?:(?:but|and|though|oh)\W+)*(?:(?:it|this|that|these|those)\b"
                          r"|(?:just|only|at\s+least)\b|(?:\W*\S+){0,5}\W*$)", re.IGNORECASE)
#: Trigger kinds that may qualify the trigger before them ("remember that for later").
_QUALIFYING = frozenset({"future", "later", "forlater", "forref"})
_VERBS = frozenset({"mem", "keepmind", "keepobj", "dontforget"})


@dataclass(slots=True)
class _Cand:
    kind: str
    match: re.Match[str]
    tail: int  # where the filler before the trigger starts


def _candidates(m: str) -> list[_Cand]:
    found: list[_Cand] = []
    for x in lx.TRIGGER.finditer(m):
        kind = next(k for k in lx.KINDS if x.group(k) is not None)
        ts = tail_start(m, x.start())
        if m[:ts].strip() and (b := lx.BOUNDARY.search(m, ts, x.start())):
            ts = b.start()  # what stands before the first boundary belongs to the head
        found.append(_Cand(kind, x, ts))
    # a trigger inside the filler before a later one is part of that one's frame
    return [c for i, c in enumerate(found)
            if not any(d.tail <= c.match.start() for d in found[i + 1:])]


def read(unit: Unit) -> Reading:
    """Read one sentence (see the module doc). Barriers, and sentences longer than
    :data:`MAX_SENTENCE`, read as nothing."""
    out = Reading()
    if unit.kind != "sentence" or len(unit.masked) > MAX_SENTENCE:
        return out
    t, m = unit.text, unit.masked
    last = max(0, len(m) - 80)
    if x := _REMEMBER_TAG.search(m, last):  # "…, remember?" is no question
        t, m = _apply(t, m, [(x.end(1), x.start(2), "." if x.start() else " that.")])
    if x := _TAG_QUESTION.search(m, last):  # "…, ok?"
        t, m = _apply(t, m, [(x.start(), x.end(), ".")])
    scope = find_scope(t, m)
    user, t, m = scope.user, scope.text, scope.masked
    out.scope = "user" if user else "project"
    out.text = t
    question = bool(_QUESTION_END.search(m))
    out.retract = bool(lx.RETRACT.match(m.lower()))
    has_trigger = lx.TRIGGER.search(m) is not None
    if temporary_reason(m):  # "for now", "until the release": nothing lasting
        out.retract = out.retract or (not has_trigger and bool(_POINTS_BACK.match(m)))
        return out
    if user and tail_start(m, len(m)) == 0:
        out.scope_note = True
        return out
    _Sentence(out, t, m, question).run()
    bare = not out.facts and out.anaphor is None and not out.list_head
    if bare and user and not question and not out.retract and not has_trigger:
        fact = _scope_led(scope, t, m)
        if fact:
            out.facts.append(Fact(fact))  # "Across all my repos: never add headers."
            bare = False
    out.statement = bare and not question and not out.retract and not has_trigger
    return out


def _scope_led(scope: ScopeFound, t: str, m: str) -> str:
    """The fact of a sentence led by a scope phrase alone, or ``""``: after the phrase and
    a colon ("For all my projects: X"), after the phrase at the start ("For all my
    projects, run the tests first", "Across all my repos the line length is 100"), or
    with the phrase at the end when the sentence is a rule ("Never add headers in any of
    my repos"; "Update the license in all my repos" is a task)."""
    if lx.PROMISE.match(strip_filler(m)) or lx.MOMENT.search(m):
        return ""
    if scope.after_colon.strip():
        return scope.after_colon
    rest = strip_filler(m).strip()
    if scope.framed or ((scope.start or scope.end) and lx.RULE_MARKER.search(m)):
        return t
    if scope.start and (first_word(rest) in lx.IMPERATIVE or is_clause(rest)):
        return t
    return ""


class _Sentence:
    """The triggers of one sentence, read left to right."""

    def __init__(self, out: Reading, t: str, m: str, question: bool) -> None:
        self.out, self.t, self.m, self.question = out, t, m, question
        self.cands = _candidates(m)
        self.consumed = 0  # what the triggers read so far have used up

    def run(self) -> None:
        for i, c in enumerate(self.cands):
            if c.match.start() >= self.consumed:
                self._trigger(c, self._reach(i))

    def _reach(self, i: int) -> int:
        """Where the complement of trigger ``i`` ends: where the next trigger's clause
        starts, unless that trigger only qualifies this one ("remember that for later")."""
        end = self.cands[i].match.end()
        anaphoric = bool(lx.ANAPHORIC_REST.match(self.m[end:]))
        for d in self.cands[i + 1:]:
            if anaphoric and d.kind not in _VERBS:
                continue
            if d.kind in _QUALIFYING and _PRONOUN_ONLY.match(self.m[end:d.match.start()]):
                continue
            return d.tail
        return len(self.m)

    def _trigger(self, c: _Cand, reach: int) -> None:
        m, t = self.m, self.t
        start, end = c.match.span()
        head_m, tail_m, head_t = m[self.consumed:c.tail], m[c.tail:start], t[self.consumed:c.tail]
        has_head = bool(head_m.strip(" ,;:.!-\u2014\u2013\n"))
        bounded = not has_head or bool(lx.BOUNDARY.search(tail_m))
        if lx.REPORTED.search(head_m + tail_m) or lx.PROMISE.match(strip_filler(head_m + tail_m)):
            return  # "he said: remember …", "I'll remember …"
        if self.question and not lx.QUESTION_REQUEST.search(tail_m):
            return  # "do you remember …?", but "can you remember that …?" asks
        if c.kind in lx.ADVERBIAL:
            self._adverbial(c, reach, bounded=bounded)
            return
        if has_head and ((not bounded and c.kind != "forref") or c.kind in lx.NEEDS_PUNCT):
            return  # "I remember …": a trigger mid-clause
        comp = complement(c.kind, c.match, m[end:reach], end)
        if (comp.kind == "reject" or (self.question and comp.bare)
                or _idle_announcement(c, comp, m[comp.start:reach])):
            return  # "can you remember things between sessions?" asks what it can do
        self.consumed = reach
        self._take(comp, reach, head_m if has_head else "", head_t)

    def _take(self, comp: Complement, reach: int, head_m: str, head_t: str) -> None:
        """Add what a trigger's complement ``comp`` (up to ``reach``) states to the
        sentence's facts; ``head_m``: the words before the trigger ("" when none), with
        ``head_t`` their original text."""
        m, t, out = self.m, self.t, self.out
        has_head = bool(head_m)
        if comp.kind == "anaphor":
            if has_head:
                out.facts.append(Fact(head_t))  # "X, keep that in mind"
            elif not out.facts:
                out.anaphor = "either" if comp.pro in ("", "this", "this one") else "back"
                out.plural = _count(comp.pro)
            return
        if comp.kind == "list":
            out.list_head = True
            return
        fact_t, fact_m = t[comp.start:reach], m[comp.start:reach]
        conditional = has_head and lx.SUBORDINATE.match(head_m)
        if (comp.check and not is_clause(fact_t)) or (comp.how != "plain" and (
                lx.ONE_OFF.search(fact_m) or (lx.DEICTIC_OBJECT.match(fact_m)
                                              and not conditional))):
            return  # a noun phrase; a task: "remember to test this", "… and tell me what"
        if conditional:
            fact_t = head_t.rstrip(" ,;:") + ", " + fact_t.lstrip()  # "When you deploy, …"
        elif has_head and comp.comma and comp.how == "plain" and verb_first(fact_m):
            fact_t = head_t.rstrip(" ,;:(") + " " + fact_t.lstrip()  # "The API, remember, is …"
        out.facts.append(Fact(fact_t.rstrip(" ?") if self.question else fact_t, comp.how))

    def _adverbial(self, c: _Cand, reach: int, *, bounded: bool) -> None:
        """"from now on X", "X going forward", "next time you X, Y": the clause is the
        fact when it states a rule (:func:`opencode_memoryd.extract.clauses.is_rule`)."""
        t, m = self.t, self.m
        start, end = c.match.span()
        head_t = t[self.consumed:c.tail].strip()
        self.consumed = reach
        lead = re.match(r"^[\s,;:.\-\u2014\u2013]*", m[end:reach])
        rest_t = t[end + (lead.end() if lead else 0):reach]
        has_rest = bool(rest_t.strip(" .!")) and not lx.ANAPHORIC_REST.match(m[end:reach])
        if has_rest and head_t and not bounded:
            clause = head_t + t[end:reach]  # "We name hooks … from now on, no exceptions"
        elif has_rest and head_t and lx.SUBORDINATE.match(head_t):
            clause = head_t.rstrip(" ,;:") + ", " + rest_t
        else:
            clause = rest_t if has_rest else head_t
        if clause.strip() and is_rule(clause, strong=c.kind == "future"):
            self.out.facts.append(Fact(clause))
        elif (has_rest and "next" in c.match.group(0).lower()
              and (x := re.match(r"^[^,]{3,80},\s*(.+)$", rest_t, re.DOTALL))
              and is_rule(x.group(1), strong=False)):
            self.out.facts.append(Fact(t[start:reach]))  # "Next time you touch X, add Y"


def _idle_announcement(c: _Cand, comp: Complement, fact_m: str) -> bool:
    """Whether an announcement ("FYI", "heads-up", "worth knowing") holds no standing
    fact: an acknowledgement ("Good to know, thanks"), news of the moment ("FYI: I pushed
    the fix"; :func:`~opencode_memoryd.extract.clauses.is_standing`), or a bare list head
    with no "for later"."""
    if c.kind != "announce":
        return False
    later = c.match.group("ann_later") is not None
    if comp.kind != "fact":
        return comp.kind == "anaphor" or not later
    return not is_standing(fact_m, strict=not later)


def _count(pro: str) -> int:
    if pro.startswith("both"):
        return 2
    return 5 if lx.PLURAL.match(pro) else 1
