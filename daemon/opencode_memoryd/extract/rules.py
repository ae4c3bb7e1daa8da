"""The rules extractor: explicit directives in human text, no LLM at all.

It reads only human text (``user`` transcript lines: the sub-agent prompts, assistant
text, tool output and compaction summaries are left out upstream, in
:mod:`opencode_memoryd.conversation.transcript`). A message is cut into sentences
(:mod:`opencode_memoryd.extract.segment`), each sentence is read by a small grammar
(:mod:`opencode_memoryd.extract.grammar`), and the readings of one message are put
together here:

- a trigger anywhere in a sentence: "remember that X", "X, keep that in mind", "make a
  note: X", "one more thing to keep in mind: X", "from now on always X", "X going
  forward", "for future reference, X";
- an anaphoric trigger on its own ("Please remember that.") stores the sentence it points
  at: the previous sentence of the same message (all items of the list before it for
  "these" / "them", two sentences for "both"), or the next one when nothing precedes a
  "remember this"; a list head ("Things to remember:") stores the items that follow. A
  trigger with nothing to point at is never stored alone;
- a retraction ("forget that", "scratch that", "no need to remember that") drops what the
  previous sentence stored; negated, reported, quoted, temporary and questioned directives
  and first-person promises store nothing;
- scope is ``user`` when the sentence (or a sentence of its own right after it: "This
  applies to all my projects.") says the fact holds for all the user's projects, or when
  the fact is about the person ("I prefer …", "my name is …") and names no project;
- the stored text (:func:`finish`) is the fact without trigger words, filler and scope
  phrase. "this repo / service / project …" in a project memory becomes "the <project>
  repo / service / project …" (the project folder's name), so the memory still says what
  it is about when it is read in another session.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from opencode_memoryd.extract import grammar, segment
from opencode_memoryd.extract import lexicon as lx
from opencode_memoryd.extract.clauses import is_clause
from opencode_memoryd.extract.corrections import correction_sentences
from opencode_memoryd.extract.facts import content_words, identifiers
from opencode_memoryd.models import (
    ExtractionResult,
    MemoryCandidate,
    MemoryType,
    Scope,
    TranscriptLine,
    normalize_text,
)

#: Words that carry no fact on their own: a memory made only of these (and stopwords) is junk.
TRIGGER_WORDS = frozenset([
    "remember", "remembering", "memorize", "memorise", "keep", "mind", "forget", "note",
    "notes", "noted", "please", "pls", "plz", "thanks", "thank", "also", "btw", "future",
    "reference", "later", "ok", "okay", "important", "something", "thing", "worth", "memory",
    "save", "store", "bear", "make", "mental", "next", "time", "going", "forward", "one",
    "yes", "yeah", "sure", "got",
])


@dataclass(slots=True)
class _Out:
    origin: int
    fact: grammar.Fact
    scope: Scope
    sources: set[int] = field(default_factory=set)


def _antecedents(units: list[segment.Unit], readings: list[grammar.Reading], i: int,
                 count: int, step: int) -> list[int]:
    """The sentences an anaphor at ``i`` points at, looking back (``step`` -1) or ahead
    (+1): up to ``count`` contiguous statements, or the whole run of list items."""

    def usable(k: int) -> bool:
        return 0 <= k < len(units) and units[k].kind == "sentence" and readings[k].statement

    j = i + step
    if not usable(j):
        return []
    in_list = units[j].item
    if in_list and (step > 0 or count > 1):
        count = len(units)
    run = [j]
    k = j + step
    while len(run) < count and usable(k) and units[k].item == in_list:
        run.append(k)
        k += step
    return sorted(run)


#: A message cut into sentences (:func:`opencode_memoryd.extract.segment.units`) and each
#: sentence's reading (:func:`opencode_memoryd.extract.grammar.read`).
Read = tuple[list[segment.Unit], list[grammar.Reading]]


def read(text: str) -> Read:
    """One human message, cut into sentences and read once for :func:`directives` and
    :func:`corrections` alike."""
    units = segment.units(text)
    return units, [grammar.read(u) for u in units]


def _read_message(units: list[segment.Unit], readings: list[grammar.Reading]) -> list[_Out]:
    out: list[_Out] = []
    for i, r in enumerate(readings):
        if r.retract:
            out = [o for o in out if o.origin != i - 1 and i - 1 not in o.sources]
        if r.scope_note:
            for o in out:
                if o.origin == i - 1 or i - 1 in o.sources:
                    o.scope = "user"
        out += [_Out(i, f, r.scope) for f in r.facts]
        if r.anaphor is not None:
            _resolve_anaphor(units, readings, i, out)
        if r.list_head:
            for j in _antecedents(units, readings, i, len(units), +1):
                _point(out, i, j, readings)
    return out


def _resolve_anaphor(units: list[segment.Unit], readings: list[grammar.Reading], i: int,
                     out: list[_Out]) -> None:
    r = readings[i]
    back = _antecedents(units, readings, i, r.plural, -1)
    if not back and i > 0 and readings[i - 1].facts:  # "Remember that X. Keep that in mind."
        if r.scope == "user":
            for o in out:
                if o.origin == i - 1:
                    o.scope = "user"
        return
    if not back and r.anaphor == "either":
        back = _antecedents(units, readings, i, r.plural, +1)
    for j in back:
        _point(out, i, j, readings)


_PREAMBLE = re.compile(
    r"^\s*[^:]{0,50}?\b(?:tell(?:ing)?\s+you|told\s+you|i\s+said|repeat|for\s+the\s+last\s+time"
    r"|once\s+again|again|before\s+you\s+start|quick\s+(?:note|reminder)|fyi|context|background"
    r"|heads\s+up|reminder|ps|nb|note|important|the\s+cause|the\s+reason|the\s+problem"
    r"|the\s+issue)\b[^:]{0,30}:\s+(?=\S)", re.IGNORECASE)


def _point(out: list[_Out], i: int, j: int, readings: list[grammar.Reading]) -> None:
    scope: Scope = "user" if "user" in (readings[i].scope, readings[j].scope) else "project"
    text = readings[j].text
    if (x := _PREAMBLE.match(text)) and is_clause(text[x.end():]) and "//" not in x.group(0):
        text = text[x.end():]  # "Before you start: our rule is …" -> "our rule is …"
    out.append(_Out(i, grammar.Fact(text), scope, {j}))


# --- the stored text ----------------------------------------------------------------------

_LEAD_FILLER = re.compile(
    r"^(?:\s*(?:plea+se+|pls|plz|also|and|but|so|oh+|ok(?:ay)?|hey|hi|btw|by\s+the\s+way|just"
    r"|then|well|alright|yes|yeah|sure|thanks|thank\s+you|actually|basically|though|fyi|anyway"
    r"|important|note|personally|here'?s\s+the\s+thing)\b[\s,:;!.\-\u2014\u2013]*)+",
    re.IGNORECASE)
#: Conversational openers: true when said, noise in a memory ("Before we dive in: …",
#: "First things first, …", "As I said, …"); cut where a comma, colon or dash follows.
_OPENER = re.compile(
    r"^\s*(?:before\s+(?:we|you|i)\s+(?:(?:dive|jump|get)\s+(?:in(?:to\s+\w+)?|started|going)"
    r"|start|begin|continue|proceed|go\s+on|kick\s+off)(?:\s+(?:anything|with\s+(?:this|that|it)"
    r"|today))?|first\s+things\s+first|first\s+of\s+all|as\s+(?:i\s+(?:said|mentioned)|mentioned"
    r"|discussed)(?:\s+(?:before|earlier))?|like\s+i\s+said|(?:just\s+)?to\s+be\s+clear"
    r"|for\s+context|real\s+quick|quick\s+thing|one\s+(?:more|last)\s+thing|oh\s+and"
    r"|while\s+i\s+remember|while\s+i\s+think\s+of\s+it|now\s+that\s+i\s+think\s+of\s+it)"
    r"\s*[,:;\u2014\u2013-]\s*", re.IGNORECASE)
#: An invitation to ask at the end of a fact ("…, ask me if you're unsure"): about the
#: conversation, not the fact.
_ASK_ME = re.compile(
    r"(?:[\s,;:\u2014\u2013-]+(?:and\s+|so\s+|but\s+)?(?:just\s+|please\s+)?(?:ask|ping|check\s+with)"
    r"\s+me\s+(?:if|when|whenever)\s+(?:you(?:'re|\s+are)\s+(?:ever\s+)?(?:unsure|not\s+sure|stuck"
    r"|in\s+doubt)|in\s+doubt|unsure|not\s+sure|anything\s+(?:is\s+)?unclear|(?:you\s+have|there"
    r"\s+are)\s+(?:any\s+)?questions)|[\s,;:\u2014\u2013-]+(?:and\s+)?(?:if|when)\s+(?:in\s+doubt"
    r"|unsure|you(?:'re|\s+are)\s+(?:unsure|not\s+sure)),?\s+(?:just\s+)?ask\s+me)[\s.!]*$",
    re.IGNORECASE)
#: A complementizer left at the start once a parenthetical between the trigger and its
#: clause was cut ("remember — for every project — that I use …"): followed by a subject or
#: a determiner it is never the demonstrative ("That file is generated").
_COMPLEMENTIZER = re.compile(r"^that\s+(?=(?:i|we|you|they|he|she|our|my|your|their|the|all"
                             r"|every|each|no)\b)", re.IGNORECASE)
_SYMBOLS_END = re.compile(r"[\s\u2600-\u27bf\U0001f300-\U0001faff\ufe0f]+$")
_TRAIL_FILLER = re.compile(
    r"(?:[\s,;:]+(?:plea+se+|pls|plz|thanks|thank\s+you|thx|ty|ok(?:ay)?|alright|too|as\s+well))*"
    r"[\s,;:(\-\u2014\u2013]*$", re.IGNORECASE)
# a run of one mark ("!!", ". .", ",,"), never the dots of an identifier: a path's "./..."
# or "../", a range's "v1...v2" (a run after "/" or "." or before a word character stays)
_REPEATED_PUNCT = re.compile(r"(?<![/.])([,;:!?.])(?:\s*\1)+(?![\w/.])")
_SPACE_PUNCT = re.compile(r"\s+([,;:!?.)])(?=\s|$)")
_END = re.compile(r"[.!]+$")
#: A text that ends with an identifier's dots ("go test ./...", "cd ..") keeps them and
#: gets no full stop.
_PATH_DOTS_END = re.compile(r"(?:^|[\s/])\.{2,}$")
_DEMONSTRATIVE = re.compile(
    r"\b(this|the\s+current)\s+(repo|repository|project|codebase|code\s+base|service|app"
    r"|application|monorepo|package|library|api|backend|frontend|site|website|server|cli|tool"
    r"|workspace)\b", re.IGNORECASE)
_LONE_I = re.compile(r"(?<![^\s(\"])i(?=(?:'(?:m|ve|d|ll))?(?:[\s,.;:!?)]|$))")
_IDENTIFIER = re.compile(r"^[`'\".~/]|^\S*[\d_/\\.@#:]\S|^[a-z]+[A-Z]|^[b-df-hj-np-tv-xz]+\b")


def _unwrap(s: str) -> str:
    for q in ('"', "'", "`"):
        core = s.rstrip(".!")
        if len(core) > 2 and core[0] == q and core[-1] == q and q not in core[1:-1]:
            return core[1:-1] + s[len(core):]
    return s


def finish(fact: grammar.Fact, *, project: str | None, scope: Scope) -> str | None:
    """The memory text of a fact, or ``None`` when nothing durable is left.

    Filler before and after the fact is dropped (conversational openers such as "Before
    we dive in:" and "First things first," too, and a closing "ask me if you're unsure"),
    "remember to X" becomes "X" and
    "remember not to X" "Do not X"; a fact wholly in quotes loses them; "this repo /
    service …" becomes "the <project> repo / service …" in a project-scope memory when
    ``project`` (the project folder's name) is known; the first letter is capitalised
    unless the fact opens with an identifier; it ends with a full stop. Refused (``None``):
    a question, a first-person promise, and junk (fewer than two content words besides
    trigger words: "That.").
    """
    s = " ".join(fact.text.split())
    while (bare := _OPENER.sub("", _LEAD_FILLER.sub("", s))) != s:
        s = bare
    s = _COMPLEMENTIZER.sub("", _ASK_ME.sub("", s))
    cut = max(0, len(s) - 120)
    s = (s[:cut] + _TRAIL_FILLER.sub("", s[cut:])).strip()
    s = _unwrap(_SYMBOLS_END.sub("", s)).strip()
    if s.endswith(")") and s.count(")") > s.count("("):
        s = s[:-1].rstrip()  # "(for future reference: X)"
    if not s or s.endswith("?") or lx.PROMISE.match(s):
        return None
    if fact.how == "not_to":
        s = "Do not " + s
    elif fact.how == "never_to":
        s = "Never " + s
    s = _REPEATED_PUNCT.sub(r"\1", _SPACE_PUNCT.sub(r"\1", s))
    s = s.replace("()", "").replace("( ", "(").strip()
    if project and scope == "project":
        s = _DEMONSTRATIVE.sub(lambda x: ("The" if x.group(1)[0] == "T" else "the")
                               + f" {project} {x.group(2)}", s)
    s = _LONE_I.sub("I", s)
    if s[:1].islower() and not _IDENTIFIER.match(s):
        s = s[0].upper() + s[1:]
    if not _PATH_DOTS_END.search(s):
        s = _END.sub("", s).rstrip(" ,;:") + "."
    return None if is_junk(s) else s


def is_junk(text: str) -> bool:
    """Whether a memory text says nothing: fewer than two content words once trigger and
    filler words (:data:`TRIGGER_WORDS`) are left out ("That.", "Keep it in mind.")."""
    return len((content_words(text) - TRIGGER_WORDS) | identifiers(text)) < 2


# --- scope and type -----------------------------------------------------------------------

_ABOUT_USER = re.compile(
    r"^(?!i'?ll\b|i\s+will\b|i\s+(?:want|need|'?d\s+like|would\s+like|expect)\s+you\b)"
    r"(?:i|i'm|i\s+am|i've|i'd|my\s+(?:name|timezone|time\s+zone|e-?mail|handle|username"
    r"|user\s+name|github|gitlab|role|title|job|pronouns|native|first|mother|preferred"
    r"|preferences?|keyboard|editor|ide|os|operating|shell|terminal|machine|laptop|computer"
    r"|setup|background|location|working|work\s+hours|company|employer|languages?|stack))\b",
    re.IGNORECASE)
_URL = re.compile(r"https?://\S+|\bwww\.\S+|[\w.+-]+@[\w-]+\.[\w.-]+")
_REFERENCE = re.compile(r"\b(?:dashboards?|runbooks?|wiki|handbook|playbook|channel|board)\b",
                        re.IGNORECASE)
_FEEDBACK = re.compile(r"\b(?:always|never|don'?t|do\s+not|avoid|prefer|instead\s+of|rather\s+than"
                       r"|must\s+not|you\s+should|i\s+(?:want|expect|need)\s+you)\b", re.IGNORECASE)


def about_user(text: str, project: str | None) -> bool:
    """Whether a fact is about the person ("I prefer …", "my timezone is …") and names no
    project ("this repo", "here", the project's name)."""
    if not _ABOUT_USER.match(text) or lx.PROJECT_REF.search(text):
        return False
    return not (project and project.lower() in text.lower())


def classify(text: str, scope: Scope) -> MemoryType:
    """The memory type of a fact: ``reference`` (a URL, an address, a dashboard or
    runbook), ``feedback`` (how to work: an imperative, always/never/prefer/avoid …),
    ``user`` (about the person, or user scope), else ``project``."""
    if _URL.search(text) or _REFERENCE.search(text):
        return "reference"
    words = text.split(maxsplit=1)
    imperative = (len(words) == 2 and words[0].lower() in lx.IMPERATIVE
                  and not is_clause(words[1]))
    if imperative or _FEEDBACK.search(text):
        return "feedback"
    if scope == "user" or _ABOUT_USER.match(text):
        return "user"
    return "project"


def directives(text: str | Read, *, project: str | None = None) -> list[tuple[str, Scope]]:
    """Find the explicit directives in one human message.

    Args:
        text: the message as the user wrote it.
        project: the project folder's name, used for "this repo / service …".

    Returns:
        ``(fact, scope)`` for each directive, in message order, each fact once: the
        memory text (:func:`finish`) and ``user`` or ``project`` scope.
    """
    out: list[tuple[str, Scope]] = []
    seen: set[str] = set()
    for o in _read_message(*(read(text) if isinstance(text, str) else text)):
        fact = finish(o.fact, project=project, scope=o.scope)
        if fact is None:
            continue
        scope: Scope = "user" if o.scope == "user" or about_user(fact, project) else "project"
        if scope == "user" and o.scope == "project":
            fact = finish(o.fact, project=None, scope="user") or fact
        key = normalize_text(fact)
        if key not in seen:
            seen.add(key)
            out.append((fact, scope))
    return out


def corrections(text: str | Read, *, project: str | None = None) -> list[tuple[str, Scope]]:
    """The corrections one human message states without a trigger ("Actually, we use
    Vitest now, not Jest"; :func:`opencode_memoryd.extract.corrections.correction_sentences`),
    as ``(fact, scope)`` like :func:`directives`: each is a memory only if it retires one
    (``only_if_supersedes`` of its candidate)."""
    out: list[tuple[str, Scope]] = []
    for sentence in correction_sentences(*(read(text) if isinstance(text, str) else text)):
        fact = finish(grammar.Fact(sentence), project=project, scope="project")
        if fact is None:
            continue
        # "I migrated the tests from Jest to Vitest" reports work on the project, not the
        # person's own choice ("I switched from VS Code to Neovim")
        user = about_user(fact, project) and not _ACTION_ON_A_THING.match(fact)
        scope: Scope = "user" if user else "project"
        if scope == "user":
            fact = finish(grammar.Fact(sentence), project=None, scope="user") or fact
        out.append((fact, scope))
    return out


#: A first-person report of work done on a thing ("I migrated the tests from …", "I changed
#: the import to …"), as opposed to the person's own move ("I switched from …").
_ACTION_ON_A_THING = re.compile(
    r"^I\s+(?:have\s+|'ve\s+|just\s+)?\w+ed\s+(?!(?:from|off|away|to|over|back)\b)"
    r"(?:the|our|all|every|this|that|these|those|its|their|some)\b", re.IGNORECASE)


class RulesExtractor:
    """Extract explicit directives from human text (``extraction.mode = "rules"``).

    Args:
        max_chars: longest memory kept; longer directives are refused with a reason.
    """

    name = "rules"

    def __init__(self, *, max_chars: int = 400) -> None:
        self.max_chars = max_chars

    def extract(
        self, lines: Sequence[TranscriptLine], *, project_root: str | None = None
    ) -> ExtractionResult:
        """Return one candidate per directive found in the ``user`` lines of ``lines``,
        and one per correction said without a trigger (:func:`corrections`, marked
        ``only_if_supersedes``); ``project_root`` (the session's folder) names the
        project in "this repo …"."""
        project = posixpath.basename(project_root.rstrip("/\\")) if project_root else None
        seen: set[str] = set()
        accepted: list[MemoryCandidate] = []
        rejected: list[tuple[str, str]] = []
        for line in lines:
            if line.role != "user":
                continue
            message = read(line.text)
            found = [(fact, scope, False)
                     for fact, scope in directives(message, project=project or None)]
            found += [(fact, scope, True)
                      for fact, scope in corrections(message, project=project or None)]
            for fact, scope, conditional in found:
                if len(fact) > self.max_chars:
                    rejected.append(("too_long", fact[:60]))
                    continue
                key = normalize_text(fact)
                if key in seen:
                    rejected.append(("duplicate_in_reply", fact[:60]))
                    continue
                seen.add(key)
                accepted.append(MemoryCandidate(
                    content=fact, type=classify(fact, scope), scope=scope,
                    message_ids=(line.message_id,), source="rules",
                    only_if_supersedes=conditional,
                ))
        return ExtractionResult(candidates=tuple(accepted), model="rules",
                                rejected=tuple(rejected))
