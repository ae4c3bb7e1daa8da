"""Corrections said without a trigger: "Actually, we use Vitest now, not Jest."

A user who corrects a fact seldom says "remember": "we moved off Poetry, it's uv now",
"Jest is gone, we're on Vitest", "Flask was replaced by FastAPI". The rules extractor
reads such a sentence as a *conditional* memory: it is stored only when it retires an
active memory of its scope (a fact that states the replaced term as its choice, about
the same subject: :func:`opencode_memoryd.capture.supersede.superseded`), so a sentence
that corrects nothing the user asked to keep stores nothing. It is never stored on its
own: precision first.

A sentence qualifies (:func:`correction_sentences`) when it is prose (not code, a log or a
quotation: the cue is read on the masked text), a statement (no question, no imperative:
"replace X with Y in utils.ts" is a task), not hypothetical or planned ("should we switch
from X", "we might drop X", "let's move off X", "if we replace X"), not under way ("we're
migrating from X to Y": the old fact holds until it is done), not negated ("we
haven't moved off X yet"), not temporary (:func:`~opencode_memoryd.extract.temporal.
temporary_reason`), not about a place in the code ("… in app.ts", "… in the test
fixture": an edit), not read as a directive already, and has a replacement cue
(:func:`~opencode_memoryd.extract.supersede.replaced_terms`) or gives a value slot a new
value (:func:`~opencode_memoryd.extract.slots.slot_change`: "the staging URL is now
staging2.acme.dev").
"""

from __future__ import annotations

import re

from opencode_memoryd.extract import grammar, segment
from opencode_memoryd.extract import lexicon as lx
from opencode_memoryd.extract.clauses import first_word, is_clause, strip_filler
from opencode_memoryd.extract.slots import slot_change
from opencode_memoryd.extract.supersede import replaced_terms
from opencode_memoryd.extract.temporal import temporary_reason

#: Longest sentence read as a correction (characters): a correction is one short claim.
MAX_CORRECTION_CHARS = 300

#: The bare verbs of the replacement cues: a sentence opening with one is a request ("Replace
#: foo with bar in utils.ts", "Drop the Redux store"), whatever :data:`lexicon.IMPERATIVE
#: <opencode_memoryd.extract.lexicon.IMPERATIVE>` lists.
_CUE_VERBS = frozenset(re.findall(r"[a-z]+", """
replace swap drop ditch dump remove retire abandon deprecate sunset switch move migrate
change convert port upgrade downgrade transition phase get stop use go"""))
#: A sentence opening with one of these asks for something.
_REQUEST_VERBS = lx.IMPERATIVE | _CUE_VERBS
#: An announcement's label before the correction ("Heads-up: we ditched Redux", "Quick
#: update - we moved off Poetry"): cut from the memory's text.
_LABEL = re.compile(
    r"\W*(?:heads[\s-]?up|psa|fyi|update|news|correction|(?:quick|small|little|short)\s+"
    r"(?:update|correction|note|heads[\s-]?up)|note|btw|ps|nb|for\s+the\s+record)\b"
    r"[^:,\-\u2014\u2013]{0,20}[:,\-\u2014\u2013]+\s*", re.IGNORECASE)
#: An interjection before a correction ("Wait, we're not on Heroku any more", "Nope, …"):
#: no imperative.
_INTERJECTION = re.compile(
    r"^(?:\W*(?:wait|hold\s+on|hang\s+on|hmm+|oh+|ah+|nope|no(?:\s+no)*|nah|well|ok(?:ay)?"
    r"|so|right|um+|uh+|sorry|oops)\s*[,!.\u2014\u2013-]+\s*)+", re.IGNORECASE)
#: A place in the code: a replacement made there is an edit, not the project's choice
#: ("I changed the import from lodash to lodash-es in app.ts", "Postgres replaced SQLite in
#: the test fixture").
_LOCAL = re.compile(
    r"\b(?:in|inside|within|for|from|of)\s+(?:the\s+|this\s+|that\s+|our\s+|my\s+)?"
    r"(?:[\w./-]+\.(?:py|pyi|ts|tsx|js|jsx|mjs|cjs|go|rs|java|kt|rb|php|cs|cpp|c|h|swift"
    r"|json|ya?ml|toml|ini|cfg|md|css|scss|html|vue|svelte|sql|sh)\b|(?:test|spec|fixture"
    r"|file|function|method|class|module|component|script|snippet|example|helper|hook|route"
    r"|handler|endpoint|query|migration|line|loop|block|import|template|story|page)s?\b)",
    re.IGNORECASE)
