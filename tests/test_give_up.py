"""A chunk that fails the same way again and again is given up, not retried forever: the
rules capture its directives, the session's later turns go on, `status` and `doctor` say
so, and `maintain --retry-failed` extracts it again. The tokens of failed calls count.
Through the CLI against the fake server (real HTTP) and a real OpenCode database."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from conftest import cli, cli_json, write_config
from fake_openai import FakeOpenAI, Reply, Status
from opencode_memoryd.state.db import StateDB
from opencode_writer import OpenCodeWriter

LINE = re.compile(r"^\[(msg_\w+)\] (user|assistant|tool): (.*)$", re.MULTILINE)
DIR = "/tmp/projects/giveup"
POISON = "remember that deploys happen on Fridays. " + "This sentence pads the turn. " * 40
LATER = "Service s002 listens on port 20002."


class Model:
    """A scripted model that answers the turn with the deploy rule with the same refusal
    every time while ``broken``, and one memory per user line otherwise."""

    def __init__(self) -> None:
        self.broken = True

    def __call__(self, body: dict[str, Any]) -> Any:
        prompt = "\n".join(str(m["content"]) for m in body["messages"] if m["role"] == "user")
        users = [(mid, text) for mid, role, text in LINE.findall(prompt) if role == "user"]
        if self.broken and any("deploys happen" in text for _, text in users):
            return Reply("Sorry, I can't help with that.", tokens_in=800, tokens_out=3000)
        return {"memories": [
            {"content": "Deploys happen on Fridays." if "deploys" in text else text,
             "type": "project", "scope": "project", "message_ids": [mid]}
            for mid, text in users], "more": False}


def setup(sample_db: Path, tmp_path: Path, fake: FakeOpenAI) -> Path:
    w = OpenCodeWriter(sample_db)
    sid = w.new_session(project_id="c" * 40, directory=DIR, worktree=DIR)
    w.append_turn(sid, POISON, "Noted. " * 80)
    w.append_turn(sid, LATER, "Noted. " * 80)
    w.close()
    return write_config(tmp_path / "llm.toml", f"""
