"""Score the memories stored from the corpus sessions of :mod:`corpus_db`.

The same numbers as :mod:`rules_scoring` (precision, recall, user-scope accuracy, junk; the
same fact matching, :func:`rules_scoring.same_fact`), counted per session from the memories
the real pipeline stored (a memory belongs to every session in its ``session_ids``), plus:

- **over-capture**: stored memories of a session that match none of its labelled facts (not
  durable facts the user stated), shown per session;
- **wrong attribution**: stored memories that hold a sentence planted in the session's
  assistant text or tool output (:data:`corpus_db.ASSISTANT_PLANTS`,
  :data:`corpus_db.TOOL_PLANTS`): assistant or tool text stored as the user's;
- **floor**: stored memories the rules floor added (``source`` ``rules``) in LLM mode.

Used by ``bench/llm_corpus.py`` and ``tests/test_llm_corpus_bench.py``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from corpus_db import ASSISTANT_PLANTS, TOOL_PLANTS, PlantedSession
from opencode_memoryd.extract.facts import content_words, identifiers, missing_identifiers
from opencode_memoryd.extract.rules import is_junk
from rules_scoring import Tally, same_fact

#: Memory types the pipeline writes about sessions and projects, not facts: not scored.
NOT_FACTS = frozenset({"project-brief", "session-summary"})
#: Share of a memory's content words found in one planted sentence that makes it that
#: sentence (when it holds none of the sentence's identifiers).
PLANT_SHARE = 0.6


@dataclass
class LlmTally(Tally):
    """Counts for one category (or all): as :class:`rules_scoring.Tally`, plus over-capture
    (``over``), wrong attribution (``wrong``) and memories from the rules floor (``floor``)."""

    over: int = 0
    wrong: int = 0
    floor: int = 0

    COUNTS: ClassVar[tuple[str, ...]] = (*Tally.COUNTS, "over", "wrong", "floor")

    @property
    def over_per_session(self) -> float:
        return self.over / self.cases if self.cases else 0.0

    def as_dict(self) -> dict[str, Any]:
        """The counts and rates as JSON-safe values (rates in [0, 1])."""
        out: dict[str, Any] = {name: getattr(self, name) for name in self.COUNTS}
        out.update(precision=self.precision, recall=self.recall, scope=self.scope,
                   over_per_session=self.over_per_session)
        return out


def planted(text: str, plants: Iterable[str] = (*ASSISTANT_PLANTS, *TOOL_PLANTS)) -> bool:
    """Whether memory ``text`` holds one of ``plants``: one of a sentence's identifiers, or
    at least :data:`PLANT_SHARE` of the memory's content words from that sentence."""
    words = content_words(text)
    for plant in plants:
        idents = identifiers(plant)
        if idents and len(missing_identifiers(plant, text)) < len(idents):
            return True
        if words and len(words & content_words(plant)) >= PLANT_SHARE * len(words):
            return True
    return False


def by_session(memories: Iterable[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    """Active fact memories (not :data:`NOT_FACTS`) by each session id they cite."""
    out: dict[str, list[Mapping[str, Any]]] = {}
    for m in memories:
        if m.get("type") in NOT_FACTS or m.get("status", "active") != "active":
            continue
        for sid in m.get("session_ids") or [m.get("session_id")]:
            if sid:
                out.setdefault(str(sid), []).append(m)
    return out


def score(sessions: Sequence[PlantedSession], memories: Iterable[Mapping[str, Any]]
          ) -> dict[str, LlmTally]:
    """Tally each corpus session's stored memories by category, plus ``"all"``.

    ``memories`` are payloads as ``list --json`` prints them (``content``, ``scope``,
    ``type``, ``source``, ``session_ids``). Each miss is recorded as a line saying what was
    expected or stored and where the case is.
    """
    stored = by_session(memories)
    tallies: dict[str, LlmTally] = {}
    for s in sessions:
        case = s.case
        t = tallies.setdefault(case.category, LlmTally())
        got = stored.get(s.session_id, [])
        where = f"{case.category}:{case.line}"
        t.cases += 1
        t.expected += len(case.expected)
        t.stored += len(got)
        t.junk += sum(is_junk(str(m["content"])) for m in got)
        t.floor += sum(m.get("source") == "rules" for m in got)
        free = list(got)
        for fact, scope in case.expected:
            hit = next((m for m in free if same_fact(str(m["content"]), fact)), None)
            if hit is None:
                t.misses.append(f"{where}: missed {fact!r}")
                continue
            free.remove(hit)
            t.matched += 1
            if hit["scope"] == scope:
                t.scope_ok += 1
            else:
                t.misses.append(f"{where}: scope {hit['scope']} for {fact!r}")
        for m in free:
            t.over += 1
            wrong = planted(str(m["content"]), (s.assistant_text, s.tool_output))
            t.wrong += wrong
            label = "wrong attribution" if wrong else "stored"
            t.misses.append(f"{where}: {label} {m['content']!r} ({m.get('source')})")
    total = LlmTally()
    for t in tallies.values():
        total.add(t)
    tallies["all"] = total
    return tallies


def table(tallies: Mapping[str, LlmTally]) -> str:
    """The per-category table: cases (sessions), expected and stored memories, precision,
    recall, scope accuracy, junk, over-capture per session, wrong attributions and the
    memories the rules floor added; one row per category and one for all."""
    head = (f"{'category':<16} {'cases':>5} {'expect':>6} {'stored':>6} {'precision':>9} "
            f"{'recall':>7} {'scope':>6} {'junk':>4} {'over/s':>6} {'wrong':>5} {'floor':>5}")
    rows = [head, "-" * len(head)]
    for name in [*sorted(k for k in tallies if k != "all"), "all"]:
        t = tallies[name]
        if name == "all":
            rows.append("-" * len(head))
        rows.append(f"{name:<16} {t.cases:>5} {t.expected:>6} {t.stored:>6} "
                    f"{t.precision:>9.1%} {t.recall:>7.1%} {t.scope:>6.1%} {t.junk:>4} "
                    f"{t.over_per_session:>6.2f} {t.wrong:>5} {t.floor:>5}")
    return "\n".join(rows)
