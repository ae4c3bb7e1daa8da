"""The rules as a floor under the model: in LLM mode, an explicit directive the model
missed is still captured, and one the model already holds is not stored twice.

:func:`add_floor` meets the model's result and the rules extractor's result for the same
chunk. A directive the model already holds is left out (:func:`covers`: a memory that
keeps every identifier of the directive and most of its key terms, compared by stem, when
it cites the same message; all of them when it cites another one); every other directive
is added with source ``rules``. What remains alike is merged by the normal write path
(:func:`~opencode_memoryd.capture.writer.write_memories`: same fact, same point; a
near-identical fact merges into the stored one).
"""

from __future__ import annotations

from dataclasses import replace

from opencode_memoryd.extract.facts import FRAME_STEMS, content_words, missing_identifiers, stem
from opencode_memoryd.extract.polarity import flip_reason
from opencode_memoryd.extract.slots import slot_change
from opencode_memoryd.extract.supersede import replaced_terms
from opencode_memoryd.models import ExtractionResult, MemoryCandidate, normalize_text

#: Share of a directive's key terms (:func:`key_terms`) a model memory must hold to stand
#: for it.
COVER_SHARE = 0.5

#: Stems of the words that frame a directive or a memory rather than state its fact
#: ("from now on, always …", "the project now uses …"); with :data:`FRAME_STEMS`.
_FRAME = FRAME_STEMS | frozenset(stem(w) for w in (
    "always", "now", "from", "going", "forward", "please", "remember", "keep", "mind",
    "note", "instead", "rather", "anymore", "longer", "currently"))


def key_terms(text: str) -> frozenset[str]:
    """The stems (:func:`~opencode_memoryd.extract.facts.stem`) of the content words of
    ``text`` (:func:`~opencode_memoryd.extract.facts.content_words`), less the words that
    frame a fact (:data:`_FRAME`): "We deploy with helm to eu-west-1." →
    ``{"deploi", "helm", "eu", "west", "1"}``."""
    return frozenset(stem(w) for w in content_words(text)) - _FRAME


def _stem_prefix(a: str, b: str) -> bool:
    """Whether one stem begins the other, both of 4+ letters ("deploi" and
    "deployment", "commit" and "committ")."""
    short, long = sorted((a, b), key=len)
    return len(short) >= 4 and long.startswith(short)


def covers(memory: MemoryCandidate, directive: MemoryCandidate) -> bool:
    """Whether the model's ``memory`` (of the same chunk) already holds the rules'
    ``directive``: the same normalised text, or a memory that keeps every identifier of it
    (:func:`~opencode_memoryd.extract.facts.missing_identifiers`), does not turn it around
    (:func:`~opencode_memoryd.extract.polarity.flip_reason`) and holds its key terms
    (:func:`key_terms`; a stem that begins another matches it): at least
    :data:`COVER_SHARE` of them when it cites one of the directive's messages, all of them
    (two or more) when it cites another message (the user said the fact twice): "Use tabs."
    is not held by "Tabs render as 4 spaces." of another message."""
    if normalize_text(memory.content) == normalize_text(directive.content):
        return True
    if missing_identifiers(directive.content, memory.content):
        return False
    if flip_reason(memory.content, directive.content) is not None:
        return False
    terms = key_terms(directive.content)
    have = key_terms(memory.content)
    held = sum(1 for t in terms if t in have or any(_stem_prefix(t, h) for h in have))
    if set(memory.message_ids) & set(directive.message_ids):
        return held >= COVER_SHARE * len(terms)
    return len(terms) >= 2 and held == len(terms)


def add_floor(model: ExtractionResult, rules: ExtractionResult) -> ExtractionResult:
    """``model`` plus the directives of ``rules`` it does not hold (see :func:`covers`);
    a model memory that holds a directive which is a correction gets what the directive
    replaces when it names nothing (:func:`_with_correction`).

    Tokens, model name, rejections and ``saturated`` are the model's.
    """
    extra: list[MemoryCandidate] = []
    held = list(model.candidates)
    for d in rules.candidates:
        i = next((i for i, m in enumerate(held) if covers(m, d)), None)
        if i is None:
            extra.append(d)
        else:
            held[i] = _with_correction(held[i], d)
    if not extra and held == list(model.candidates):
        return model
    return replace(model, candidates=tuple(held) + tuple(extra))


def _with_correction(memory: MemoryCandidate, directive: MemoryCandidate) -> MemoryCandidate:
    """The model's ``memory`` that holds a rules ``directive``, with what the directive's
    words say it replaces when the model named nothing: its terms
    (:func:`~opencode_memoryd.extract.supersede.replaced_terms`) that the memory names, or
    a value change (:func:`~opencode_memoryd.extract.slots.slot_change`), with the
    directive (the user's words) as the cue. A model that forgot to say what a correction
    replaces still retires it; nothing is retired without the user's cue."""
    if memory.replaces or memory.cue:
        return memory
    terms = replaced_terms(directive.content)
    if terms:
        return replace(memory, replaces=terms, cue=directive.content)
    if slot_change(directive.content) is not None:
        return replace(memory, cue=directive.content)
    return memory
