"""No fact is dropped for want of room: chunks are split on turn boundaries and extracted
again when an answer hits the memory cap or the token cap; the rules are a floor under the
model. Through `maintain` against the fake server (real HTTP) and a real OpenCode database."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conftest import cli, cli_json, write_config
from fake_openai import FakeOpenAI
from opencode_memoryd.capture.chunks import split_on_turns, turn_starts
from opencode_memoryd.models import TranscriptLine
from opencode_writer import OpenCodeWriter

LINE = re.compile(r"^\[(msg_\w+)\] (user|assistant|tool): (.*)$", re.MULTILINE)
CAP = re.compile(r"Return at most (\d+) memories")
PROJECT = "backlog"
DIR = f"/tmp/projects/{PROJECT}"


def user_prompt(body: dict[str, Any]) -> str:
    return "\n".join(str(m["content"]) for m in body["messages"] if m["role"] == "user")


def user_lines(body: dict[str, Any]) -> list[tuple[str, str]]:
    return [(mid, text) for mid, role, text in LINE.findall(user_prompt(body))
            if role == "user"]


def fact_model(body: dict[str, Any]) -> dict[str, Any]:
    """A scripted model: every user line is one fact; it returns at most as many as the
    prompt allows, and says when it had more."""
    facts = user_lines(body)
    m = CAP.search(user_prompt(body))
    assert m, "the prompt states the cap"
    cap = int(m.group(1))
    return {"memories": [{"content": text, "type": "project", "scope": "project",
                          "message_ids": [mid]} for mid, text in facts[:cap]],
            "more": len(facts) > cap}


def fact(i: int) -> str:
    return f"Service s{i:03d} listens on port {20000 + i}."


def backlog(db: Path, n: int, text: Callable[[int], str] = fact) -> str:
    w = OpenCodeWriter(db)
    sid = w.new_session(project_id="b" * 40, directory=DIR, worktree=DIR, title="backlog")
    for i in range(n):
        w.append_turn(sid, text(i), "Noted.")
    w.close()
    return sid


def llm_config(tmp_path: Path, fake: FakeOpenAI, extraction: str = "", llm: str = "") -> Path:
    return write_config(tmp_path / "llm.toml", f"""
[extraction]
mode = "llm"
{extraction}
[llm]
base_url = "{fake.base_url}"
model = "test-model"
api_key_env = ""
timeout_seconds = 5
max_retries = 0
{llm}
""")


def stored(cfg: Path, db: Path) -> list[str]:
    return [m["content"] for m in cli_json("--config", str(cfg), "list", "--dir", DIR,
                                           "--db", str(db))]


def test_a_backlog_of_one_fact_per_turn_keeps_every_fact_once(
        sample_db: Path, tmp_path: Path) -> None:
    n = 258
    backlog(sample_db, n)
    with FakeOpenAI(responder=fact_model) as fake:
        cfg = llm_config(tmp_path, fake)
        code, out = cli("--config", str(cfg), "maintain", "--dir", DIR, "--db",
                        str(sample_db), "--json")
        assert code == 0, out
        report = json.loads(out)
        contents = stored(cfg, sample_db)
        assert len(contents) == n, f"{n - len(contents)} facts dropped"
        assert sorted(contents) == sorted(fact(i) for i in range(n))
        calls = len(fake.chat_requests)
        assert report["totals"]["llm_calls"] == calls > 2
        # every call the model answered within its cap, or was split further
        for body in fake.chat_requests:
            assert len(user_lines(body)) >= 1
        # nothing is read twice
        code, out = cli("--config", str(cfg), "maintain", "--dir", DIR, "--db",
                        str(sample_db), "--json")
        assert code == 0 and json.loads(out)["totals"]["llm_calls"] == 0
        assert len(fake.chat_requests) == calls
        assert len(stored(cfg, sample_db)) == n


def test_a_cut_off_answer_splits_the_chunk_instead_of_failing(
        sample_db: Path, tmp_path: Path) -> None:
    n = 40
    backlog(sample_db, n)
    with FakeOpenAI(responder=fact_model) as fake:
        # room for 100 memories, but only ~300 tokens of answer: about ten facts
        cfg = llm_config(tmp_path, fake, "max_memories_per_chunk = 100",
                         "max_output_tokens = 300")
        code, out = cli("--config", str(cfg), "maintain", "--dir", DIR, "--db",
                        str(sample_db), "--json")
        assert code == 0, out
        assert all(b["max_tokens"] == 300 for b in fake.chat_requests)
        sizes = [len(user_lines(b)) for b in fake.chat_requests]
        assert sizes[0] == n and len(sizes) > 3  # cut off, then halves and quarters
        assert sorted(stored(cfg, sample_db)) == sorted(fact(i) for i in range(n))
        report = json.loads(out)
        assert report["sessions"][0]["error"] is None


def test_the_rules_catch_a_directive_the_model_missed(sample_db: Path,
                                                      tmp_path: Path) -> None:
    backlog(sample_db, 2, lambda i: ["remember that the staging database listens on "
                                     "port 5433", "What does the build script do?"][i])
    with FakeOpenAI() as fake:  # a model that finds nothing
        cfg = llm_config(tmp_path, fake)
        code, out = cli("--config", str(cfg), "maintain", "--dir", DIR, "--db",
                        str(sample_db))
        assert code == 0, out
        memories = cli_json("--config", str(cfg), "list", "--dir", DIR, "--db",
                            str(sample_db))
        assert [(m["content"], m["source"]) for m in memories] == [
            ("The staging database listens on port 5433.", "rules")]


def test_a_directive_the_model_holds_is_not_added_again(sample_db: Path,
                                                        tmp_path: Path) -> None:
    backlog(sample_db, 1, lambda i: "remember that the staging database listens on port 5433")

    def paraphrase(body: dict[str, Any]) -> dict[str, Any]:
        (mid, _text), = user_lines(body)
        return {"memories": [{"content": "The project's staging database listens on port "
                                         "5433.", "type": "project", "scope": "project",
                              "message_ids": [mid]}], "more": False}

    with FakeOpenAI(responder=paraphrase) as fake:
        cfg = llm_config(tmp_path, fake)
        assert cli("--config", str(cfg), "maintain", "--dir", DIR, "--db",
                   str(sample_db))[0] == 0
        memories = cli_json("--config", str(cfg), "list", "--dir", DIR, "--db",
                            str(sample_db))
        assert [(m["content"], m["source"]) for m in memories] == [
            ("The project's staging database listens on port 5433.", "llm")]


def tl(mid: str, role: str) -> TranscriptLine:
    return TranscriptLine(mid, role, "x")  # type: ignore[arg-type]


@pytest.mark.parametrize(("roles", "cut"), [
    (["u1", "a1", "u2", "a2"], 2),
    (["u1", "a1", "t1", "u2", "a2", "u3", "a3"], 3),
    (["a0", "u1", "a1", "u2"], 1),
    (["u1", "u2", "u3", "u4"], 2),
])
def test_chunks_split_on_turn_boundaries(roles: list[str], cut: int) -> None:
    lines = [tl(f"msg_{r}", {"u": "user", "a": "assistant", "t": "tool"}[r[0]])
             for r in roles]
    halves = split_on_turns(lines)
    assert halves is not None
    first, second = halves
    assert len(first) == cut and first + second == lines
    assert second[0].role == "user"


def test_one_turn_cannot_be_split() -> None:
    lines = [tl("msg_u1", "user"), tl("msg_a1", "assistant"), tl("msg_a1", "tool")]
    assert turn_starts(lines) == [0]
    assert split_on_turns(lines) is None
