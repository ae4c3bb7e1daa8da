"""One bad row costs its own content, never the session's later turns nor any other
session: JSON nested deeper than the decoder goes, numbers too long to convert, values of
the wrong JSON type, NUL bytes, in a 1.x part or message and in a v2 ``session_message``
row. A fuzz test of the row decoder: whatever a row holds, decoding it and building its
turns and transcript raises nothing."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import (
    FIXTURES,
    cli,
    cli_json,
    marks,
    read_marks,
    start_daemon,
    wait_until,
    write_config,
)
from opencode_memoryd.conversation.rows import MessageRow, PartRow, decode_object
from opencode_memoryd.conversation.transcript import (
    chunk_turns,
    compaction_request,
    human_text,
    readable,
    transcript_lines,
)
from opencode_memoryd.conversation.turns import drop_fork_copies, finished_prefix, group_turns
from opencode_memoryd.logs import LOG_FILE_NAME
from opencode_memoryd.models import FACT_TYPES
from opencode_memoryd.source.storages.v2rows import message_from_v2

PNPM = "We always use pnpm, never npm."
PY39 = "The data-pipeline service must stay compatible with Python 3.9."
#: The user message behind "Our API base path is /api/v2." and its session.
API_MSG = "msg_2013c1282001ZlI10YZqYJoGKk"
API_SESSION = "ses_dfec4032affe4TNn4bUt9e26HR"

#: 1,100 levels: deeper than ``json.loads`` goes (it raises ``RecursionError``).
DEEP = '{"type": "text", "text": ' + '{"a": ' * 1100 + "1" + "}" * 1100 + "}"
DEEP_LIST = "[" * 1100 + "]" * 1100

V2_DB = FIXTURES / "opencode-v2-sample.db"
V2 = json.loads((FIXTURES / "opencode-v2-sample.db.manifest.json").read_text())
V2_DIRECTIVES = {d["user_message_id"]: d for d in V2["remember_directives"]}


def _facts(config: Path) -> set[str]:
    return {m["content"] for m in cli_json("--config", str(config), "list")
            if m["type"] in FACT_TYPES}


def _newest_messages(db: Path, table: str = "message") -> dict[str, str]:
    """The newest row id of every session that has one (1.x: top-level sessions only)."""
    order = "time_created" if table == "message" else "seq"
    top = (" AND m.session_id IN (SELECT id FROM session WHERE parent_id IS NULL)"
           if table == "message" else "")
    with sqlite3.connect(db) as c:
        return {sid: mid for sid, mid in c.execute(
            f"SELECT m.session_id, m.id FROM {table} m WHERE m.{order} = (SELECT max({order}) "
            f"FROM {table} WHERE session_id = m.session_id){top}")}


def _text_part(db: Path) -> str:
    with sqlite3.connect(db) as c:
        (part,) = c.execute("SELECT id FROM part WHERE message_id = ? AND data LIKE "
                            "'%\"type\":\"text\"%'", (API_MSG,)).fetchone()
    return str(part)


#: Bad rows: the value written into the /api/v2 directive's text part (``part``) or user
#: message (``message``), and whether the row is counted corrupt. The directive is lost
#: with them, except where the message's row alone is odd and its text part is intact.
BAD_ROWS: dict[str, tuple[str, str, bool]] = {
    "deep-part": ("part", DEEP, True),
    "deep-list-part": ("part", DEEP_LIST, True),
    "deep-message": ("message", '{"role": "user", "x": ' + DEEP_LIST + "}", True),
    "huge-integer": ("part", '{"type": "text", "text": "x", "n": ' + "9" * 5000 + "}", True),
    "huge-float": ("part", '{"type": "text", "text": "x", "n": 1e999999}', False),
    "text-not-a-string": ("part", '{"type": "text", "text": 12345}', False),
    "type-a-list": ("part", '{"type": ["text"], "text": "Our API base path is /api/v2."}',
                    False),
    "nul-escaped": ("part", '{"type": "text", "text": "Our API \\u0000 path"}', False),
    "message-wrong-types": ("message", '{"role": 5, "time": [], "parentID": {}}', False),
    "time-a-string": ("message", '{"role": "user", "time": {"created": "yesterday"}}',
                      False),
}
KEEPS_THE_DIRECTIVE = {"time-a-string"}


@pytest.mark.parametrize("case", sorted(BAD_ROWS))
def test_a_bad_row_costs_only_its_own_content(
        case: str, config_file: Path, sample_db: Path, state_db: Path) -> None:
    table, value, corrupt = BAD_ROWS[case]
    row = _text_part(sample_db) if table == "part" else API_MSG
    with sqlite3.connect(sample_db) as c:
        c.execute(f"UPDATE {table} SET data = ? WHERE id = ?", (value, row))
    code, out = cli("--config", str(config_file), "maintain", "--all", "--db",
                    str(sample_db), "--json")
    assert code == 0, out
    report = json.loads(out)
    assert report["failed"] == 0 and report["totals"]["sessions"] == 13
    assert report["totals"]["corrupt_rows"] == int(corrupt)
    # the /api/v2 directive alone is lost, if anything
    assert _facts(config_file) == {PNPM, PY39} | (
        {"Our API base path is /api/v2."} if case in KEEPS_THE_DIRECTIVE else set())
    assert {s: m[1] for s, m in marks(state_db).items()} == {
        s: m for s, m in _newest_messages(sample_db).items() if s in marks(state_db)}
    assert API_SESSION in marks(state_db)
    assert "Traceback" not in (state_db.parent / LOG_FILE_NAME).read_text()


def test_nul_bytes_in_a_text_column_cost_nothing_else(
        config_file: Path, sample_db: Path, state_db: Path) -> None:
    part = _text_part(sample_db)
    raw = b'{"type": "text", "text": "Our API\x00 base path"}'
    with sqlite3.connect(sample_db) as c:
        c.execute(f"UPDATE part SET data = CAST(x'{raw.hex()}' AS TEXT) WHERE id = ?", (part,))
    code, out = cli("--config", str(config_file), "maintain", "--all", "--db",
                    str(sample_db), "--json")
    assert code == 0, out
    assert json.loads(out)["failed"] == 0
    assert {PNPM, PY39} <= _facts(config_file)
    assert marks(state_db)[API_SESSION][1] == _newest_messages(sample_db)[API_SESSION]


def test_a_deep_v2_row_costs_only_its_own_content(
        config_file: Path, tmp_path: Path, state_db: Path) -> None:
    db = tmp_path / "v2" / "opencode.db"
    db.parent.mkdir()
    shutil.copyfile(V2_DB, db)
    lost, *kept = V2["remember_directives"]
    with sqlite3.connect(db) as c:
        c.execute("UPDATE session_message SET data = ? WHERE id = ?",
                  ('{"text": ' + DEEP_LIST + "}", lost["user_message_id"]))
    code, out = cli("--config", str(config_file), "maintain", "--all", "--db", str(db),
                    "--json")
    assert code == 0, out
    report = json.loads(out)
    assert report["failed"] == 0 and report["totals"]["corrupt_rows"] == 1
    cited = {mid for m in cli_json("--config", str(config_file), "list")
             for mid in m["message_ids"]}
    assert cited == {d["user_message_id"] for d in kept}
    newest = _newest_messages(db, "session_message")
    assert marks(state_db)[lost["session_id"]][1] == newest[lost["session_id"]]


# -- fuzz: the row decoder and what is built on it ---------------------------------------

#: keys OpenCode's rows use, so generated rows reach the code paths that read them
_KEYS = ["type", "text", "role", "time", "created", "completed", "finish", "error", "tool",
         "state", "status", "input", "output", "metadata", "exit", "content", "parentID",
         "synthetic", "summary", "agent", "callID", "name", "structured", "message", "auto"]
_WORDS = ["user", "assistant", "text", "tool", "reasoning", "stop", "tool-calls",
          "completed", "error", "compaction", "file", "subtask", "remember that x is y"]
_scalars = st.one_of(st.none(), st.booleans(), st.integers(),
                     st.integers(min_value=10**30, max_value=10**40), st.floats(),
                     st.text(max_size=20), st.sampled_from(_WORDS))
_values = st.recursive(_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4),
    st.dictionaries(st.sampled_from(_KEYS) | st.text(max_size=5), inner, max_size=6)),
    max_leaves=30)
_objects = st.dictionaries(st.sampled_from(_KEYS), _values, max_size=8)
#: column values: JSON of a row, JSON nested past the decoder's depth, other text, bytes
_raw = st.one_of(
    _objects.map(json.dumps),
    st.integers(min_value=900, max_value=3000).map(lambda n: '{"a":' * n + "1" + "}" * n),
    st.integers(min_value=900, max_value=3000).map(lambda n: "[" * n + "]" * n),
    st.text(max_size=50), st.binary(max_size=50), st.none(), st.integers())


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(rows=st.lists(st.tuples(st.sampled_from(["user", "assistant", "idle", "tool"]), _raw,
                               st.lists(_raw, max_size=3), st.integers(0, 10**13)),
                     min_size=1, max_size=5))
def test_fuzz_no_row_makes_the_decoder_raise(
        rows: list[tuple[str, Any, list[Any], int]]) -> None:
    v1: list[MessageRow] = []
    v2: list[MessageRow] = []
    for i, (kind, raw, parts, t) in enumerate(rows):
        data, corrupt = decode_object(raw)
        assert isinstance(data, dict) and (data == {} or not corrupt)
        decoded = [decode_object(p) for p in parts]
        v1.append(MessageRow(f"msg_{i:03d}", "ses", t, t, data,
                             [PartRow(f"prt_{i}_{j}", d, c) for j, (d, c) in enumerate(decoded)],
                             corrupt=corrupt, rowid=i + 1))
        v2.append(message_from_v2(f"msg_{i:03d}", "ses", kind, i, t, t, raw))
    for messages in (v1, v2):
        turns = group_turns(drop_fork_copies(messages, 0))
        finished_prefix(turns, now_ms=10**13, abandoned_ms=1000, settle_ms=0)
        transcript_lines(turns, tool_output_chars=100)
        chunk_turns(turns, max_tokens=50, tool_output_chars=100)
        for m in messages:
            human_text(m)
            readable(m, tool_output_chars=50)
            compaction_request(m)


# -- a real daemon: a bad row costs its own content, the worker goes on ---------------

#: The session behind PY39.
PY39_SESSION = "ses_dfec3e0e7ffemMTQpWH5L89esM"
#: A session with no directive ("Changelog summary").
PLAIN_SESSION = "ses_dfec3906affe7mNz9acnHRC1kP"


@pytest.mark.slow
def test_the_daemon_reads_past_deep_rows_and_isolates_a_failing_session(
        tmp_path: Path, isolated_env: dict[str, str], state_db: Path) -> None:
    db = Path(isolated_env["XDG_DATA_HOME"]) / "opencode" / "opencode.db"
    db.parent.mkdir(parents=True)
    shutil.copyfile(FIXTURES / "opencode-sample.db", db)
    newest = _newest_messages(db)
    with sqlite3.connect(db) as c:
        c.execute("UPDATE part SET data = ? WHERE id = ?", (DEEP, _text_part(db)))
        c.execute("UPDATE message SET data = ? WHERE id = ?",
                  (DEEP_LIST, newest[PY39_SESSION]))
        # a time that is not a number (OpenCode writes integers): the session cannot be
        # read; it fails alone, again and again, and every other session is captured
        c.execute("UPDATE message SET time_created = 'soon' WHERE id = ?",
                  (newest.pop(PLAIN_SESSION),))
    cfg = write_config(tmp_path / "daemon.toml", """
