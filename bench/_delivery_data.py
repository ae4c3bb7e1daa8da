"""The scenario of ``bench/delivery.py`` (``bench/data/delivery_scenario.json``): loading,
checking, and the pure parts of scoring a request body (its text, the parts opencode-memoryd
added to it).

The file's format is described in its ``about`` key. :func:`problems` lists what is wrong
with a scenario (unknown keys, a fact that rules mode would not store as written, a check
that needs a fact not said yet or no longer true); :func:`load` refuses a scenario with
problems.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SCENARIO = Path(__file__).resolve().parent / "data" / "delivery_scenario.json"
#: Every scenario (``bench/delivery.py --scenario``): the default, and a second one with
#: other projects, phrasings and failing commands, so a fix is not tuned to one file.
SCENARIOS = (SCENARIO, SCENARIO.with_name("delivery_scenario_gull.json"))
#: The step kinds of issue-style "done when": session start, the prompt that asks, the tool
#: call that touches the file or runs the command, the turn after a failing command.
KINDS = ("start", "ask", "action", "error")
#: A part opencode-memoryd added to a request, whatever its kind and wherever it sits: a
#: marker line, then the closing line with the same kind and the hash of the lines between.
PART = re.compile(r"<!-- opencode-memoryd ([a-z][a-z-]*) -->\n.*?"
                  r"<!-- opencode-memoryd \1 end [0-9a-f]+ -->", re.S)


@dataclass(frozen=True)
class Fact:
    """One statement of the user: ``memory`` is what rules mode stores for it."""

    key: str
    scope: str  # "project" or "user"
    project: str | None
    said_in: str  # a session key
    memory: str
    superseded_by: str | None = None
    forgotten_after_day: int | None = None


@dataclass(frozen=True)
class Check:
    """A step of a turn and the facts its request must carry. ``after_step``: for
    ``action``/``error``, the model step whose tool call the checked request answers."""

    kind: str
    needs: tuple[str, ...]
    after_step: int | None = None


@dataclass(frozen=True)
class Turn:
    """One user message: its ``text``, the stand-in model's ``steps`` (``{"tool", "args"}``
    or ``{"reply"}``), and its ``checks``."""

    text: str
    steps: tuple[dict[str, Any], ...] = ()
    checks: tuple[Check, ...] = ()


@dataclass(frozen=True)
class Session:
    """One OpenCode session, played on ``day`` in ``project``."""

    key: str
    day: int
    project: str
    turns: tuple[Turn, ...]


@dataclass(frozen=True)
class Scenario:
    """The whole scenario; see the JSON file's ``about``."""

    days_back: dict[int, int]
    projects: dict[str, dict[str, str]]  # name -> files
    facts: dict[str, Fact]
    sessions: tuple[Session, ...]
    shims: dict[str, list[dict[str, Any]]]
    background: dict[str, Any] = field(default_factory=dict)

    def session(self, key: str) -> Session:
        """The session named ``key`` (``KeyError`` when there is none)."""
        for s in self.sessions:
            if s.key == key:
                return s
        raise KeyError(key)

    def checks(self) -> Iterator[tuple[Session, int, Check]]:
        """Every (session, turn index, check), in playing order."""
        for s in self.sessions:
            for i, turn in enumerate(s.turns):
                for c in turn.checks:
                    yield s, i, c

    def day_of(self, fact: str) -> int:
        """The day the fact is said."""
        return self.session(self.facts[fact].said_in).day

    def retired_on(self, fact: str) -> tuple[str, int] | None:
        """``("superseded"|"forgotten", day)`` from which ``fact`` must no longer reach a
        request (sessions of later days), or ``None``."""
        f = self.facts[fact]
        if f.superseded_by:
            return "superseded", self.day_of(f.superseded_by)
        if f.forgotten_after_day is not None:
            return "forgotten", f.forgotten_after_day
        return None


def parse(doc: dict[str, Any]) -> Scenario:
    """A :class:`Scenario` from the decoded JSON (no checks beyond the shapes).

    Raises:
        KeyError, TypeError, ValueError: a field is missing or of the wrong shape.
    """
    facts = {f["key"]: Fact(f["key"], f["scope"], f.get("project"), f["said_in"], f["memory"],
                            f.get("superseded_by"), f.get("forgotten_after_day"))
             for f in doc["facts"]}
    sessions = tuple(
        Session(s["key"], int(s["day"]), s["project"], tuple(
            Turn(t["text"], tuple(t.get("steps", ())), tuple(
                Check(c["kind"], tuple(c["needs"]), c.get("after_step"))
                for c in t.get("checks", ())))
            for t in s["turns"]))
        for s in doc["sessions"])
    return Scenario({int(k): int(v) for k, v in doc["days_back"].items()},
                    {p["name"]: dict(p["files"]) for p in doc["projects"]}, facts, sessions,
                    dict(doc.get("shims", {})), dict(doc.get("background", {})))


