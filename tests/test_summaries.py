"""Session summaries on real OpenCode databases: compaction summaries, the state a stopped
session ended in (rules), a model's summary of it (llm), and the context block's
"Progress and last session"."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import (
    ACME,
    MANIFEST,
    PIPELINE,
    cli,
    cli_json,
    read_marks,
    start_daemon,
    wait_until,
    write_config,
)
from fake_openai import FakeOpenAI
from opencode_memoryd.models import note_id
from opencode_writer import OpenCodeWriter

ACME_KEY = next(p["project_id"] for p in MANIFEST["projects"] if p["worktree"] == ACME)
PIPELINE_KEY = next(p["project_id"] for p in MANIFEST["projects"] if p["worktree"] == PIPELINE)
AUTOCOMPACT = next(s for s in MANIFEST["sessions"] if s["key"] == "ingest-autocompact")
SECRET = "sk-proj-" + "Zq7" * 12 + "T9x"


def bash(command: str, exit_code: int) -> dict[str, Any]:
    out = "ok\n" if exit_code == 0 else "FAILED\n"
    return {"tool": "bash", "state": {
        "status": "completed", "input": {"command": command, "description": "run"},
        "output": out, "title": command, "metadata": {"output": out, "exit": exit_code}}}


def edit(path: str) -> dict[str, Any]:
    return {"tool": "edit", "state": {
        "status": "completed", "output": "", "title": path,
        "input": {"filePath": path, "oldString": "a", "newString": "b"},
        "metadata": {"diff": "-a\n+b\n"}}}


def write(path: str) -> dict[str, Any]:
    return {"tool": "write", "state": {
        "status": "completed", "output": "", "title": path,
        "input": {"filePath": path, "content": "export {}\n"},
        "metadata": {"filepath": path, "exists": False}}}


def summaries(cfg: Path, *args: str) -> list[dict[str, Any]]:
    return [m for m in cli_json("--config", str(cfg), "list", *args)
            if m["type"] == "session-summary"]


def rules_config(tmp_path: Path, idle: float, db: Path | None = None) -> Path:
    dbs = f'db_paths = ["{db}"]\n' if db else ""
    return write_config(tmp_path / f"rules-{idle}.toml",
                        f'[opencode]\nsettle_seconds = 0\n{dbs}[extraction]\nmode = "rules"\n'
                        f'[summaries]\nidle_seconds = {idle}\n')


# -- compaction summaries ------------------------------------------------------------------


def test_each_compaction_summary_is_stored_once_and_never_mined(
        sample_db: Path, config_file: Path) -> None:
    report = cli_json("--config", str(config_file), "maintain", "--all", "--db",
                      str(sample_db))
    stored = summaries(config_file)
    for c in MANIFEST["compactions"]:
        mine = [m for m in stored if m["message_ids"] == [c["summary_message_id"]]]
        assert len(mine) == 1, c
        m = mine[0]
        assert m["id"] == note_id(PIPELINE_KEY, "session-summary",
                                  f"compaction:{c['summary_message_id']}")
        assert m["session_ids"] == [c["session_id"]]
        assert m["section"] == "progress" and m["project_id"] == PIPELINE_KEY
        assert m["basis"] == c["summary_message_id"]
        assert "#" not in m["content"] and "(none)" not in m["content"]
    auto = next(m for m in stored if m["session_ids"] == [AUTOCOMPACT["id"]])
    assert auto["content"].startswith("Objective: Review the partner schema dump.")
    # what OpenCode's model drew from tool output and not from the user's words is left out
    assert "partner_raw and drop_log lack primary keys" not in auto["content"]
    # the session ended with its compaction: the summary is its last word, no state note
    assert [m["id"] for m in stored if AUTOCOMPACT["id"] in m["session_ids"]] == [auto["id"]]
    # no fact is drawn from a summary or from the compaction request
    compaction_ids = {i for c in MANIFEST["compactions"]
                      for i in (c["summary_message_id"], c["request_message_id"])}
    facts = [m for m in cli_json("--config", str(config_file), "list")
             if m["type"] not in ("session-summary", "project-brief")]
    assert facts and not any(set(m["message_ids"]) & compaction_ids for m in facts)
    assert report["totals"]["summaries"] == len(stored)

    again = cli_json("--config", str(config_file), "maintain", "--all", "--db",
                     str(sample_db))
    assert again["totals"]["summaries"] == 0 and again["totals"]["added"] == 0
    assert summaries(config_file) == stored


# -- the state a session stopped in (rules) --------------------------------------------------


def test_a_stopped_session_gets_its_state_from_the_tool_parts(
        sample_db: Path, tmp_path: Path) -> None:
    w = OpenCodeWriter(sample_db)
    sid = w.new_session(project_id=ACME_KEY, directory=ACME, title="Fix the cart total")
    w.append_tool_turn(sid, "make the cart total include tax", [
        edit(f"{ACME}/src/cart.ts"),
        bash("pnpm lint", 1),
        bash("pnpm lint --fix", 0),  # fixes the lint failure: same program and argument
        bash("pnpm test cart", 1),
        bash(f"OPENAI_API_KEY={SECRET} pnpm e2e", 1),
        {"type": "patch", "hash": "0" * 40, "files": [f"{ACME}/src/cart.ts",
                                                      f"{ACME}/package.json"]},
        write(f"{ACME}/src/tax.ts"),
    ])
    last = w.append_turn(sid, "thanks, stop here", "Stopping.")
    w.close()

    waiting = rules_config(tmp_path, 600)
    report = cli_json("--config", str(waiting), "maintain", "--dir", ACME, "--db",
                      str(sample_db))
    assert report["totals"]["turns_read"] >= 2
    assert not [m for m in summaries(waiting) if sid in m["session_ids"]]  # not idle yet

    time.sleep(1.2)
    idle = rules_config(tmp_path, 1)
    report = cli_json("--config", str(idle), "maintain", "--dir", ACME, "--db", str(sample_db))
    assert report["totals"]["summaries"] == 1
    notes = [m for m in summaries(idle) if sid in m["session_ids"]]
    assert len(notes) == 1
    note = notes[0]
    assert note["id"] == note_id(ACME_KEY, "session-summary", f"session:{sid}")
    assert note["message_ids"] == [last["assistant"]] and note["basis"] == last["assistant"]
    assert note["source"] == "rules" and note["section"] == "progress"
    text = note["content"]
    assert text.startswith('Session "Fix the cart total" stopped after the request '
                           '"thanks, stop here".')
    assert "Files changed: src/cart.ts, package.json, src/tax.ts." in text
    assert "`pnpm test cart` (exit 1)" in text
    # named without its environment assignment (the secret is not shown at all)
    assert "`pnpm e2e` (exit 1)" in text and SECRET not in text and "REDACTED" not in text
    assert "pnpm lint" not in text

    again = cli_json("--config", str(idle), "maintain", "--dir", ACME, "--db", str(sample_db))
    assert again["totals"]["summaries"] == 0

    # the session goes on and fixes its tests: the same memory is rewritten
    w = OpenCodeWriter(sample_db)
    fixed = w.append_tool_turn(sid, "run the cart tests again", [bash("pnpm test cart -u", 0)])
    w.close()
    time.sleep(1.2)
    report = cli_json("--config", str(idle), "maintain", "--dir", ACME, "--db", str(sample_db))
    assert report["totals"]["summaries"] == 1
    notes = [m for m in summaries(idle) if sid in m["session_ids"]]
    assert [m["id"] for m in notes] == [note["id"]]
    assert notes[0]["message_ids"] == [fixed["assistant"]]
    assert "pnpm test cart" not in notes[0]["content"]
    assert "pnpm e2e" in notes[0]["content"]


def test_a_session_that_changed_nothing_gets_no_state(sample_db: Path, tmp_path: Path) -> None:
    w = OpenCodeWriter(sample_db)
    sid = w.new_session(project_id=ACME_KEY, directory=ACME, title="Question")
    w.append_turn(sid, "what does the cart module export?", "Two functions.")
    w.close()
    time.sleep(1.2)
    cfg = rules_config(tmp_path, 1)
    cli_json("--config", str(cfg), "maintain", "--dir", ACME, "--db", str(sample_db))
    assert not [m for m in summaries(cfg) if sid in m["session_ids"]]


# -- the context block ------------------------------------------------------------------------


def test_progress_shows_the_newest_summary_of_the_project(
        sample_db: Path, tmp_path: Path) -> None:
    w = OpenCodeWriter(sample_db)
    older = w.new_session(project_id=ACME_KEY, directory=ACME, title="Older work")
    w.append_tool_turn(older, "rename the helper", [edit(f"{ACME}/src/old_helper.ts")])
    newer = w.new_session(project_id=ACME_KEY, directory=ACME, title="Newer work")
    w.append_tool_turn(newer, "add the coupon field", [edit(f"{ACME}/src/coupon.ts"),
                                                       bash("pnpm test coupon", 2)])
    w.close()
    time.sleep(1.2)
    cfg = rules_config(tmp_path, 1, sample_db)
    cli_json("--config", str(cfg), "maintain", "--dir", ACME)
    assert len([m for m in summaries(cfg) if {older, newer} & set(m["session_ids"])]) == 2
    block = cli_json("--config", str(cfg), "context", "--dir", ACME)
    text = block["text"]
    progress = text.split("### Progress and last session\n", 1)[1].split("\n\n", 1)[0]
    assert progress.count("\n- ") + progress.startswith("- ") == 1
    assert "src/coupon.ts" in progress and "`pnpm test coupon` (exit 2)" in progress
    assert "old_helper" not in text


# -- LLM mode ---------------------------------------------------------------------------------


def system_of(body: dict[str, Any]) -> str:
    return next(str(m["content"]) for m in body["messages"] if m["role"] == "system")


def user_of(body: dict[str, Any]) -> str:
    return next(str(m["content"]) for m in body["messages"] if m["role"] == "user")


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    def respond(body: dict[str, Any]) -> Any:
        system = system_of(body)
        if system.startswith("You write the note"):
            if "broken reply" in user_of(body):
                return "this is not json {"
            return {"summary": "Added tax to the cart total in src/cart.ts; the cart tests "
                               "still fail on rounding."}
        return {"memories": []}

    with FakeOpenAI(responder=respond) as f:
        yield f


def llm_config(tmp_path: Path, fake: FakeOpenAI) -> Path:
    return write_config(tmp_path / "llm.toml", f"""
