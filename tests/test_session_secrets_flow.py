"""A secret given once with its key word is hidden wherever its session shows it again.

A real OpenCode-shaped database (the 1.18.33 sample, one session added with
``tests/opencode_writer.py``) holds values the rules only recognise by their key word
(``.env`` lines, command-line passwords, passwords in prose, URLs, a key split over two
string literals). The session shows each value bare before its key-worded turn (an
assistant reply and a tool output of an earlier turn of the same read), after it (the
reply and the tool output of the same turn), in a compaction summary, and in a later turn
that a second ``maintain`` reads. The fake model (real HTTP on 127.0.0.1) knows the
values and proposes memories holding them bare, one of them refused (logged at
``debug``). No value may be
found in any request the model received, the store, the state file, the log, or the
history answers through the CLI, the control-socket routes and the MCP tool.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import ACME, MANIFEST, cli, cli_json, llm_section, write_config
from fake_openai import FakeOpenAI
from opencode_memoryd.compose import App
from opencode_memoryd.config.loader import load_config
from opencode_memoryd.redaction.engine import redact
from opencode_memoryd.serve.mcp.tool import dispatch, to_text
from opencode_memoryd.usecases.service import call, open_local
from opencode_writer import OpenCodeWriter
from opencode_writer_v2 import V2Writer
from redaction_corpus import CASES
from redaction_gen import Gen
from test_maintain_llm import LINE, user_prompt

ACME_ID = next(p["project_id"] for p in MANIFEST["projects"] if p["name"] == "acme-web")
#: A key the user splits over two string literals; the session later shows it whole.
SPLIT_KEY = "s" + "k-proj-" + Gen(2207).s(48)
#: A value given away only in a compaction summary, shown bare in a later run's turn.
SUMMARY_SECRET = Gen(2208).s(18)


def _values() -> list[tuple[str, str]]:
    """``(key-worded snippet, value)``: per kind, up to two user-text cases whose value the
    rules miss when it stands bare."""
    chosen: list[tuple[str, str]] = []
    per_kind: dict[str, int] = {}
    for case in CASES:
        if case.role != "user" or len(case.secrets) != 1:
            continue
        value = case.secrets[0]
        bare = f"I will use {value} from now on"
        learnable = len(value) >= 10 or (len(value) >= 6 and not value.isalpha())
        if (learnable and not any(c.isspace() for c in value) and value in redact(bare).text
                and per_kind.get(case.kind, 0) < 2 and "remember" not in case.text.lower()):
            per_kind[case.kind] = per_kind.get(case.kind, 0) + 1
            chosen.append((case.text, value))
    return chosen


VALUES = _values()
SECRETS = [v for _, v in VALUES] + [SPLIT_KEY]


def knowing_responder(body: dict[str, Any]) -> dict[str, Any]:
    """A model that remembers each "remember" line, and that knows the secrets of the
    deploy session: it proposes them bare there, once citing the user's line, once citing
    no line of the chunk."""
    memories = []
    for n, (mid, role, text) in enumerate(LINE.findall(user_prompt(body))):
        if role == "user" and "remember" in text:
            memories.append({"content": f"Rule from the user: {text[:120]}",
                             "type": "project", "scope": "project", "message_ids": [mid]})
        if role == "user" and re.match(r"remember (this for the|to rotate|the client)", text):
            value = SECRETS[n % len(SECRETS)]
            memories += [
                {"content": f"The deploy uses {value} as its credential", "type": "project",
                 "scope": "project", "message_ids": [mid]},
                {"content": f"Use {value} everywhere", "type": "project",
                 "scope": "project", "message_ids": ["msg_not_in_this_chunk"]},
            ]
    return {"memories": memories}


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(responder=knowing_responder) as f:
        yield f


@pytest.fixture
def llm_config(tmp_path: Path, fake: FakeOpenAI) -> Path:
    return write_config(tmp_path / "llm.toml", f"""
