"""The rules as a floor under the model: in LLM mode, an explicit directive the model
missed is still captured.

:func:`add_floor` meets the model's result and the rules extractor's result for the same
chunk. A directive the model already holds (a memory citing the same message that keeps
the directive's identifiers and at least half of its content words, or the same text) is
left out; every other directive is added with source ``rules``. What remains alike is
merged by the normal write path (:func:`~opencode_memoryd.capture.writer.write_memories`:
same fact, same point; a near-identical fact merges into the stored one).
"""

from __future__ import annotations

from dataclasses import replace

from opencode_memoryd.extract.facts import content_words, missing_identifiers
from opencode_memoryd.models import ExtractionResult, MemoryCandidate, normalize_text

#: Share of a directive's content words a model memory must hold to stand for it.
COVER_SHARE = 0.5


def covers(memory: MemoryCandidate, directive: MemoryCandidate) -> bool:
    """Whether the model's ``memory`` already holds the rules' ``directive``: the same
    normalised text, or a memory citing one of the directive's messages that keeps every
    identifier of it and at least :data:`COVER_SHARE` of its content words."""
    if normalize_text(memory.content) == normalize_text(directive.content):
        return True
    if not set(memory.message_ids) & set(directive.message_ids):
        return False
    if missing_identifiers(directive.content, memory.content):
        return False
    words = content_words(directive.content)
    if not words:
        return True
    return len(words & content_words(memory.content)) >= COVER_SHARE * len(words)


def add_floor(model: ExtractionResult, rules: ExtractionResult) -> ExtractionResult:
    """``model`` plus the directives of ``rules`` it does not hold (see :func:`covers`).

    Tokens, model name, rejections and ``saturated`` are the model's.
    """
    extra = tuple(d for d in rules.candidates
                  if not any(covers(m, d) for m in model.candidates))
    if not extra:
        return model
    return replace(model, candidates=model.candidates + extra)