[extraction]
mode = "llm"
[summaries]
idle_seconds = 1
[llm]
base_url = "{fake.base_url}"
model = "test-model"
api_key_env = "TEST_LLM_KEY"
timeout_seconds = 5
max_retries = 0
""")


def test_llm_mode_summarises_a_stopped_session_from_its_transcript_and_state(
        sample_db: Path, tmp_path: Path, fake: FakeOpenAI) -> None:
    w = OpenCodeWriter(sample_db)
    good = w.new_session(project_id=ACME_KEY, directory=ACME, title="Tax")
    w.append_tool_turn(good, f"add tax to the cart total, the key is {SECRET}",
                       [edit(f"{ACME}/src/cart.ts"), bash("pnpm test cart", 1)])
    broken = w.new_session(project_id=ACME_KEY, directory=ACME, title="Other")
    w.append_tool_turn(broken, "broken reply please", [edit(f"{ACME}/src/other.ts")])
    w.close()
    time.sleep(1.2)
    cfg = llm_config(tmp_path, fake)
    code, out = cli("--config", str(cfg), "maintain", "--dir", ACME, "--db", str(sample_db),
                    "--json")
    assert code == 0, out
    asks = [b for b in fake.chat_requests if system_of(b).startswith("You write the note")]
    assert any("broken reply" in user_of(b) for b in asks)
    prompt = next(user_of(b) for b in asks if "add tax to the cart" in user_of(b))
    assert "Files changed: src/cart.ts." in prompt  # the rules' state is given as data
    assert re.search(r"^\[msg_\w+\] user: add tax to the cart total", prompt, re.MULTILINE)
    assert SECRET not in json.dumps(fake.chat_requests)
    stored = summaries(cfg)
    by_session = {s: m for m in stored for s in m["session_ids"]}
    assert by_session[good]["source"] == "llm"
    assert by_session[good]["content"].startswith("Added tax to the cart total")
    # an unusable reply: the session still gets the rules' state
    assert by_session[broken]["source"] == "rules"
    assert "Files changed: src/other.ts." in by_session[broken]["content"]
    calls = len(fake.chat_requests)
    report = cli_json("--config", str(cfg), "maintain", "--dir", ACME, "--db", str(sample_db))
    assert report["totals"]["llm_calls"] == 0 and len(fake.chat_requests) == calls


# -- the daemon ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_daemon_summarises_a_session_once_it_has_been_idle(
        tmp_path: Path, isolated_env: dict[str, str]) -> None:
    data = Path(isolated_env["XDG_DATA_HOME"]) / "opencode"
    data.mkdir(parents=True)
    db = data / "opencode.db"
    db.write_bytes((Path(__file__).parent / "fixtures" / "opencode-sample.db").read_bytes())
    cfg = write_config(tmp_path / "daemon.toml", """