#: Openers of a question (a sentence may lack its "?" when typed fast).
_QUESTION = re.compile(
    r"^\W*(?:is|are|am|do|does|did|can|could|should|shall|would|will|have|has|had|was"
    r"|were|why|how|what|which|when|where|who|whose|whom|any\s+idea)\b", re.IGNORECASE)
#: What makes a replacement a plan, a wish, a proposal or a condition rather than a fact.
_NOT_A_FACT = re.compile(
    r"\b(?:should(?:n't)?|shall|could(?:n't)?|would(?:n't)?|might|may(?:be)?|perhaps"
    r"|probably|possibly|consider(?:ing|ed)?|thinking\s+(?:about|of)|think\s+about"
    r"|plan(?:s|ned|ning)?\s+to|planning|going\s+to|gonna|about\s+to|want(?:s|ed)?\s+to"
    r"|wanna|wish|hope|let's|let\s+us|if|whether|unless|once|when(?:ever)?|propos\w*"
    r"|suggest\w*|wonder\w*|try(?:ing)?\s+to|need\s+to|have\s+to|has\s+to|will|'ll|won't"
    r"|please|todo|to-do|eventually|someday|soon|next\s+(?:week|month|quarter|sprint|year)"
    r"|can\s+(?:we|you|i)|(?-i:idea|rfc|vs\.?)|discuss\w*|debat\w*|versus|or\s+not)\b",
    re.IGNORECASE)
#: A replacement under way, not done: "we're migrating from REST to GraphQL", "we are
#: dropping Python 3.8 support" (the old fact holds until it is done).
_UNDER_WAY = re.compile(
    r"(?:'re|'s|'m|\b(?:are|is|am))\s+(?:\w+\s+)?(?:migrating|moving|switching|replacing"
    r"|dropping|phasing|ditching|transitioning|porting|converting|upgrading|downgrading"
    r"|removing|retiring|deprecating|sunsetting|swapping|getting\s+rid|rewriting)\b",
    re.IGNORECASE)
#: A replacement said not to have happened (yet): "we haven't moved off X yet".
_NEGATED = re.compile(
    r"\b(?:haven't|hasn't|hadn't|didn't|did\s+not|have\s+not|has\s+not|had\s+not"
    r"|yet|never\s+\w+ed|nobody|no\s+one|not\s+(?:moving|switching|migrating|replacing"
    r"|dropping))\b", re.IGNORECASE)


def correction_sentences(units: list[segment.Unit], readings: list[grammar.Reading]
                         ) -> list[str]:
    """The sentences of one human message that state a correction without a trigger.

    Args:
        units: the message cut into sentences (:func:`opencode_memoryd.extract.segment.
            units`).
        readings: the grammar's reading of each (:func:`opencode_memoryd.extract.grammar.
            read`), as the rules extractor made them for the message's directives.

    Returns:
        Each qualifying sentence (see the module doc) as written, an interjection
        ("Wait,", "Nope,") and an announcement's label ("Heads-up:", "Quick update -") cut
        and other filler kept (the caller cleans it
        with :func:`opencode_memoryd.extract.rules.finish`), in message order.
        A sentence the grammar already reads as a directive (or a retraction, or what an
        anaphor points at) is left out: the directive carries the cue itself.
    """
    pointed = {i - 1 for i, r in enumerate(readings) if r.anaphor is not None or r.retract}
    pointed |= {i + 1 for i, r in enumerate(readings) if r.anaphor == "either"}
    out: list[str] = []
    for i, (u, r) in enumerate(zip(units, readings, strict=True)):
        if (u.kind != "sentence" or r.facts or r.retract or r.anaphor is not None
                or r.list_head or i in pointed):
            continue
        if is_correction(u.text, u.masked):
            cut = _INTERJECTION.match(u.masked)
            start = cut.end() if cut else 0
            label = _LABEL.match(u.masked, start)
            out.append(u.text[label.end() if label else start:])
    return out


def is_correction(sentence: str, masked: str | None = None) -> bool:
    """Whether one sentence states, as a fact, that something replaced a term (see the
    module doc); ``masked``: the sentence with code and quotations masked
    (:attr:`opencode_memoryd.extract.segment.Unit.masked`; default: ``sentence``)."""
    m = masked if masked is not None else sentence
    if len(sentence) > MAX_CORRECTION_CHARS or "?" in m:
        return False
    core = strip_filler(_INTERJECTION.sub("", m)).strip()
    if not core or _QUESTION.match(core) or first_word(core) in _REQUEST_VERBS:
        return False
    if (_NOT_A_FACT.search(core) or _NEGATED.search(core) or _UNDER_WAY.search(core)
            or temporary_reason(core)):
        return False
    if not is_clause(core) or lx.PROMISE.match(core) or _LOCAL.search(core):
        return False
    return bool(replaced_terms(m)) or slot_change(strip_filler(sentence)) is not None