[extraction]
mode = "rules"
[daemon]
quiet_period_seconds = 0.3
poll_interval_seconds = 0.2
""")
    proc = start_daemon(cfg, isolated_env)

    def failing() -> list[dict[str, Any]]:
        info = cli_json("--config", str(cfg), "status")["daemon"]
        return list(info["failing"]["sessions"])

    try:
        assert wait_until(lambda: {s: m for s, m in read_marks(state_db).items()
                                   if s != PLAIN_SESSION} == newest, timeout=60)
        # retried with backoff: its second attempt failed too, and the daemon runs on
        assert wait_until(lambda: any(f["attempts"] >= 2 for f in failing()), timeout=60)
        (f,) = failing()
        assert f["session_id"] == PLAIN_SESSION and not f["given_up"]
        assert f["last_error"].startswith("internal: ValueError")
        assert _facts(cfg) == {PNPM, PY39} and proc.poll() is None
    finally:
        proc.kill()
        proc.wait()
    log = (state_db.parent / LOG_FILE_NAME).read_text()
    assert "corrupt_part_row" in log and "session_crashed" in log
    assert "worker_crashed" not in log and "internal_error" not in log


def test_a_session_that_fails_unexpectedly_fails_alone(
        config_file: Path, sample_db: Path, state_db: Path) -> None:
    """A time that is not a number (OpenCode writes integers): reading the session fails
    in a way nothing foresaw; it fails alone, and every other session is captured."""
    with sqlite3.connect(sample_db) as c:
        c.execute("UPDATE message SET time_created = 'soon' WHERE id = (SELECT id FROM "
                  "message WHERE session_id = ? ORDER BY time_created DESC LIMIT 1)",
                  (PY39_SESSION,))
    code, out = cli("--config", str(config_file), "maintain", "--all", "--db",
                    str(sample_db), "--json")
    assert code == 1, out
    report = json.loads(out)
    (failed,) = [r for r in report["sessions"] if r["error"]]
    assert failed["session_id"] == PY39_SESSION
    assert failed["error"].startswith("internal: ValueError")
    assert report["totals"]["sessions"] == 13
    assert _facts(config_file) == {PNPM, "Our API base path is /api/v2."}
    assert "session_crashed" in (state_db.parent / LOG_FILE_NAME).read_text()
