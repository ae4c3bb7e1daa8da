"""What a correction replaces: the cue parsing of supersession (pure, no I/O).

A memory that says it replaces something ("use Vitest instead of Jest", "we moved off
Poetry", "switched from npm to pnpm", "replace Webpack with Vite", "we no longer use
Travis CI", "we don't use Redux any more", "Moment.js is deprecated", "we dropped MySQL",
"Flask was replaced by FastAPI", "Flask → FastAPI", "use Ruff, not Black") names the
replaced term; :func:`replaced_terms` finds it. :func:`states_use` then decides, with
precision first, whether an older memory is about that term as the choice of its slot ("We
use Jest for unit tests") rather than merely mentioning it ("The Jest config lives in
config/", "We never use npm"): only such a memory is superseded.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence

from opencode_memoryd.extract.facts import fold
from opencode_memoryd.extract.slots import names_a_thing, replaces_value

#: A term: one name (letters, digits, ``. @ / + # _ -``), optionally followed by up to two
#: more capitalised names ("Travis CI", "Create React App").
_NAME = r"[A-Za-z0-9][\w.@/+#-]*"
#: A code span is one term whatever its words ("instead of `make test`").
_TERM = (rf"(?:the\s+|our\s+|an?\s+)?(?P<x>`[^`\n]{{1,60}}`|"
         rf"{_NAME}(?:\s+[A-Z0-9][\w.@/+#-]*){{0,2}})")
#: A term whose more words are capitalised in any case (the cues are read ignoring case).
_TERM_CASED = (rf"(?:the\s+|our\s+|an?\s+)?(?P<x>`[^`\n]{{1,60}}`|"
               rf"{_NAME}(?:\s+(?-i:[A-Z0-9])[\w.@/+#-]*){{0,2}})")
#: Marks a cue whose term must look like a name (not a plain lowercase word): "the
#: client is deprecated", "removed in June" replace no tool.
_WEAK = "(?P<weak>)"
#: Marks a cue whose term may not carry a version: "Python 3.13 is out" is news of a
#: release, "Poetry is out" a correction.
_RELEASE = "(?P<release>)"
#: Marks the cue whose term is its sentence's subject ("Flask was replaced by FastAPI").
_SUBJECT = "(?P<subject>)"
#: Each cue with the replaced term in group ``x``.
_CUES: tuple[re.Pattern[str], ...] = tuple(re.compile(p, re.IGNORECASE) for p in (
    # "instead of X", "in place of X", "replacing X"
    rf"\binstead\s+of\s+(?:using\s+)?{_TERM}",
    rf"\b(?:replacing|in\s+place\s+of)\s+{_TERM}",
    # a move away from X: "moved off X", "switched from X", "went from X to Y"
    rf"\b(?:moved|moving|migrated|migrating|switched|switching)\s+"
    rf"(?:off(?:\s+of)?|away\s+from|from)\s+{_TERM}",
    rf"\b(?:changed|changing|went|transitioned|transitioning|converted|converting|ported|"
    rf"porting|upgraded|upgrading|downgraded|downgrading)\s+from\s+{_WEAK}{_TERM}",
    # Y takes X's place: "replace X with Y", "Y replaces X", "Y supersedes X"
    rf"\b(?:replace[sd]?|swap(?:ped)?)\s+{_TERM}\s+(?:with|by|for)\b",
    rf"\b(?:replaces|supersedes|superseded|succeeds)\s+{_TERM}",
    # "Kubernetes replaced Nomad" (with no "with"/"by": the replaced one follows)
    # (the new name opens the clause: "That commit replaced Black" names no tool)
    rf"(?:^|[,;:(]\s*)(?!(?:that|this|the|it|which|who|he|she|they|we|i|you|my|our)\b)"
    rf"(?-i:[A-Z])[\w.@/+#-]*\s+replaced\s+{_WEAK}{_TERM}(?!\s+(?:with|by|for)\b)",
    # X not in use any more: "no longer X", "don't use X any more", "stopped using X"
    rf"\bno\s+longer\s+(?:(?:use|uses|using|need|run|runs|on|with)\b)?\s*{_TERM}",
    rf"\b(?:don't|do\s+not|doesn't|does\s+not|won't|aren't|are\s+not)\s+"
    rf"(?:use|using|need|run)\s+{_TERM}\s+any\s*more\b",
    rf"\bnot\s+(?:using\s+|on\s+|with\s+|in\s+|running\s+(?:on\s+)?)?{_TERM}\s+any\s*more\b",
    rf"\b(?:stopped|stop)\s+using\s+{_TERM}",
    # ("no more Webpack warnings": the name modifies a noun, nothing is replaced)
    rf"(?:^|[\s,;:(])no\s+more\s+{_WEAK}{_TERM_CASED}(?=\s*(?:[,.;:!)\u2014]|$)|\s+(?:and|but|we"
    r"|it'?s|now|any\s*more|here|for\s+us)\b)",
    rf"\b(?:takes?|took|taking|taken)\s+over\s+from\s+{_TERM}",
    rf"\b(?:swap(?:ped|ping)?)\s+out\s+{_TERM}\s+(?:for|with)\b",
    # the move with its object: "migrated the API from Flask to FastAPI"
    rf"\b(?:moved|migrated|switched|ported|converted|changed|rewrote|rewritten)\s+"
    rf"(?:(?:the|our|all|every|its|this)\s+)?(?:[\w-]+\s+){{1,3}}?from\s+{_TERM}\s+to\b",
    # X done away with (a name only: "drop the table", "removed in June" replace nothing)
    rf"\b(?:drop|dropped|dropping|ditch|ditched|ditching|removed|retire|retired|retiring|"
    rf"abandon|abandoned|dump|dumped|deprecated|sunset|sunsetted)\s+{_WEAK}{_TERM}",
    rf"\b(?:got|get|getting)\s+rid\s+of\s+{_WEAK}{_TERM}",
    rf"\b(?:phased?|phasing)\s+out\s+{_WEAK}{_TERM}",
    # X in the past: "we used to use X", "(used to be X)", "it was X before"
    rf"(?:\b(?:we|i|you|they|it|that|which)\s+|\(\s*|^)used\s+to\s+"
    rf"(?:be|use|using)\s+{_TERM}",
    rf"(?:\b(?:we|i|you|they|it|that|which)\s+|^)used\s+to\s+[a-z]+\s+"
    rf"(?:on|with|via|to|in|through|from)\s+{_WEAK}{_TERM}",
    rf"\b(?:was|were)\s+{_WEAK}{_TERM}\s+(?:before|previously|earlier|until\s+now)\b",
    rf"\bformerly\s+{_WEAK}{_TERM}",
    # X, the subject, is gone: "X is deprecated", "X has been replaced by Y"
    rf"(?:^|[\s,;:(]){_WEAK}{_SUBJECT}(?:the\s+|our\s+)?"
    rf"(?P<x>{_NAME}(?:\s+(?-i:[A-Z0-9])[\w.@/+#-]*){{0,2}})"
    r"(?:\s+(?:deploy|deployment|setup|config|integration|pipeline|server|build|plugin|"
    r"package|library|runner|workflow|CLI|SDK|API)s?)?\s*(?:\s(?:is|are|was|were|has\s+been|"
    r"have\s+been|got|gets|is\s+being|are\s+being)|'s\s+been|'s|'re)\s+"
    r"(?:now\s+)?(?:officially\s+)?(?:gone|deprecated|dead|retired|removed|dropped|obsolete|"
    r"history|no\s+more|a\s+thing\s+of\s+the\s+past|ditched|abandoned|killed|"
    r"sunset(?:ted)?|phased\s+out|swapped\s+out|superseded|"
    r"(?:replaced|swapped(?:\s+out)?)\s+(?:by|with|for)|"
    r"no\s+longer\s+(?:used|needed|in\s+use))\b",
    # "X is out" said of a name: "Poetry is out, uv is the package manager"
    # ("Python 3.13 is out", a versioned name, is news of a release: :data:`_RELEASE`)
    rf"(?:^|[\s,;:(]){_WEAK}{_RELEASE}{_SUBJECT}(?P<x>{_NAME}(?:\s+(?-i:[A-Z0-9])[\w.@/+#-]*){{0,2}})"
    r"\s+(?:is|are)\s+(?:now\s+)?out\b(?!\s+(?:of|for|now|today|this|until|till|sick|on)\b)",
    # "X is out, Y is in"
    rf"(?:^|[\s,;:(]){_WEAK}{_SUBJECT}(?P<x>{_NAME})\s+(?:is|are)\s+out\b[,;:.]?\s+"
    rf"(?:and\s+)?{_NAME}\s+(?:is|are)\s+in\b",
    rf"(?:^|[\s,;:(])(?P<x>{_NAME})\s*(?:→|->|=>)\s*{_NAME}",
    # "use Y, not X", "the runner is Y, not X"
    rf"\b(?:use|uses|using|prefer|prefers|pick|choose|with|via|run|runs|on|is|are)\s+"
    rf"(?:now\s+)?{_NAME}"
    rf"(?:\s+[A-Z0-9][\w.@/+#-]*){{0,2}},?\s+(?:not|rather\s+than)\s+{_TERM}",
    # "it's Y now, not X": Y a name ("it's awesome, not too far" replaces nothing)
    rf"\b(?:it|that|we|they)(?:'s|'re)\s+(?:now\s+)?(?:on\s+)?(?P<y>`?[A-Za-z0-9][\w.@/+#-]*`?)"
    rf"(?:\s+[A-Z0-9][\w.@/+#-]*){{0,2}}(?:\s+now)?,?\s+(?:not|rather\s+than)\s+{_TERM}",
))

#: A word every cue holds one of (a quick test before the cues themselves).
_ANY_CUE = re.compile(
    r"instead|place\s+of|moved|moving|migrat|switch|chang|went|transition|convert|port|"
    r"grad|replac|swap|supersed|succeeds|longer|any\s*more|stop|drop|ditch|remov|retir|"
    r"abandon|dump|deprecat|sunset|rid\s+of|phas|used\s+to|before|previously|earlier|"
    r"until\s+now|formerly|gone|dead|obsolete|\bout\b|→|->|=>|\bnot\b|rather|history|"
    r"no\s+more|thing\s+of\s+the\s+past|killed|over\s+from",
    re.IGNORECASE)


def _set(text: str) -> frozenset[str]:
    return frozenset(text.split())


#: Words that are never a replaced term on their own.
_NOT_TERMS = _set("""
a an the our it its this that these those them they we you i he she there here
something anything everything nothing one ones using use old new former previous
and or but so then also if when while because with for to in on at of by from as
is are was were be not no all any out over
""")
_WORD = re.compile(r"[\w.@/+#'-]+")
#: Words right before a term that state it as the choice of its slot.
_USE_CUES = _set("""
use uses using used prefer prefers preferred run runs running with via on install
installs installed manage manages managed always our is are by through
""")
#: Words that, close before the term, say it is not in use (or already replaced).
_NEGATIONS = _set("""
never not no don't doesn't dont avoid without instead off from replace replaced
replacing drop dropped stop stopped
""")
#: How many words before a term :func:`states_use` looks at for a use word ...
_WINDOW = 2
#: ... and for a negation.
_NEGATION_WINDOW = 4


#: Where a clause ends, for the check that a correction does not also use its term: "Use
#: uv; Poetry is obsolete" and "we use Vitest, Jest is retired" use only the new term
#: (a comma before "not" keeps the clause: "We use yarn 1, not yarn berry").
_CLAUSE = re.compile(r"[;:!?]|\.(?:\s|$)|,(?!\s*(?:not|rather)\b)")


def _clean(term: str) -> str:
    return term.strip(" \t.,;:!?'\"()[]`").strip()


def replaced_terms(text: str) -> tuple[str, ...]:
    """The terms ``text`` says are replaced, in order of appearance, without repeats
    (compared case-insensitively).

    ``"Use Vitest instead of Jest."`` -> ``("Jest",)``; ``"We switched from npm to
    pnpm."`` -> ``("npm",)``; a text without a replacement cue -> ``()``.
    """
    found: list[tuple[int, str]] = []
    text = text.replace("\u2019", "'")
    if not _ANY_CUE.search(text):  # most texts: one scan instead of one per cue
        return ()
    # "pandas", "redis" are tools where the text names one by its capitalised name ("Use
    # Polars instead of pandas"); else a plain lowercase plural is an English noun ("I use
    # tabs, not spaces", "factories instead of fixtures")
    names_a_tool = any(w[:1].isupper() for w in text.split()[1:] if w != "I")
    for cue in _CUES:
        for m in cue.finditer(text):
            term = _term_of(m, cue, text, names_a_tool=names_a_tool)
            if term:
                found.append((m.start("x"), term))
    seen: set[str] = set()
    out: list[str] = []
    for _pos, term in sorted(found):
        key = fold(term)
        if key not in seen:
            seen.add(key)
            out.append(term)
    return tuple(out)


def _term_of(m: re.Match[str], cue: re.Pattern[str], text: str, *, names_a_tool: bool) -> str:
    """The replaced term a cue's match ``m`` names in ``text``, or ``""`` when it names none
    (a framing word, a plain English noun, a term the text itself still uses)."""
    raw = m.group("x")
    term = _clean(raw)
    if raw.startswith("`") and term:  # a code span names what it replaces whole
        return "" if _still_used(text, term) else term
    first, *rest = term.split() or [""]
    # a name goes on only with capitalised words ("Travis CI", not "CircleCI to")
    more = []
    for w in rest:
        if not w[:1].isupper() and not w[:1].isdigit():
            break
        more.append(w)
    # a framing word before the subject is no part of it ("that Flask was replaced")
    while "subject" in cue.groupindex and more and fold(first) in _NOT_TERMS:
        first, *more = more
    term = " ".join([first, *more])
    # a plain lowercase word that reads as an English noun or verb form
    # ("spaces", "fixtures", "nested", "asking") is not a name of a tool
    plain = term.islower() and term.isalpha()
    weak = "weak" in cue.groupindex and (plain or (" " in term and term.split()[0].islower()))
    if "release" in cue.groupindex and re.search(r"\d", term):
        return ""
    if "y" in cue.groupindex and not names_a_thing(m.group("y")):
        return ""
    if (not term or weak or fold(term.split()[0]) in _NOT_TERMS or term.isdigit()
            or (plain and term.endswith(("ed", "ing")))
            or (plain and term.endswith("s") and not names_a_tool)
            or _still_used(text, term)):
        return ""
    return term


def _still_used(text: str, term: str) -> bool:
    """Whether a clause of ``text`` still states ``term`` as in use ("Use uv; Poetry is
    obsolete" uses uv, not Poetry)."""
    return any(_used(_words(c), term, as_subject=False) for c in _CLAUSE.split(text))


def _words(text: str) -> list[str]:
    return [w.strip(".-") or w for w in _WORD.findall(fold(text))]


def _positions(words: list[str], term: str) -> list[int]:
    """Where ``term`` (one or more words; a plural "s"/"es" allowed on its last) starts in
    ``words``."""
    parts = _words(term)
    if not parts:
        return []
    n = len(parts)
    hits = []
    for i in range(len(words) - n + 1):
        window = words[i:i + n]
        *head, last = window
        if head == parts[:-1] and last in (parts[-1], parts[-1] + "s", parts[-1] + "es",
                                           parts[-1] + "'s"):
            hits.append(i)
    return hits


def mentions(text: str, term: str) -> bool:
    """Whether ``text`` names ``term`` as a whole term (case-insensitive; "Jest's" and
    "Makefiles" name "Jest" and "Makefile"; "jester" does not name "Jest")."""
    return bool(_positions(_words(text), term))


def states_use(text: str, term: str) -> bool:
    """Whether ``text`` states ``term`` as what is used (the slot a correction replaces).

    True when ``text`` names ``term`` with one of the use words ("use", "with", "run",
    "prefer", "our", …) among the two words before it, or as its first words followed
    by "is/are/for/as" ("Jest is our test runner"), and no negation or replacement word
    ("never", "not", "instead", "from", "off", "dropped", …) among the four before it, and
    ``text`` does not itself say it replaces ``term``. So "The Jest config lives in
    config/" and "We never use npm" are not about using the term.
    """
    if any(fold(t) == fold(term) for t in replaced_terms(text)):
        return False
    return _used(_words(text), term, as_subject=True)


def _used(words: list[str], term: str, *, as_subject: bool) -> bool:
    """Whether ``words`` name ``term`` after a use word and no negation (see
    :func:`states_use`); with ``as_subject`` also as the first words followed by
    "is/are/for/as". (A correction that also uses the term, "We use yarn 1 not yarn
    berry", does not replace it.)"""
    n = len(_words(term))
    for i in _positions(words, term):
        before = words[max(0, i - _NEGATION_WINDOW):i]
        if any(w in _NEGATIONS for w in before) or _used_to(before):
            continue
        if any(w in _USE_CUES for w in words[max(0, i - _WINDOW):i]):
            return True
        after = words[i + n:i + n + 1]
        if as_subject and i == 0 and after and after[0] in ("is", "are", "for", "as"):
            return True
    return False


def _used_to(words: list[str]) -> bool:
    """Whether ``words`` hold "used to", a habit of the past ("we used to use Jest")."""
    return any(a == "used" and b == "to" for a, b in itertools.pairwise(words))


def grounded_replaces(proposed: object, content: str, own: str,
                      sentences: list[str]) -> tuple[tuple[str, ...], str]:
    """The replaced terms of a model's proposal that the user's own words say are
    replaced, and the user's sentence saying so: ``(terms, cue)``, ``((), "")`` for none.

    Nothing is retired without a cue in the cited user text: a term counts only when a
    replacement cue of one of ``sentences`` (the user's own sentences the proposal cites)
    names it (:func:`replaced_terms`); the user's spelling of it is kept. ``proposed`` is
    the proposal's ``replaces``: a list of terms; when it names none (``None`` or ``[]``:
    a model that ignores the field) the terms the cited sentences replace and ``content``
    names are taken. ``own`` (all the cited own words) must name each term.
    """
    if proposed is None or proposed == []:
        wanted = [t for s in sentences for t in replaced_terms(s) if mentions(content, t)]
    elif isinstance(proposed, list):
        wanted = [str(t) for t in proposed if isinstance(t, str) and t.strip()]
    else:
        return (), ""
    terms: list[str] = []
    cues: list[str] = []
    for want in wanted:
        for sentence in sentences:
            said = next((t for t in replaced_terms(sentence)
                         if fold(t) == fold(want) or mentions(t, want)), None)
            if said is not None and mentions(own, said):
                if fold(said) not in {fold(t) for t in terms}:
                    terms.append(said)
                if sentence not in cues:
                    cues.append(sentence)
                break
    return tuple(terms), " ".join(cues)


def corrects(new: str, old: str) -> bool:
    """Whether the text ``new`` says it replaces a term that ``old`` states as its choice
    (:func:`replaced_terms` of ``new``, :func:`states_use` of ``old``), about the same
    subject (:func:`same_subject`): "Use Vitest instead of Jest." corrects "We use Jest
    for unit tests." but not "The Jest config lives in config/". A new value of a value
    slot corrects the old one too (:func:`~opencode_memoryd.extract.slots.replaces_value`:
    "The staging URL is now staging2.acme.dev" corrects "The staging URL is
    staging.acme.dev")."""
    terms = replaced_terms(new)
    return ((any(states_use(old, t) for t in terms if mentions(old, t))
             and same_subject(new, old, terms)) or replaces_value(new, old))


def index_keys(text: str) -> set[str]:
    """The keys under which ``text`` is found by :func:`term_key` of every term it may
    :func:`mention <mentions>`: its folded words, and each without a plural "s"/"es"/"'s"."""
    keys = set()
    for w in _words(text):
        keys.add(w)
        for end in ("'s", "es", "s"):
            if w.endswith(end) and len(w) > len(end):
                keys.add(w[: -len(end)])
    return keys


def term_key(term: str) -> str:
    """The key of a term for :func:`index_keys`: its first folded word (its only one for a
    one-word term); ``""`` for an empty term."""
    words = _words(term)
    return words[0] if words else ""


#: Words that end the leading noun phrase of a correction (its subject) ...
_SUBJECT_END = _set("""
is are was were has have had will would should must can uses use used using now no not
never don't doesn't moved moving switched migrated dropped replaced replace runs run goes
go lives stores prefers prefer always -> → => instead from off any
changed changing went transitioned converted ported upgraded downgraded drop dropping
ditch ditched retire retired abandon abandoned dump dumped deprecated got get getting
phase phased phasing swap swapped stopped stop
""")
#: ... or, when a term comes first and one of these follows ("Vitest replaces Jest"), the
#: new term was the leading noun phrase: the correction names no particular subject.
_TAKES_PLACE = _set("replaces supersedes superseded succeeds takes took taking taken")
#: ... as does "replaced" after a one-word name ("Kubernetes replaced Nomad"); after a
#: longer phrase it ends a subject ("The billing service replaced Redis with Valkey").
_REPLACED = "replaced"
#: ... and the words of it that name no particular subject (pronouns, framing).
_NO_SUBJECT = _set("""
we i you they it this that these those the a an our my your their project user team repo
we're we've i'm i've you're they're
repository codebase app here also actually
correction update going forward fyi heads-up psa note btw ok okay so well then today
""")


def subject_words(text: str, terms: Sequence[str]) -> set[str]:
    """The words of the leading noun phrase of ``text`` (its subject, up to its first verb,
    use word or cue word: "The billing service now uses …" -> ``{"billing", "service"}``,
    "I review diffs with …" -> ``{"review", "diffs"}``), without
    pronouns, framing words ("the project", "we") and the replaced ``terms``. Empty for an
    imperative ("Use Vitest instead of Jest") or a sentence about "we"."""
    replaced = {w for t in terms for w in _words(t)}
    out: set[str] = set()
    for w in _words(text):
        if w in _TAKES_PLACE or (w == _REPLACED and len(out) <= 1):
            return set()
        if w in _SUBJECT_END or w in replaced or w.removesuffix("'s") in replaced:
            break
        if w in _USE_CUES:  # an imperative ("Use …", "Run …"), or the slot's use word
            break  # ("I review diffs with …")
        if w not in _NO_SUBJECT:
            out.add(w)
    return out


def same_subject(new: str, old: str, terms: Sequence[str]) -> bool:
    """Whether ``old`` is about the subject the correction ``new`` names: every word of
    :func:`subject_words` of ``new`` is in ``old`` (a plural "s" aside). "The billing
    service now uses Valkey, replacing Redis" is about "The billing service uses Redis",
    not "The payments service uses Redis"."""
    keys = index_keys(old)
    return all(w in keys for w in subject_words(new, terms))