[opencode]
settle_seconds = 0
[summaries]
session_summaries = true
project_brief = false
[extraction]
mode = "llm"
tool_output_chars = 4000
{llm_section(fake)}
[log]
level = "debug"
""")


def _forms(secret: str) -> set[bytes]:
    """The bytes a secret may take in a file: as is, and escaped inside JSON."""
    return {secret.encode(), json.dumps(secret)[1:-1].encode()}


def _leaks(places: dict[str, bytes]) -> list[tuple[str, str]]:
    return [(where, s[:10]) for s in [*SECRETS, SUMMARY_SECRET]
            for where, blob in places.items()
            if any(form in blob for form in _forms(s))]


def _files(env: dict[str, str]) -> dict[str, bytes]:
    """The state file, the log and the store: every file we wrote."""
    out = {}
    for name in ("XDG_STATE_HOME", "XDG_DATA_HOME"):
        for f in (Path(env[name]) / "opencode-memoryd").rglob("*"):
            if f.is_file():
                out[str(f)] = f.read_bytes()
    return out


def compact(w: OpenCodeWriter, sid: str, summary: str) -> None:
    """A compaction as OpenCode 1.x writes it: the request, then the summary message."""
    ms = w.now_ms()
    req = w._insert_message(sid, {"role": "user", "time": {"created": ms}, "agent": "build"},
                            ms)
    w._insert_part(sid, req, {"type": "compaction", "auto": False})
    ms = w.now_ms()
    mid = w._insert_message(sid, {"role": "assistant", "parentID": req, "agent": "compaction",
                                  "summary": True, "time": {"created": ms, "completed": ms}},
                            ms)
    w._insert_part(sid, mid, {"type": "text", "text": summary})


def _maintain(cfg: Path, db: Path) -> dict[str, Any]:
    code, out = cli("--config", str(cfg), "maintain", "--dir", ACME, "--db", str(db),
                    "--json")
    assert code == 0, out
    return dict(json.loads(out))


def test_a_secret_given_once_is_hidden_in_every_artifact_of_its_session(
        sample_db: Path, llm_config: Path, fake: FakeOpenAI,
        isolated_env: dict[str, str]) -> None:
    assert len(VALUES) >= 8 and len({v for v in SECRETS}) == len(SECRETS)
    w = OpenCodeWriter(sample_db)
    sid = w.new_session(project_id=ACME_ID, directory=ACME, title="Deploy settings")
    every = ", ".join(SECRETS)
    # an earlier turn shows every value bare, before the turns that give them away
    w.append_turn(sid, "remember that we deploy from the release branch",
                  f"The old notes list these: {every}", bash="cat notes/old.txt",
                  bash_output=every + "\n")
    for snippet, value in VALUES:
        w.append_turn(sid, f"remember this for the deploy: {snippet}",
                      f"Saved. I will pass {value} to the deploy script.",
                      bash="printenv | tail -1", bash_output=f"{value}\n")
    w.append_turn(sid, f'remember the client setup: api_key = "{SPLIT_KEY[:14]}" + '
                       f'"{SPLIT_KEY[14:]}"', f"The client now uses {SPLIT_KEY}.",
                  bash="grep -r api_key src", bash_output=f"src/client.py: {SPLIT_KEY}\n")
    compact(w, sid, f"## Objective\n- deploy with the credentials {every}\n"
                    f"- `export STAGING_TOKEN={SUMMARY_SECRET}` before the staging deploy")
    w.close()
    first = _maintain(llm_config, sample_db)
    sent_first = len(fake.chat_requests)

    w = OpenCodeWriter(sample_db)  # later turns, read by a later run
    for value in [*SECRETS, SUMMARY_SECRET]:
        w.append_turn(sid, f"remember to rotate {value} next week",
                      f"Noted, {value} gets rotated next week.")
    w.close()
    second = _maintain(llm_config, sample_db)

    # the premises: both runs asked the model, with key-worded secrets redacted, and the
    # model's refused proposals were logged at debug
    assert sent_first >= 1 and len(fake.chat_requests) > sent_first
    wire = json.dumps(fake.chat_requests).encode()
    assert wire.count(b"[REDACTED:") >= 3 * len(SECRETS)
    assert first["totals"]["redactions"] and second["totals"]["redactions"]

    listed = cli_json("--config", str(llm_config), "list", "--dir", ACME, "--db",
                      str(sample_db))
    assert any("rotate [REDACTED:" in m["content"] for m in listed)
    # (the compaction summary's items are not the user's words: none is stored as a memory,
    # and the summary still goes through the history answers checked below)
    files = _files(isolated_env)
    log = b"".join(blob for name, blob in files.items() if ".log" in name)
    assert b"memory_refused" in log

    db = str(sample_db)
    history = {
        "cli messages": cli_json("history", "messages", sid, "--limit", "200", "--db", db),
        "cli search": cli_json("history", "search", "rotate", "--dir", ACME, "--db", db),
        "cli compactions": cli_json("history", "compactions", sid, "--db", db),
    }
    # the config the store was built with (its embedder)
    app = App(config=load_config(llm_config, isolated_env), env=isolated_env)
    with open_local(app) as svc:
        def route(name: str, payload: dict[str, Any]) -> Any:
            return call(svc, name, json.loads(json.dumps({**payload, "db": db})))

        history["route history_messages"] = route("history_messages",
                                                  {"session_id": sid, "limit": 200})
        history["route history_search"] = route("history_search",
                                                {"query": "deploy", "directory": ACME})
        for mode, args in (("messages", {"id": sid, "limit": 200}),
                           ("history-search", {"query": "rotate"}),
                           ("compactions", {"id": sid})):
            history[f"mcp {mode}"] = to_text(dispatch({"mode": mode, **args}, route, ACME))
    shown = json.dumps(history)

    places = {"requests": wire, "list": json.dumps(listed).encode(),
              "maintain": json.dumps([first, second]).encode(), **files,
              **{k: json.dumps(v).encode() for k, v in history.items()}}
    leaks = _leaks(places)
    assert not leaks, (len(leaks), sorted({Path(where).name for where, _ in leaks}))
    assert not re.search(r"sk-proj-\w{4}", shown)  # not even the split key's first half
    assert shown.count("rotate [REDACTED:") >= len(SECRETS)  # the later turns are there
    assert "credentials [REDACTED:" in json.dumps(history["cli compactions"])
    with sqlite3.connect(Path(isolated_env["XDG_STATE_HOME"]) / "opencode-memoryd"
                         / "state.db") as c:
        kept = c.execute("SELECT count(*) FROM session_secrets WHERE session_id=?",
                         (sid,)).fetchone()[0]
    assert kept >= len(SECRETS)  # digests of what the session gave away, kept for later runs


def fork(w: OpenCodeWriter, source: str, title: str) -> str:
    """A fork of ``source`` as OpenCode writes one: a new session holding copies of the
    source's messages and parts (new ids, the original ``time_created``)."""
    sid = w.new_session(project_id=ACME_ID, directory=ACME, title=title)
    for mid, ms, data in w.conn.execute(
            "SELECT id, time_created, data FROM message WHERE session_id=? "
            "ORDER BY time_created, id", (source,)).fetchall():
        copy = w._insert_message(sid, json.loads(data), ms)
        for (part,) in w.conn.execute("SELECT data FROM part WHERE message_id=? ORDER BY id",
                                      (mid,)).fetchall():
            w._insert_part(sid, copy, json.loads(part))
    return sid


