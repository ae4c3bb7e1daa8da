"""A memory is dated by the message it was said in: the block, ``show``, ``list`` and the
page show that date, not when it was stored; rules-mode relative time words become it."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from conftest import ACME, cli, cli_json, write_config
from opencode_memoryd.capture.writer import write_memories
from opencode_memoryd.config.loader import load_config
from opencode_memoryd.config.paths import store_dir
from opencode_memoryd.models import Memory, utc_from_ms
from opencode_memoryd.store.edge import EdgeStore


@pytest.fixture
def cfg(tmp_path: Path, sample_db: Path) -> Path:
    return write_config(tmp_path / "cfg.toml", f"""
[opencode]
settle_seconds = 0
db_paths = ["{sample_db}"]
[extraction]
mode = "rules"
""")


def _message_times(db: Path) -> dict[str, int]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return {mid: int(t) for mid, t in conn.execute(
            "SELECT id, json_extract(data, '$.time.created') FROM message")}


def test_a_backfill_dates_each_memory_by_its_message_everywhere(
        cfg: Path, sample_db: Path) -> None:
    cli_json("--config", str(cfg), "maintain", "--all", "--db", str(sample_db))
    memories = cli_json("--config", str(cfg), "list")
    times = _message_times(sample_db)
    facts = [m for m in memories if m["type"] not in ("project-brief", "session-summary")]
    assert facts
    today = datetime.now(UTC).date().isoformat()
    for m in facts:
        said = utc_from_ms(min(times[i] for i in m["message_ids"]))
        assert m["said_at"] == said.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        assert m["said_at"][:10] != today  # the sample was written days before any run
    block = str(cli_json("--config", str(cfg), "context", "--dir", ACME)["text"])
    for m in facts:
        if m["scope"] == "project" and m["project_root"] == ACME:
            assert any(line.startswith(f"- {m['said_at'][:10]}: ") and m["content"][:20] in line
                       for line in block.splitlines()), m["content"]
    assert f"- {today}: " not in block
    code, out = cli("--config", str(cfg), "show", facts[0]["id"])
    assert code == 0 and f"said:      {facts[0]['said_at']}" in out
    code, out = cli("--config", str(cfg), "list")
    assert code == 0 and f"{facts[0]['id']}  {facts[0]['said_at'][:10]}  [" in out


def test_a_payload_without_said_at_is_dated_by_created_at() -> None:
    m = Memory(id="x", content="We use pnpm.", type="project", scope="project",
               project_id="p", project_root="/p", session_id="s", message_ids=["m"],
               source="rules", created_at=datetime(2025, 3, 1, tzinfo=UTC),
               updated_at=datetime(2026, 11, 1, tzinfo=UTC))
    payload = m.to_payload()
    assert payload["said_at"] is None
    del payload["said_at"]
    assert Memory.from_payload(payload).said == datetime(2025, 3, 1, tzinfo=UTC)


def test_rules_memories_get_their_relative_time_words_resolved(
        cfg: Path, isolated_env: dict[str, str]) -> None:
    said = datetime(2026, 11, 20, 8, 30, tzinfo=UTC)
    store = EdgeStore(store_dir(load_config(cfg, isolated_env), isolated_env))
    try:
        write_memories(store, [
            {"content": "The staging DB was reset last night, so seed data is gone.",
             "type": "project", "scope": "project", "message_ids": ["msg_1"],
             "source": "rules"},
            {"content": "This morning we moved to uv.", "type": "project",
             "scope": "project", "message_ids": ["msg_unknown"], "source": "rules"},
        ], session_id="ses_1", project_key="p1", project_root="/srv/p1",
            message_times={"msg_1": int(said.timestamp() * 1000)},
            now=datetime(2026, 11, 27, tzinfo=UTC), near_duplicate_similarity=0.9)
        stored = {m.content: m for m in store.scroll()}
    finally:
        store.close()
    assert set(stored) == {"The staging DB was reset on 2026-11-19, so seed data is gone.",
                           "We moved to uv."}
    dated = stored["The staging DB was reset on 2026-11-19, so seed data is gone."]
    assert dated.said_at == said and dated.said == said
    assert stored["We moved to uv."].said_at is None