def problems(sc: Scenario) -> list[str]:
    """What is wrong with ``sc``, one sentence each (``[]`` when nothing is).

    Checked: unique session keys, known projects, days and facts; each fact's ``memory`` is
    what the rules extractor stores (in its scope) from one turn of the session that says
    it; checks of a known kind need facts said on an earlier day and not retired by then;
    ``after_step`` names a tool step followed by another step.
    """
    from opencode_memoryd.extract.rules import directives

    out: list[str] = []
    keys = [s.key for s in sc.sessions]
    out += [f"session {k} is defined twice" for k in sorted({k for k in keys
                                                               if keys.count(k) > 1})]
    for s in sc.sessions:
        if s.project not in sc.projects:
            out.append(f"session {s.key}: unknown project {s.project}")
        if s.day not in sc.days_back:
            out.append(f"session {s.key}: day {s.day} has no days_back")
    for f in sc.facts.values():
        if f.said_in not in keys:
            out.append(f"fact {f.key}: unknown session {f.said_in}")
            continue
        if (f.scope == "project") != (f.project is not None) or f.scope not in ("project",
                                                                              "user"):
            out.append(f"fact {f.key}: scope {f.scope} with project {f.project}")
        if f.project is not None and sc.session(f.said_in).project != f.project:
            out.append(f"fact {f.key}: said in another project's session")
        found = [d for t in sc.session(f.said_in).turns for d in directives(t.text)]
        if (f.memory, f.scope) not in found:
            out.append(f"fact {f.key}: rules mode does not store {f.memory!r} ({f.scope}) "
                       f"from session {f.said_in}; it stores {found}")
        if f.superseded_by is not None and f.superseded_by not in sc.facts:
            out.append(f"fact {f.key}: superseded by unknown fact {f.superseded_by}")
    for s, i, c in sc.checks():
        where = f"session {s.key} turn {i + 1} check {c.kind}"
        if c.kind not in KINDS:
            out.append(f"{where}: unknown kind (one of {', '.join(KINDS)})")
        if c.kind == "start" and i != 0:
            out.append(f"{where}: a start check belongs to the first turn")
        if c.kind in ("action", "error"):
            steps = s.turns[i].steps
            n = c.after_step
            if n is None or not 0 <= n < len(steps) - 1 or "tool" not in steps[n]:
                out.append(f"{where}: after_step must name a tool step followed by another")
        for need in c.needs:
            if need not in sc.facts:
                out.append(f"{where}: unknown fact {need}")
                continue
            if sc.day_of(need) >= s.day:
                out.append(f"{where}: fact {need} is not said before day {s.day}")
            retired = sc.retired_on(need)
            if retired is not None and retired[1] < s.day:
                out.append(f"{where}: fact {need} is {retired[0]} by day {s.day}")
            f = sc.facts[need]
            if f.project is not None and f.project != s.project:
                out.append(f"{where}: fact {need} is another project's")
    return out


def load(path: Path = SCENARIO) -> Scenario:
    """Read and check the scenario file.

    Raises:
        ValueError: the file has problems (all of them in the message).
    """
    sc = parse(json.loads(path.read_text()))
    found = problems(sc)
    if found:
        raise ValueError(f"{path}: " + "; ".join(found))
    return sc


def body_text(value: Any) -> str:
    """Every string of a decoded request body (system, user parts, tool calls and results,
    the tools list), joined with newlines: where a memory sits does not matter."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return "\n".join(body_text(v) for v in value.values())
    if isinstance(value, list):
        return "\n".join(body_text(v) for v in value)
    return ""


def added_parts(text: str) -> list[tuple[str, str]]:
    """The parts opencode-memoryd added to a request's text, as (kind, text) in order:
    ``context`` (the session's block), ``recall`` (a user message's part), and any later
    kind that uses the same marker lines."""
    return [(m.group(1), m.group(0)) for m in PART.finditer(text)]