def test_a_fork_hides_what_its_source_session_gave_away(
        sample_db: Path, llm_config: Path, fake: FakeOpenAI,
        isolated_env: dict[str, str]) -> None:
    snippet, value = VALUES[0]
    w = OpenCodeWriter(sample_db)
    source = w.new_session(project_id=ACME_ID, directory=ACME, title="Deploy")
    w.append_turn(source, f"remember this for the deploy: {snippet}", "Saved.")
    fork_id = fork(w, source, "Deploy (fork #1)")
    w.append_turn(fork_id, f"remember to rotate {value} next week",
                  f"Noted, {value} gets rotated next week.")
    w.close()
    _maintain(llm_config, sample_db)

    wire = json.dumps(fake.chat_requests)
    assert "rotate [REDACTED:" in wire  # the fork's own turn was sent, redacted
    listed = cli_json("--config", str(llm_config), "list", "--dir", ACME, "--db",
                      str(sample_db))
    places = {"requests": wire.encode(), "list": json.dumps(listed).encode(),
              **_files(isolated_env)}
    leaks = [where for where, blob in places.items() if any(f in blob for f in _forms(value))]
    assert not leaks, leaks


def test_history_hides_a_value_given_away_after_an_earlier_answer(
        sample_db: Path, isolated_env: dict[str, str]) -> None:
    """The second answer reads only the messages added since the first (the process keeps
    what it learned), and still hides the bare copy in the first message."""
    snippet, value = VALUES[0]
    db = str(sample_db)
    w = OpenCodeWriter(sample_db)
    sid = w.new_session(project_id=ACME_ID, directory=ACME, title="Deploy")
    w.append_turn(sid, f"which credential does staging use? I think {value}", "Let me check.")
    w.close()
    app = App(config=load_config(None, isolated_env), env=isolated_env)
    with open_local(app) as svc:
        def page() -> str:
            return json.dumps(call(svc, "history_messages", {"session_id": sid, "db": db}))

        assert value in page()  # nothing in the session says it is a secret yet
        w = OpenCodeWriter(sample_db)
        w.append_turn(sid, f"remember this for the deploy: {snippet}", "Saved.")
        w.close()
        again = page()
    assert value not in again
    assert "I think [REDACTED:" in again


def test_a_v2_session_hides_in_a_later_run_what_it_gave_away(
        tmp_path: Path, config_file: Path, isolated_env: dict[str, str]) -> None:
    """The same in ``session_message`` storage, in rules mode: the later turn's directive,
    stored as a memory, and the history page hold no copy of the value."""
    from test_v2_storage import SESSIONS as V2_SESSIONS
    from test_v2_storage import V2_DB

    snippet, value = VALUES[0]
    db = tmp_path / "opencode" / "opencode.db"
    db.parent.mkdir(parents=True)
    db.write_bytes(V2_DB.read_bytes())
    sid = V2_SESSIONS["v2-multiturn"]["id"]
    w = V2Writer(db, pause=0)
    w.append_turn(sid, f"here is the deploy setting: {snippet}", "Saved.")
    w.close()
    cli_json("--config", str(config_file), "maintain", "--all", "--db", str(db))
    w = V2Writer(db, pause=0)
    w.append_turn(sid, f"Remember that {value} is only for the staging deploy.", "Noted.")
    w.close()
    cli_json("--config", str(config_file), "maintain", "--all", "--db", str(db))

    listed = cli_json("--config", str(config_file), "list")
    assert any("is only for the staging deploy" in m["content"] for m in listed)
    page = cli_json("history", "messages", sid, "--limit", "200", "--db", str(db))
    places = {"list": json.dumps(listed).encode(), "history": json.dumps(page).encode(),
              **_files(isolated_env)}
    leaks = [where for where, blob in places.items() if any(f in blob for f in _forms(value))]
    assert not leaks, leaks