[extraction]
mode = "llm"
max_chunk_tokens = 500
[llm]
base_url = "{fake.base_url}"
model = "test-model"
api_key_env = ""
timeout_seconds = 5
max_retries = 0
""")


def maintain(cfg: Path, db: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    code, out = cli("--config", str(cfg), "maintain", "--dir", DIR, "--db", str(db),
                    "--json", *extra)
    return code, json.loads(out)


def contents(cfg: Path, db: Path) -> list[str]:
    return sorted(m["content"] for m in cli_json("--config", str(cfg), "list", "--dir", DIR,
                                                 "--db", str(db)))


def doctor_check(cfg: Path, name: str) -> dict[str, Any]:
    _code, out = cli("--config", str(cfg), "doctor", "--json")
    return next(c for c in json.loads(out)["checks"] if c["name"] == name)


def test_identical_failures_give_the_chunk_up_and_retry_failed_brings_it_back(
        sample_db: Path, tmp_path: Path, state_db: Path) -> None:
    model = Model()
    with FakeOpenAI(responder=model) as fake:
        cfg = setup(sample_db, tmp_path, fake)
        for run in (1, 2):
            code, report = maintain(cfg, sample_db)
            assert code == 1, f"run {run}"
            session = report["sessions"][0]
            assert session["error"].startswith("bad_reply: ")
            # the tokens of the refused answer are counted, not 0/0
            assert (session["tokens_in"], session["tokens_out"]) == (800, 3000)
            assert contents(cfg, sample_db) == []  # the later turn waits behind it
        status = cli_json("--config", str(cfg), "status")
        assert status["state"]["chunks_failing"] == 1
        assert status["state"]["failed_tokens_out"] == 6000
        assert doctor_check(cfg, "llm-given-up")["status"] == "ok"

        # the third identical failure gives it up: rules capture, the session moves on
        code, report = maintain(cfg, sample_db)
        assert code == 0, report
        assert report["totals"]["given_up"] == 1
        assert contents(cfg, sample_db) == ["Deploys happen on Fridays.", LATER]
        memories = cli_json("--config", str(cfg), "list", "--dir", DIR, "--db",
                            str(sample_db))
        assert {m["content"]: m["source"] for m in memories} == {
            "Deploys happen on Fridays.": "rules", LATER: "llm"}
        status = cli_json("--config", str(cfg), "status")
        assert status["state"]["chunks_given_up"] == 1
        assert status["state"]["chunks_failing"] == 0
        (given_up,) = status["llm"]["given_up"]
        assert given_up["failures"] == 3 and given_up["reason"].startswith("bad_reply: ")
        code, text = cli("--config", str(cfg), "status")
        assert "1 chunk(s) given up" in text and "--retry-failed" in text
        check = doctor_check(cfg, "llm-given-up")
        assert check["status"] == "warn" and "--retry-failed" in check["fix"]

        # nothing more to do: no call
        calls = len(fake.chat_requests)
        code, report = maintain(cfg, sample_db)
        assert code == 0 and report["totals"]["llm_calls"] == 0
        assert len(fake.chat_requests) == calls

        # after the fix, the given-up chunk is extracted again on demand
        model.broken = False
        code, report = maintain(cfg, sample_db, "--retry-failed")
        assert code == 0, report
        (retried,) = report["retried"]
        assert retried["error"] is None and retried["llm_calls"] == 1
        assert "deploys happen" in json.dumps(fake.chat_requests[-1])
        # the model's fact is the one the rules stored: merged, not duplicated
        assert contents(cfg, sample_db) == ["Deploys happen on Fridays.", LATER]
        status = cli_json("--config", str(cfg), "status")
        assert status["state"]["chunks_given_up"] == 0 and status["llm"]["given_up"] == []
        code, report = maintain(cfg, sample_db, "--retry-failed")
        assert code == 0 and report["retried"] == []


def test_failures_of_the_endpoint_never_give_a_chunk_up(
        sample_db: Path, tmp_path: Path, state_db: Path) -> None:
    with FakeOpenAI() as fake:
        cfg = setup(sample_db, tmp_path, fake)
        for _ in range(4):
            fake.script(Status(500, body="model crashed", usage=(50, 700)))
            code, report = maintain(cfg, sample_db)
            assert code == 1 and report["sessions"][0]["error"].startswith("server: ")
        status = cli_json("--config", str(cfg), "status")
        assert status["state"]["chunks_given_up"] == 0
        assert status["state"]["chunks_failing"] == 0
        assert status["state"]["failed_tokens_out"] == 4 * 700
        assert contents(cfg, sample_db) == []


def test_give_up_can_be_turned_off(sample_db: Path, tmp_path: Path) -> None:
    with FakeOpenAI(responder=Model()) as fake:
        cfg = setup(sample_db, tmp_path, fake)
        cfg.write_text(cfg.read_text().replace("max_chunk_tokens = 500",
                                               "max_chunk_tokens = 500\n"
                                               "max_identical_failures = 0"))
        for _ in range(4):
            assert maintain(cfg, sample_db)[0] == 1
        assert cli_json("--config", str(cfg), "status")["state"]["chunks_given_up"] == 0


def test_the_daily_budget_sees_the_tokens_of_failed_calls(tmp_path: Path) -> None:
    state = StateDB(tmp_path / "state.db")
    try:
        state.failures.record_failed_call("bad_reply", 100, 2900, "2030-01-02T03:00:00.000Z")
        state.failures.record_failed_call("cut_off", 0, 0, "2030-01-02T04:00:00.000Z")  # nothing
        assert state.outbox.tokens_since("2030-01-02T00:00:00.000Z") == 3000
        assert state.outbox.tokens_since("2030-01-03T00:00:00.000Z") == 0
        counts = state.outbox.counts()
        assert (counts["failed_tokens_in"], counts["failed_tokens_out"]) == (100, 2900)
    finally:
        state.close()


def test_status_shows_the_structured_output_mode_that_works(
        sample_db: Path, tmp_path: Path) -> None:
    with FakeOpenAI(responder=Model(), reject_json_schema=True) as fake:
        cfg = setup(sample_db, tmp_path, fake)
        model_fixed = Model()
        model_fixed.broken = False
        fake.responder = model_fixed
        code, report = maintain(cfg, sample_db)
        assert code == 0, report
        modes = [(b.get("response_format") or {}).get("type") for b in fake.chat_requests]
        assert modes[:2] == ["json_schema", "json_object"]
        assert set(modes[2:]) == {"json_object"}  # negotiated once, then remembered
        (mode,) = cli_json("--config", str(cfg), "status")["llm"]["modes"]
        assert (mode["base_url"], mode["model"], mode["json_mode"]) == (
            fake.base_url, "test-model", "json_object")
        code, text = cli("--config", str(cfg), "status")
        assert f"structured:  json_object for {fake.base_url} (model test-model): " \
               "json_schema refused: HTTP 500" in text
        check = doctor_check(cfg, "llm-endpoint")
        assert check["status"] == "ok"
        assert "structured output: json_object, since the endpoint refused json_schema" \
            in check["detail"]
        # --retry-failed forgets the mode: the next call negotiates again
        assert maintain(cfg, sample_db, "--retry-failed")[0] == 0
        assert cli_json("--config", str(cfg), "status")["llm"]["modes"] == []
        w = OpenCodeWriter(sample_db)
        sid = w.conn.execute("SELECT id FROM session WHERE directory=?", (DIR,)).fetchone()[0]
        w.append_turn(sid, "Service s003 listens on port 20003.", "Noted.")
        w.close()
        before = len(fake.chat_requests)
        assert maintain(cfg, sample_db)[0] == 0
        modes = [(b.get("response_format") or {}).get("type")
                 for b in fake.chat_requests[before:]]
        assert modes == ["json_schema", "json_object"]


def test_a_chunk_that_grows_while_it_fails_is_still_the_same_chunk(
        sample_db: Path, tmp_path: Path) -> None:
    with FakeOpenAI(responder=Model()) as fake:
        cfg = setup(sample_db, tmp_path, fake)
        cfg.write_text(cfg.read_text().replace("max_chunk_tokens = 500",
                                               "max_chunk_tokens = 6000"))
        w = OpenCodeWriter(sample_db)
        sid = w.conn.execute("SELECT id FROM session WHERE directory=?", (DIR,)).fetchone()[0]
        for run in range(3):
            code, report = maintain(cfg, sample_db)
            if run < 2:
                assert code == 1
                # a new turn joins the failing chunk (one chunk holds them all)
                w.append_turn(sid, f"Service s1{run}0 listens on port 2010{run}.", "Noted.")
        w.close()
        assert code == 0 and report["totals"]["given_up"] == 1
        status = cli_json("--config", str(cfg), "status")
        assert status["state"]["chunks_given_up"] == 1
        assert status["state"]["chunks_failing"] == 0
        assert contents(cfg, sample_db) == ["Deploys happen on Fridays."]
