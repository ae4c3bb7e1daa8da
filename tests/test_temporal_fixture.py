"""Time in what the user said, on a database the genuine OpenCode 1.18.33 wrote.

``opencode-temporal.db`` (``tests/fixtures/make_phrasings.py --scenario temporal``, scenario
``tests/fixtures/temporal_scenario.py``) plants temporary instructions beside lasting ones,
announcements and news of the moment, conversational openers and relative time words. In
rules mode and in LLM mode (a scripted model that proposes each turn's instruction with its
time words dropped), no temporary instruction is stored, every lasting one is, each memory
is dated by its message, and "last night" / "this morning" become that message's date.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from conftest import FIXTURES, cli_json, llm_section, write_config
from fake_openai import FakeOpenAI
from llm_corpus_models import transcript_lines
from opencode_memoryd.models import iso_utc, utc_from_ms

TEMPORAL_DB = FIXTURES / "opencode-temporal.db"
TEMPORAL = json.loads((FIXTURES / "opencode-temporal.db.manifest.json").read_text())
NOT_FACTS = {"project-brief", "session-summary"}
#: The model's proposal for each planted or negative turn, by its text.
LASTING = {t["text"]: t["lasting"] for t in [*TEMPORAL["planted"], *TEMPORAL["negatives"]]
           if t.get("lasting")}


def _said_ms(db: Path) -> dict[str, int]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return {mid: int(t) for mid, t in conn.execute(
            "SELECT id, json_extract(data, '$.time.created') FROM message")}


def _expected(db: Path) -> dict[str, str]:
    """Each planted memory as stored (relative time words made the message's date), by the
    message id it comes from."""
    said = _said_ms(db)
    out: dict[str, str] = {}
    for p in TEMPORAL["planted"]:
        day = utc_from_ms(said[p["message_id"]]).date()
        text = p["memories"][0]["content"]
        text = text.replace("last night", f"on {day - timedelta(days=1)}")
        text = text.replace("This morning", f"On {day}")
        out[p["message_id"]] = text
    return out


@pytest.fixture
def temporal_db(tmp_path: Path) -> Path:
    dst = tmp_path / "opencode" / "opencode.db"
    dst.parent.mkdir(parents=True)
    shutil.copyfile(TEMPORAL_DB, dst)
    return dst


def _run(cfg: Path, db: Path) -> list[dict[str, Any]]:
    report = cli_json("--config", str(cfg), "maintain", "--all", "--db", str(db))
    assert report["totals"]["failed"] == 0, report
    memories: list[dict[str, Any]] = cli_json("--config", str(cfg), "list")
    return [m for m in memories if m["type"] not in NOT_FACTS]


def _check(facts: list[dict[str, Any]], db: Path) -> None:
    expected = _expected(db)
    said = _said_ms(db)
    assert sorted(m["content"] for m in facts) == sorted(expected.values())
    for m in facts:
        assert m["message_ids"] == [next(k for k, v in expected.items() if v == m["content"])]
        assert m["said_at"] == iso_utc(utc_from_ms(said[m["message_ids"][0]]))


def test_the_manifest_plants_every_kind() -> None:
    kinds = [n["kind"] for n in TEMPORAL["negatives"]]
    assert kinds.count("temporary") >= 5 and kinds.count("news") >= 2
    assert TEMPORAL["opencode_version"] == "1.18.33"
    assert len(TEMPORAL["planted"]) >= 9


def test_rules_mode_stores_what_lasts_dated_by_its_message(
        temporal_db: Path, config_file: Path) -> None:
    _check(_run(config_file, temporal_db), temporal_db)


def _lasting_responder(body: dict[str, Any]) -> dict[str, Any]:
    """A model that proposes each user turn's instruction without its time words."""
    memories = [{"content": LASTING[text], "type": "project", "scope": "project",
                 "section": "conventions", "message_ids": [mid]}
                for mid, role, text in transcript_lines(body)
                if role == "user" and text in LASTING]
    return {"memories": memories, "more": False}


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(responder=_lasting_responder) as f:
        yield f


def test_llm_mode_refuses_every_temporary_proposal(
        temporal_db: Path, tmp_path: Path, fake: FakeOpenAI) -> None:
    cfg = write_config(tmp_path / "llm.toml", f"""
[opencode]
settle_seconds = 0
[summaries]
session_summaries = false
project_brief = false
[extraction]
mode = "llm"
{llm_section(fake)}
""")
    facts = _run(cfg, temporal_db)
    proposed = {m["content"] for b in fake.chat_requests
                for m in _lasting_responder(b)["memories"]}
    temporary = {n["lasting"] for n in TEMPORAL["negatives"] if n["kind"] == "temporary"}
    assert temporary <= proposed  # the model did propose each one
    stored = {m["content"] for m in facts}
    assert not stored & temporary
    # every lasting instruction is stored (the model's words or the rules floor's)
    for p in TEMPORAL["planted"]:
        if p.get("lasting"):
            assert p["lasting"] in stored, p["lasting"]
