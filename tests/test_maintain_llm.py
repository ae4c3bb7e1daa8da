"""`maintain` in LLM mode against an OpenAI-compatible fake server on 127.0.0.1 (real HTTP)."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import ACME, cli, cli_json, marks, write_config
from fake_openai import FakeOpenAI, Hang, Reply, Status
from opencode_writer import OpenCodeWriter

LINE = re.compile(r"^\[(msg_\w+)\] (user|assistant|tool): (.*)$", re.MULTILINE)
WEB_CLI = "ses_dfec4032affe4TNn4bUt9e26HR"


def user_prompt(body: dict[str, Any]) -> str:
    """The user message of a recorded chat request."""
    return "\n".join(str(m["content"]) for m in body["messages"] if m["role"] == "user")


def remember_responder(body: dict[str, Any]) -> dict[str, Any]:
    """A scripted model: one memory per user line that contains "remember"."""
    memories = []
    for mid, role, text in LINE.findall(user_prompt(body)):
        if role == "user" and "remember" in text.lower():
            fact = re.sub(r"(?i)^.*?remember:?\s*(that\s+)?", "", text).strip()
            memories.append({"content": f"The project rule: {fact}", "type": "project",
                             "scope": "project", "message_ids": [mid]})
    return {"memories": memories}


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(responder=remember_responder) as f:
        yield f


def llm_only_config(path: Path, base_url: str) -> Path:
    """An LLM-mode config for the endpoint at ``base_url``: extraction alone (the
    summaries' own model calls are tested in test_summaries.py), no retries."""
    return write_config(path, f"""
[opencode]
settle_seconds = 0
[summaries]
session_summaries = false
project_brief = false
[extraction]
mode = "llm"
[llm]
base_url = "{base_url}"
model = "test-model"
api_key_env = "TEST_LLM_KEY"
timeout_seconds = 2
max_retries = 0
""")


@pytest.fixture
def llm_config(tmp_path: Path, fake: FakeOpenAI) -> Path:
    return llm_only_config(tmp_path / "llm.toml", fake.base_url)


def run(cfg: Path, db: Path, *extra: str) -> tuple[int, str]:
    return cli("--config", str(cfg), "maintain", "--dir", ACME, "--db", str(db), *extra)


def test_llm_mode_stores_cited_memories_and_second_run_calls_nothing(
        sample_db: Path, llm_config: Path, fake: FakeOpenAI) -> None:
    code, out = run(llm_config, sample_db, "--json")
    assert code == 0, out
    report = json.loads(out)
    calls = len(fake.chat_requests)
    assert calls == report["totals"]["llm_calls"] >= 1
    memories = cli_json("--config", str(llm_config), "list", "--dir", ACME,
                        "--db", str(sample_db))
    assert len(memories) == 2
    assert {m["source"] for m in memories} == {"llm"}
    assert report["totals"]["tokens_in"] > 0
    code, out = run(llm_config, sample_db, "--json")
    assert code == 0
    assert json.loads(out)["totals"]["llm_calls"] == 0
    assert len(fake.chat_requests) == calls


def test_prompt_holds_only_unread_turns(sample_db: Path, llm_config: Path,
                                        fake: FakeOpenAI) -> None:
    assert run(llm_config, sample_db)[0] == 0
    old_ids = {mid for body in fake.chat_requests for mid, _, _ in
               LINE.findall(user_prompt(body))}
    w = OpenCodeWriter(sample_db)
    ids = w.append_turn(WEB_CLI, "remember that the CDN is cdn.acme.test", "Noted.")
    w.close()
    before = len(fake.chat_requests)
    assert run(llm_config, sample_db)[0] == 0
    new_requests = fake.chat_requests[before:]
    assert len(new_requests) == 1
    seen = {mid for mid, _, _ in LINE.findall(user_prompt(new_requests[0]))}
    assert seen == {ids["user"], ids["assistant"]}
    assert not seen & old_ids


def test_no_llm_call_for_chunks_without_human_text(sample_db: Path, llm_config: Path,
                                                   fake: FakeOpenAI) -> None:
    code, _ = cli("--config", str(llm_config), "maintain", "--dir",
                  "/tmp/projects/sample/scratch", "--db", str(sample_db), "--json")
    assert code == 0
    # one real question, one empty session: exactly one call
    assert len(fake.chat_requests) == 1


SECRET_KEY = "sk-proj-" + "Zq7" * 12 + "T9x"
SECRET_PW = "Hx9" + "kQ2v" * 4
# The kinds the black-box attack got through (tests/test_maintain_llm_secrets.py plants
# every kind of the redaction corpus).
PROSE_PW = "Tr0ub4dor" + "&3xQ!"
CLI_PW = "Summer" + "16!vfqk"
HF_TOKEN = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYzAbCdEfGh"
BARE = "Q2x9" + "Lm4Rt7Vb1Nc8Kp3Zw6Hj5Fd0"
SPLIT = ("sk-ant-api03-" + "Xy7Qw2Er5Ty8Ui1Op4As6Df9Gh3Jk", "0Lz2Xc5Vb8Nm1Qw4Er7Ty0Ui3Op6AA")


def test_planted_secrets_never_reach_server_store_or_log(
        sample_db: Path, llm_config: Path, fake: FakeOpenAI, isolated_env: dict[str, str],
        state_db: Path) -> None:
    w = OpenCodeWriter(sample_db)
    w.append_turn(WEB_CLI, f"remember that the deploy key is {SECRET_KEY} and "
                  f"the db url is postgres://app:{SECRET_PW}@db.acme.test/app",
                  f"Stored OPENAI_API_KEY={SECRET_KEY}", bash=f"export TOKEN={SECRET_KEY}")
    w.append_turn(WEB_CLI, f"the db password is {PROSE_PW}, and the key is\n{SPLIT[0]}\n"
                  f"{SPLIT[1]}", f"I used {HF_TOKEN} and set it to {BARE}.",
                  bash=f"sshpass -p {CLI_PW} ssh deploy@host", bash_output=f"token {HF_TOKEN}")
    w.close()
    code, out = run(llm_config, sample_db, "--json")
    assert code == 0, out
    assert sum(json.loads(out)["totals"]["redactions"] for _ in [0]) >= 8
    wire = json.dumps([r.json for r in fake.requests])
    for secret in (SECRET_KEY, SECRET_PW, PROSE_PW, CLI_PW, HF_TOKEN, BARE, *SPLIT):
        assert secret not in wire, secret
    assert "[REDACTED" in wire
    listed = json.dumps(cli_json("--config", str(llm_config), "list"))
    assert any("deploy key" in m["content"] for m in json.loads(listed))
    assert SECRET_KEY not in listed and SECRET_PW not in listed
    state_dir = Path(isolated_env["XDG_STATE_HOME"]) / "opencode-memoryd"
    for f in state_dir.rglob("*"):
        if f.is_file():
            blob = f.read_bytes()
            for secret in (SECRET_KEY, SECRET_PW, PROSE_PW, CLI_PW, HF_TOKEN, BARE, *SPLIT):
                assert secret.encode() not in blob, (f, secret)
    store_dir = Path(isolated_env["XDG_DATA_HOME"]) / "opencode-memoryd"
    for f in store_dir.rglob("*"):
        if f.is_file() and f.stat().st_size < 50_000_000:
            assert SECRET_KEY.encode() not in f.read_bytes(), f


@pytest.mark.parametrize("behaviour", [
    pytest.param(Reply("this is not json {"), id="garbage"),
    pytest.param(Reply({"memories": "nope"}), id="wrong-shape"),
    pytest.param(Status(500), id="500"),
    pytest.param(Status(429, retry_after=1), id="429"),
    pytest.param(Hang(5), id="hung"),
])
def test_bad_reply_stores_nothing_and_keeps_the_mark(
        sample_db: Path, llm_config: Path, fake: FakeOpenAI, state_db: Path,
        behaviour: Any) -> None:
    fake.script(behaviour)
    code, out = cli("--config", str(llm_config), "maintain", "--dir", ACME, "--db",
                    str(sample_db), "--json")
    assert code == 1
    report = json.loads(out)
    failed = [r for r in report["sessions"] if r["error"]]
    assert len(failed) == 1
    sid = failed[0]["session_id"]
    assert sid not in marks(state_db)
    stored = cli_json("--config", str(llm_config), "list")
    assert all(sid not in m["session_ids"] for m in stored)
    # the next run, with a healthy server, picks the session up
    code, out = run(llm_config, sample_db, "--json")
    assert code == 0
    assert sid in marks(state_db)


def test_kill_between_reply_and_store_write_then_rerun(
        sample_db: Path, llm_config: Path, fake: FakeOpenAI, state_db: Path,
        isolated_env: dict[str, str]) -> None:
    env = {**os.environ, **isolated_env, "OPENCODE_MEMORYD_FAULT": "after_record",
           "PYTHONPATH": os.pathsep.join(sys.path)}
    args = [sys.executable, "-m", "opencode_memoryd", "--config", str(llm_config), "maintain",
            "--dir", ACME, "--db", str(sample_db)]
    proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == -9, proc.stderr
    calls = len(fake.chat_requests)
    assert calls == 1
    env.pop("OPENCODE_MEMORYD_FAULT")
    proc = subprocess.run([*args, "--json"], env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["totals"]["llm_calls"] == len(fake.chat_requests) - calls
    replayed = sum(r["replayed_items"] for r in report["sessions"])
    assert replayed == 1
    memories = cli_json("--config", str(llm_config), "list")
    contents = [m["content"] for m in memories]
    assert len(contents) == len(set(contents)) == 2
    # every chat request was for a different chunk: no turn was sent twice
    sent = [mid for body in fake.chat_requests for mid, role, _ in
            LINE.findall(user_prompt(body)) if role == "user"]
    assert len(sent) == len(set(sent))


def test_context_length_error_splits_the_input(sample_db: Path, llm_config: Path,
                                               fake: FakeOpenAI) -> None:
    too_long = {"error": {"message": "This model's maximum context length is 10 tokens",
                          "type": "invalid_request_error", "code": "context_length_exceeded"}}
    fake.script(Status(400, body=too_long))
    code, out = run(llm_config, sample_db, "--json")
    assert code == 0, out
    report = json.loads(out)
    # the first session's chunk was split in two and both halves were extracted
    first = report["sessions"][0]
    assert first["llm_calls"] == 3 and first["error"] is None
    memories = cli_json("--config", str(llm_config), "list", "--dir", ACME,
                        "--db", str(sample_db))
    assert len(memories) == 2


def test_an_unreachable_endpoint_stops_the_run_at_the_first_session(
        sample_db: Path, tmp_path: Path, state_db: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    with FakeOpenAI() as gone:
        base_url = gone.base_url  # nothing listens there once it is closed
    cfg = llm_only_config(tmp_path / "down.toml", base_url)
    code, _ = cli("--config", str(cfg), "maintain", "--all", "--db", str(sample_db))
    err = capsys.readouterr().err
    assert code != 0
    assert err.count("is unreachable") == 1 and base_url in err, err
    assert "is the server (e.g. Ollama) running" in err
    with sqlite3.connect(state_db) as c:
        (summary,) = c.execute("SELECT summary FROM runs WHERE command='maintain'").fetchone()
    assert json.loads(summary)["failed"] == 1  # not one failure per session
