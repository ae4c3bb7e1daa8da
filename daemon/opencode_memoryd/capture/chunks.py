"""Extract one chunk of transcript without losing a fact: split it when an answer hits a cap.

:class:`ChunkExtractor` asks the extractor for the whole chunk first. It splits the chunk
in two, on a turn boundary, and extracts each half again (recursively) when:

* the answer is ``saturated`` (as many memories as allowed, ``"more": true``, or the
  output token cap): the chunk may hold more facts than one answer carries;
* the answer was cut off before it was complete (:class:`~opencode_memoryd.errors.ReplyCutOff`);
* the prompt is too long for the model (``UpstreamError`` kind ``context_length``; a chunk
  of one turn is then cut between lines, and a single line still too long is parked).

A single turn cannot be split on a turn boundary: a saturated answer for it is kept as it
is (logged), a cut-off answer is a failure. In LLM mode, the rules extractor's directives
for the whole chunk are added as a floor (:func:`~opencode_memoryd.extract.floor.add_floor`).
Every call's tokens, those of answers thrown away and of failed calls included, are added
to a :class:`Spent`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import structlog

from opencode_memoryd.errors import ExtractionError, ReplyCutOff, UpstreamError
from opencode_memoryd.extract.floor import add_floor
from opencode_memoryd.models import ExtractionResult, TranscriptLine

log = structlog.get_logger(__name__)


class Extractor(Protocol):
    """Anything that turns transcript lines into memory candidates."""

    name: str

    def extract(
        self, lines: Sequence[TranscriptLine], *, project_root: str | None = None
    ) -> ExtractionResult:
        """Return the accepted candidates; raise UpstreamError or ExtractionError."""
        ...


@dataclass(slots=True)
class Spent:
    """What extracting one chunk cost: LLM calls and their tokens, failed calls included."""

    calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0

    def add(self, tokens_in: int, tokens_out: int) -> None:
        """Count one call's tokens."""
        self.tokens_in += max(tokens_in, 0)
        self.tokens_out += max(tokens_out, 0)


def turn_starts(lines: Sequence[TranscriptLine]) -> list[int]:
    """The indexes of ``lines`` where a turn starts (a human line of a new message)."""
    return [i for i, line in enumerate(lines)
            if line.role == "user" and (i == 0 or lines[i - 1].message_id != line.message_id)]


def split_on_turns(lines: Sequence[TranscriptLine]
                   ) -> tuple[list[TranscriptLine], list[TranscriptLine]] | None:
    """Split ``lines`` in two at the turn boundary that halves the number of turns; ``None``
    when they hold fewer than two turns."""
    cuts = [i for i in turn_starts(lines) if i > 0]
    if not cuts:
        return None
    cut = cuts[(len(cuts) + 1) // 2 - 1]  # the first half holds half the turns
    return list(lines[:cut]), list(lines[cut:])


def merge_results(a: ExtractionResult, b: ExtractionResult) -> ExtractionResult:
    """The candidates, tokens and rejections of two halves, in order."""
    return ExtractionResult(candidates=a.candidates + b.candidates,
                            tokens_in=a.tokens_in + b.tokens_in,
                            tokens_out=a.tokens_out + b.tokens_out,
                            model=b.model if b.model != "none" else a.model,
                            rejected=a.rejected + b.rejected)


class ChunkExtractor:
    """Extracts one chunk, splitting it as the module docstring says.

    Args:
        extractor: the LLM or rules extractor.
        floor: the rules extractor added under an LLM extractor, or ``None``.
    """

    def __init__(self, extractor: Extractor, floor: Extractor | None = None) -> None:
        self.extractor = extractor
        self.floor = floor if extractor.name != "rules" else None

    def extract(self, lines: Sequence[TranscriptLine], project_root: str | None,
                spent: Spent) -> ExtractionResult:
        """Extract ``lines`` (redacted); add the calls made and their tokens to ``spent``.

        Raises:
            UpstreamError: the endpoint failed (any kind but ``context_length``).
            ExtractionError: an answer could not be used (a cut-off answer for one turn
                too, as :class:`~opencode_memoryd.errors.ReplyCutOff`).
        """
        result = self._extract(list(lines), project_root, spent)
        if self.floor is not None:
            result = add_floor(result, self.floor.extract(lines, project_root=project_root))
        return result

    def _extract(self, lines: list[TranscriptLine], project_root: str | None,
                 spent: Spent) -> ExtractionResult:
        if self.extractor.name != "rules" and any(x.role == "user" for x in lines):
            spent.calls += 1
        try:
            result = self.extractor.extract(lines, project_root=project_root)
        except ReplyCutOff as exc:
            spent.add(exc.tokens_in, exc.tokens_out)
            halves = split_on_turns(lines)
            if halves is None:
                raise
            return self._halves(halves, "cut_off", project_root, spent)
        except ExtractionError as exc:
            spent.add(exc.tokens_in, exc.tokens_out)
            raise
        except UpstreamError as exc:
            spent.add(exc.tokens_in, exc.tokens_out)
            if exc.kind != "context_length":
                raise
            if len(lines) <= 1 or not any(x.role == "user" for x in lines):
                log.warning("chunk_parked", reason="context_length", lines=len(lines))
                return ExtractionResult(candidates=(), model="none",
                                        rejected=(("context_length", ""),))
            half = len(lines) // 2
            halves = split_on_turns(lines) or (lines[:half], lines[half:])
            return self._halves(halves, "context_length", project_root, spent)
        spent.add(result.tokens_in, result.tokens_out)
        if not result.saturated:
            return result
        halves = split_on_turns(lines)
        if halves is None:
            log.warning("chunk_cap_single_turn", lines=len(lines),
                        candidates=len(result.candidates),
                        detail="one turn holds more facts than one answer may carry; "
                               "raise extraction.max_memories_per_chunk to keep them all")
            return result
        return self._halves(halves, "cap", project_root, spent)

    def _halves(self, halves: tuple[list[TranscriptLine], list[TranscriptLine]],
                reason: str, project_root: str | None, spent: Spent) -> ExtractionResult:
        log.info("chunk_split", reason=reason, lines=len(halves[0]) + len(halves[1]))
        return merge_results(self._extract(halves[0], project_root, spent),
                             self._extract(halves[1], project_root, spent))
