"""The scenarios of ``bench/delivery.py`` (``bench/data/delivery_scenario*.json``) are
well-formed: every fact is what rules mode stores from the session that says it, every
check needs a fact said earlier and still true, and the bench finds a memory and the parts
it scores wherever they sit in a request body."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import _delivery_data as dd

BLOCK = ("<!-- opencode-memoryd context -->\n## Memory\n- \"We use pnpm.\"\n"
         "<!-- opencode-memoryd context end 0123456789abcdef -->")
ACTION = ("<!-- opencode-memoryd action -->\n- \"Every migration ships a downgrade.\"\n"
          "<!-- opencode-memoryd action end fedcba9876543210 -->")


@pytest.mark.parametrize("path", dd.SCENARIOS, ids=lambda p: p.stem)
def test_the_scenario_spans_days_projects_and_every_step_kind(path: Path) -> None:
    sc = dd.load(path)
    assert len(sc.projects) >= 3 and len(sc.sessions) >= 8
    assert len({s.day for s in sc.sessions}) >= 3
    assert {c.kind for _, _, c in sc.checks()} == set(dd.KINDS)
    facts = sc.facts.values()
    assert {f.scope for f in facts} == {"project", "user"}
    assert any(f.superseded_by for f in facts) and any(f.forgotten_after_day for f in facts)
    for f in facts:
        if f.superseded_by:  # a correction said on a later day, of the same scope
            later = sc.facts[f.superseded_by]
            assert sc.day_of(later.key) > sc.day_of(f.key)
            assert (later.scope, later.project) == (f.scope, f.project)
    for name, cases in sc.shims.items():
        assert name and all({"args", "out", "code"} <= set(c) for c in cases)


def test_a_broken_scenario_is_reported_with_each_problem() -> None:
    sc = dd.load()
    fact = sc.facts["api-port"]
    wrong_fact = replace(fact, memory="The API server listens on port 9999.")
    session = next(s for s in sc.sessions if s.key == "d3-api")
    turn = session.turns[1]
    early = replace(turn, checks=(dd.Check("error", ("api-uv",), 0),
                                  dd.Check("later", ("no-such-fact",))))
    broken = replace(sc, facts=sc.facts | {"api-port": wrong_fact},
                     sessions=tuple(replace(s, turns=(s.turns[0], early, *s.turns[2:]))
                                    if s.key == "d3-api" else s for s in sc.sessions))
    found = dd.problems(broken)
    assert any("api-port" in p and "does not store" in p for p in found), found
    assert any("unknown kind" in p for p in found), found
    assert any("unknown fact no-such-fact" in p for p in found), found
    assert dd.problems(sc) == []


def test_a_fact_said_too_late_or_retired_is_not_a_need(tmp_path: Path) -> None:
    doc = json.loads(dd.SCENARIO.read_text())
    for s in doc["sessions"]:
        if s["key"] == "d2-api":  # day 2 needs a fact said on day 2 and one superseded then
            s["turns"][0]["checks"] = [{"kind": "start", "needs": ["web-pnpm"]},
                                       {"kind": "ask", "needs": ["api-uv"]}]
        if s["key"] == "d4-api":
            s["turns"][1]["checks"] = [{"kind": "ask", "needs": ["api-poetry", "api-staging"]}]
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(doc))
    try:
        dd.load(path)
    except ValueError as exc:
        message = str(exc)
    else:
        raise AssertionError("load accepted a scenario with problems")
    assert "fact api-uv is not said before day 2" in message
    assert "fact web-pnpm is another project's" in message
    assert "fact api-poetry is superseded by day 4" in message
    assert "fact api-staging is forgotten by day 4" in message


def test_parts_and_memories_are_found_wherever_they_sit_in_the_body() -> None:
    body = {"model": "stub-coder", "messages": [
        {"role": "system", "content": "You are OpenCode.\n" + BLOCK},
        {"role": "user", "content": [{"type": "text", "text": "run it"},
                                     {"type": "text", "text": ACTION}]},
        {"role": "assistant", "tool_calls": [{"id": "c1", "function": {
            "name": "bash", "arguments": "{\"command\": \"npm install\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "added 3 packages\n" + ACTION},
    ]}
    text = dd.body_text(body)
    assert "We use pnpm." in text and "npm install" in text
    assert [k for k, _ in dd.added_parts(text)] == ["context", "action", "action"]
    assert dd.added_parts(text)[0][1] == BLOCK
    cut = text.replace("action end fedcba9876543210", "action")  # an unclosed part counts not
    assert [k for k, _ in dd.added_parts(cut)] == ["context"]


@pytest.mark.parametrize("path", dd.SCENARIOS, ids=lambda p: p.stem)
def test_the_shims_answer_each_scripted_command_and_pass_the_rest_on(
        tmp_path: Path, path: Path) -> None:
    import subprocess

    from delivery import write_shims

    sc = dd.load(path)
    write_shims(tmp_path, sc.shims | {"no-such-program-here": []}, "/usr/bin:/bin")
    for name, cases in sc.shims.items():
        for case in cases:
            done = subprocess.run(["bash", "-c", f"{tmp_path / name} {case['args']}"],
                                  capture_output=True, text=True, timeout=30)
            assert (done.stdout, done.returncode) == (case["out"] + "\n", case["code"])
    missing = subprocess.run([tmp_path / "no-such-program-here", "x"], capture_output=True,
                             text=True, timeout=30)
    assert missing.returncode == 127 and "command not found" in missing.stderr