[opencode]
settle_seconds = 0.2
[extraction]
mode = "rules"
[summaries]
idle_seconds = 3
[daemon]
quiet_period_seconds = 0.3
max_wait_seconds = 30
sweep_interval_seconds = 60
poll_interval_seconds = 0.2
""")
    state_db = Path(isolated_env["XDG_STATE_HOME"]) / "opencode-memoryd" / "state.db"
    proc = start_daemon(cfg, isolated_env)
    try:
        assert wait_until(lambda: "ses_dfec43a4cffe5HkHVz7wUC8pgF" in read_marks(state_db),
                          timeout=60)
        w = OpenCodeWriter(db)
        sid = w.new_session(project_id=ACME_KEY, directory=ACME, title="Coupons")
        last = w.append_tool_turn(sid, "add coupons", [edit(f"{ACME}/src/coupon.ts"),
                                                       bash("pnpm test coupon", 1)])
        w.close()
        written = time.monotonic()
        # read soon after its quiet period; summarised only once idle for 3 s
        assert wait_until(lambda: read_marks(state_db).get(sid) == last["assistant"])

        def note() -> list[dict[str, Any]]:
            return [m for m in summaries(cfg) if sid in m["session_ids"]]

        assert wait_until(lambda: bool(note()), timeout=60, interval=0.5)
        assert time.monotonic() - written >= 3
        [m] = note()
        assert "src/coupon.ts" in m["content"] and "`pnpm test coupon` (exit 1)" in m["content"]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_a_session_without_tool_parts_is_not_read_again_for_a_rules_note(
        sample_db: Path) -> None:
    """``may_have_tool_parts`` is the look-up that spares the read: ``False`` only for a
    session none of whose parts is a tool or patch part; an unreadable part and
    ``session_message`` storage count as "may"."""
    from opencode_memoryd.source.reader import OpenCodeDB

    w = OpenCodeWriter(sample_db)
    plain = w.new_session(project_id=ACME_KEY, directory=ACME, title="Question")
    w.append_turn(plain, "what does the cart module export?", "Two functions.")
    tooled = w.new_session(project_id=ACME_KEY, directory=ACME, title="Edit")
    w.append_tool_turn(tooled, "rename the helper", [edit(f"{ACME}/src/old_helper.ts")])
    patched = w.new_session(project_id=ACME_KEY, directory=ACME, title="Patch")
    w.append_tool_turn(patched, "apply it", [{"type": "patch", "files": [f"{ACME}/a.ts"]}])
    broken = w.new_session(project_id=ACME_KEY, directory=ACME, title="Broken")
    turn = w.append_turn(broken, "hello", "Hi.")
    w._commit("INSERT INTO part (id, message_id, session_id, time_created, time_updated, "
              "data) VALUES ('prt_broken', ?, ?, 1, 1, '{not json')",
              (turn["assistant"], broken))
    w.close()
    with OpenCodeDB(sample_db) as db:
        assert not db.may_have_tool_parts(plain, "message")
        assert db.may_have_tool_parts(tooled, "message")
        assert db.may_have_tool_parts(patched, "message")
        assert db.may_have_tool_parts(broken, "message")
        assert db.may_have_tool_parts(plain, "session_message")
