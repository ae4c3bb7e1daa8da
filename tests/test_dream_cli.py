"""Dreams end to end through the real command line: ``dream``, ``dream --dry-run``,
``dream --user``, ``dream --undo``, ``journal`` and ``show`` in-process (the store is
opened and closed by each command), the same commands served by a running daemon, and the
daemon's dream gate (the start-up "catch-up" check) on a real process.

The LLM is the fake OpenAI-compatible server of ``fake_openai`` with a scripted planner;
memories are seeded straight into the embedded store the CLI's config points at.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from conftest import ACME, MANIFEST, PIPELINE, cli, cli_json, start_daemon, wait_until, write_config
from fake_openai import FakeOpenAI
from opencode_memoryd.compose import DAEMON_INFO_FILE, JOURNAL_FILE_NAME, App
from opencode_memoryd.config.loader import load_config
from opencode_memoryd.config.paths import state_dir, store_dir
from opencode_memoryd.dream.journal import DreamJournal
from opencode_memoryd.extract.sections import section_for
from opencode_memoryd.logs import LOG_FILE_NAME
from opencode_memoryd.models import Memory, content_hash, iso_utc, point_id
from opencode_memoryd.store.api import MemoryFilter
from opencode_memoryd.store.edge import EdgeStore

KEYS = {p["worktree"]: p["project_id"] for p in MANIFEST["projects"]}
ACME_KEY = KEYS[ACME]
PIPE_KEY = KEYS[PIPELINE]
T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)

API_MERGED = "The REST API is served under /api/v2 by the gateway, with rate limiting."
EXPECTED_ACME_COUNTS = {"before": 13, "after": 9, "merged": 4, "superseded": 1,
                        "created": 1, "updated": 1, "kept": 7, "rejected_plans": 0,
                        "groups": 3, "groups_deferred": 0, "groups_settled": 0}


def _mem(content: str, *, base: datetime, minutes: int, session: str, msg: str,
         type_: str = "project", scope: str = "project", project: str | None = ACME_KEY,
         id_: str | None = None) -> Memory:
    pkey = None if scope == "user" else project
    root = {ACME_KEY: ACME, PIPE_KEY: PIPELINE}.get(pkey or "")
    t = base + timedelta(minutes=minutes)
    return Memory(
        id=id_ or point_id(scope, pkey, type_, content),  # type: ignore[arg-type]
        content=content, type=type_, scope=scope,  # type: ignore[arg-type]
        project_id=pkey, project_root=root, session_id=session, message_ids=[msg],
        source="llm", created_at=t, updated_at=t, session_ids=[session],
        content_hash=content_hash(content),
    )


def seed_memories(base: datetime) -> dict[str, Memory]:
    """The seed (the memories of tests/test_dream.py, in the sample's real project scopes),
    by name. Ids do not depend on ``base``."""
    m = {
        # acme-web: npm superseded by pnpm, three copies of the test command, two API facts
        "NPM_OLD": _mem("The project uses npm.", base=base, minutes=1, session="ses_1",
                        msg="msg_a1"),
        "NPM_NEW": _mem("The project uses pnpm, never npm.", base=base, minutes=50,
                        session="ses_3", msg="msg_a2"),
        "TESTS_1": _mem("Run the unit tests with `pnpm vitest --run`.", base=base, minutes=2,
                        session="ses_1", msg="msg_d1"),
        "TESTS_2": _mem("Run unit tests with `pnpm vitest --run`.", base=base, minutes=10,
                        session="ses_2", msg="msg_d2"),
        "TESTS_3": _mem("Run the unit tests with `pnpm vitest --run`.", base=base,
                        minutes=20, session="ses_4", msg="msg_d3",
                        id_=str(uuid.UUID(int=0x5EED, version=4))),
        "API_1": _mem("The REST API is served under /api/v2 by the gateway.", base=base,
                      minutes=3, session="ses_1", msg="msg_p1"),
        "API_2": _mem("The gateway serves the REST API with rate limiting.", base=base,
                      minutes=30, session="ses_2", msg="msg_p2"),
        "DB": _mem("The dev database is PostgreSQL 16 on port 5433.", base=base, minutes=4,
                   session="ses_1", msg="msg_o1"),
        "FLAGS": _mem("Feature flags live in config/flags.yaml and are read at startup.",
                      base=base, minutes=5, session="ses_1", msg="msg_o2"),
        "DEPLOY": _mem("Deploys go through GitHub Actions; prod needs manual approval.",
                       base=base, minutes=6, session="ses_1", msg="msg_o3",
                       type_="reference"),
        "DOCS": _mem("Docs are written in Markdown under docs/.", base=base, minutes=7,
                     session="ses_1", msg="msg_o4"),
        "VITE": _mem("The frontend is built with Vite and React 18.", base=base, minutes=8,
                     session="ses_1", msg="msg_o5"),
        "COMMITS": _mem("Commit messages follow Conventional Commits.", base=base, minutes=9,
                        session="ses_1", msg="msg_o6", type_="feedback"),
        # data-pipeline: two near-duplicates (a --dir ACME dream must not touch them)
        "PIPE_1": _mem("The project uses npm.", base=base, minutes=1, session="ses_9",
                       msg="msg_x1", project=PIPE_KEY),
        "PIPE_2": _mem("The project uses npm!", base=base, minutes=2, session="ses_9",
                       msg="msg_x2", project=PIPE_KEY,
                       id_=str(uuid.UUID(int=0xABC, version=4))),
        # the user scope: one duplicate pair, two distinct facts
        "USER_1": _mem("The user prefers concise answers without emoji.", base=base,
                       minutes=3, session="ses_9", msg="msg_u1", type_="feedback",
                       scope="user"),
        "USER_2": _mem("The user prefers concise answers without any emoji.", base=base,
                       minutes=40, session="ses_8", msg="msg_u2", type_="feedback",
                       scope="user"),
        "USER_TZ": _mem("The user works in the Europe/Berlin time zone.", base=base,
                        minutes=41, session="ses_8", msg="msg_u3", type_="user",
                        scope="user"),
        "USER_REVIEW": _mem("The user reviews every diff before committing.", base=base,
                            minutes=42, session="ses_8", msg="msg_u4", type_="user",
                            scope="user"),
    }
    return m


ID = {name: m.id for name, m in seed_memories(T0).items()}
#: The scopes of the seed, as the daemon's log names them.
SCOPES = {ACME_KEY, PIPE_KEY, "user"}
MERGED_ID = point_id("project", ACME_KEY, "project", API_MERGED)
ACME_RETIRED = {ID["NPM_OLD"], ID["TESTS_2"], ID["TESTS_3"], ID["API_1"], ID["API_2"]}


def _op(op: str, ids: list[str], new: str | None = None, sup: list[str] | None = None,
        reason: str = "scripted") -> dict[str, Any]:
    return {"op": op, "memory_ids": ids, "new_content": new, "superseded_ids": sup or [],
            "reason": reason}


def planner(body: dict[str, Any]) -> Any:
    """The scripted model. Extraction requests (the daemon reading OpenCode) get no
    memories; dream plans: supersede npm by pnpm, merge the test-command copies into the
    first, merge the two API facts into a new text, merge the user's duplicate pair and
    the pipeline's pair into their first memory; keep anything else."""
    schema = ((body.get("response_format") or {}).get("json_schema") or {}).get("name")
    if schema != "dream_plan":
        return {"memories": []}
    prompt = body["messages"][1]["content"]
    here = {i for i in ID.values() if f"[{i}]" in prompt}
    s = seed_memories(T0)
    if ID["NPM_OLD"] in here:
        return {"operations": [_op("supersede", [ID["NPM_NEW"], ID["NPM_OLD"]],
                                   sup=[ID["NPM_OLD"]], reason="switched to pnpm")]}
    if ID["TESTS_1"] in here:
        return {"operations": [_op("merge", [ID["TESTS_1"], ID["TESTS_2"], ID["TESTS_3"]],
                                   s["TESTS_1"].content, reason="same command")]}
    if ID["API_1"] in here:
        return {"operations": [_op("merge", [ID["API_1"], ID["API_2"]], API_MERGED,
                                   reason="one API fact")]}
    if ID["USER_1"] in here:
        return {"operations": [_op("merge", [ID["USER_1"], ID["USER_2"]],
                                   s["USER_1"].content, reason="same preference")]}
    if ID["PIPE_1"] in here:
        return {"operations": [_op("merge", [ID["PIPE_1"], ID["PIPE_2"]],
                                   s["PIPE_1"].content, reason="same tool")]}
    return {"operations": [_op("keep", sorted(here), reason="distinct")]}


# --------------------------------------------------------------------------- fixtures


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(responder=planner) as f:
        yield f


def llm_config(path: Path, fake: FakeOpenAI, dream: str = "") -> Path:
    """An LLM-mode config against the fake; ``dream`` is extra ``[dream]`` lines."""
    return write_config(path, f"""
[extraction]
mode = "llm"
[llm]
base_url = "{fake.base_url}"
model = "fake-model"
max_retries = 0
timeout_seconds = 10
[log]
level = "debug"
[daemon]
quiet_period_seconds = 0.5
sweep_interval_seconds = 600
[dream]
max_retire_share = 0.5
{dream}
""")


@pytest.fixture
def cfg(tmp_path: Path, fake: FakeOpenAI) -> Path:
    return llm_config(tmp_path / "dream.toml", fake)


def _paths(cfg_path: Path, env: dict[str, str]) -> tuple[Path, Path]:
    """(store dir, state dir) exactly as the CLI resolves them from this config."""
    config = load_config(cfg_path, env)
    return store_dir(config, env), state_dir(config, env)


def seed(cfg_path: Path, env: dict[str, str], base: datetime = T0) -> dict[str, Memory]:
    """Write the seed into the store the CLI will open (no daemon may be running); its
    user-scope memories carry the identity the CLI computes and every memory a section (so
    nothing is migrated)."""
    memories = seed_memories(base)
    me = App(config=load_config(cfg_path, env), env=env).user_id
    for m in memories.values():
        if m.scope == "user":
            m.user_id = me
        m.section = section_for(m.type, m.scope, m.content)  # as written today: no migration
    store = EdgeStore(_paths(cfg_path, env)[0])
    try:
        store.upsert(list(memories.values()))
    finally:
        store.close()
    return memories


def store_snapshot(cfg_path: Path, env: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Every payload in the store, tombstones included (only while no daemon runs)."""
    store = EdgeStore(_paths(cfg_path, env)[0])
    try:
        return {m.id: m.to_payload() for m in store.scroll(MemoryFilter(include_retired=True))}
    finally:
        store.close()


def journal_lines(cfg_path: Path, env: dict[str, str]) -> list[dict[str, Any]]:
    """The journal file's entries, oldest first, parsed line by line."""
    path = _paths(cfg_path, env)[1] / JOURNAL_FILE_NAME
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def listed(cfg_path: Path, *extra: str) -> dict[str, dict[str, Any]]:
    """``list --json`` by id (active memories only)."""
    return {m["id"]: m for m in cli_json("--config", str(cfg_path), "list", *extra)}


def contents(memories: dict[str, dict[str, Any]]) -> dict[str, str]:
    return {i: m["content"] for i, m in memories.items()}


def show(cfg_path: Path, memory_id: str) -> dict[str, Any]:
    return cli_json("--config", str(cfg_path), "show", memory_id)


def check_acme_dream(entry: dict[str, Any], *, trigger: str) -> None:
    """The journal entry of the scripted dream of acme-web's 13 memories."""
    assert entry["action"] == "dream" and entry["trigger"] == trigger, entry
    assert entry["status"] == "ok" and entry["dry_run"] is False, entry
    assert (entry["scope"], entry["project_key"]) == ("project", ACME_KEY)
    assert entry["mode"] == "llm" and entry["model"] == "fake-model"
    assert entry["tokens_in"] > 0 and entry["tokens_out"] > 0
    assert entry["counts"] == EXPECTED_ACME_COUNTS
    assert entry["rejected"] == []
    ops = {(o["op"], o["new_id"]): o for o in entry["operations"]}
    assert set(ops) == {("supersede", ID["NPM_NEW"]), ("merge", ID["TESTS_1"]),
                        ("merge", MERGED_ID)}
    assert ops[("supersede", ID["NPM_NEW"])]["superseded_ids"] == [ID["NPM_OLD"]]
    assert ops[("merge", MERGED_ID)]["new_text"] == API_MERGED
    assert set(ops[("merge", MERGED_ID)]["memory_ids"]) == {ID["API_1"], ID["API_2"]}


def check_acme_dreamed(before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]]
                       ) -> None:
    """``list`` after the acme-web dream: the retired five gone, the merged text new,
    everything else (other scopes included) as it was."""
    assert set(before) >= ACME_RETIRED and MERGED_ID not in before
    assert set(after) == (set(before) - ACME_RETIRED) | {MERGED_ID}
    assert after[MERGED_ID]["content"] == API_MERGED
    assert after[MERGED_ID]["project_id"] == ACME_KEY
    untouched = set(before) - ACME_RETIRED - {ID["TESTS_1"]}
    for i in untouched:
        assert after[i] == before[i], i
    # the surviving duplicate took the provenance of the two it absorbed
    assert after[ID["TESTS_1"]]["content"] == before[ID["TESTS_1"]]["content"]
    assert set(after[ID["TESTS_1"]]["session_ids"]) == {"ses_1", "ses_2", "ses_4"}


def check_lineage(cfg_path: Path, run_id: str) -> None:
    """``show`` of a superseded, a merged-away and a merged memory."""
    old = show(cfg_path, ID["NPM_OLD"])
    assert old["memory"]["status"] == "retired"
    assert old["memory"]["content"] == "The project uses npm."
    assert old["lineage"]["superseded_by"] == ID["NPM_NEW"]
    assert [e["run_id"] for e in old["lineage"]["dreams"]] == [run_id]
    merged_away = show(cfg_path, ID["API_2"])
    assert merged_away["memory"]["status"] == "retired"
    assert merged_away["lineage"]["superseded_by"] == MERGED_ID
    merged = show(cfg_path, MERGED_ID)
    assert merged["memory"]["status"] == "active"
    assert [m["id"] for m in merged["lineage"]["merged_from"]] == [ID["API_1"], ID["API_2"]]
    assert merged["lineage"]["sessions"] == ["ses_1", "ses_2"]
    assert merged["lineage"]["message_ids"] == ["msg_p1", "msg_p2"]
    assert [e["run_id"] for e in merged["lineage"]["dreams"]] == [run_id]
    # the human-readable form names the successor and the dream
    code, out = cli("--config", str(cfg_path), "show", ID["NPM_OLD"])
    assert code == 0
    assert f"superseded by {ID['NPM_NEW']} (superseded)" in out
    assert f"dream {run_id} " in out and "retired" in out.splitlines()[0]
    code, out = cli("--config", str(cfg_path), "show", MERGED_ID)
    assert code == 0
    assert f"merged from {ID['API_1']}: " in out and f"merged from {ID['API_2']}: " in out


# --------------------------------------------------------------------------- in-process


def test_dream_dir_llm_journal_list_and_show(cfg: Path, isolated_env: dict[str, str],
                                             sample_db: Path) -> None:
    seed(cfg, isolated_env)
    before = listed(cfg)
    assert len(before) == 19
    code, out = cli("--config", str(cfg), "dream", "--dir", ACME, "--db", str(sample_db),
                    "--json")
    assert code == 0, out
    entry = json.loads(out)
    check_acme_dream(entry, trigger="forced")
    assert entry["project_root"] == ACME
    run_id = entry["run_id"]

    after = listed(cfg)
    check_acme_dreamed(before, after)
    assert set(listed(cfg, "--dir", ACME, "--db", str(sample_db))) == {
        i for i in after if after[i]["project_id"] == ACME_KEY}

    # the journal file holds exactly that entry; `journal` shows it, filtered or not
    assert journal_lines(cfg, isolated_env) == [entry]
    assert cli_json("--config", str(cfg), "journal") == [entry]
    assert cli_json("--config", str(cfg), "journal", "--dir", ACME, "--db",
                    str(sample_db)) == [entry]
    assert cli_json("--config", str(cfg), "journal", "--dir", PIPELINE, "--db",
                    str(sample_db)) == []
    assert cli_json("--config", str(cfg), "journal", "--user") == []
    code, table = cli("--config", str(cfg), "journal")
    assert code == 0
    header, row = table.splitlines()
    assert header.split()[:5] == ["STARTED", "RUN", "TRIGGER", "WHERE", "STATUS"]
    cells = row.split()
    assert run_id in cells and "forced" in cells and "ok" in cells and "13→9" in cells

    check_lineage(cfg, run_id)
    # an unknown id (well-formed or not) is exit 5 (not found), not a crash
    assert cli("--config", str(cfg), "show", str(uuid.uuid4()))[0] == 5
    assert cli("--config", str(cfg), "show", "not-a-memory-id")[0] == 5
    # a folder no OpenCode session belongs to has nothing to dream
    assert cli("--config", str(cfg), "dream", "--dir", "/tmp/projects/none", "--db",
               str(sample_db))[0] == 5
    assert len(journal_lines(cfg, isolated_env)) == 1


def test_dry_run_journals_and_changes_nothing(cfg: Path, isolated_env: dict[str, str],
                                              sample_db: Path) -> None:
    seed(cfg, isolated_env)
    before_store = store_snapshot(cfg, isolated_env)
    before = listed(cfg)
    entry = cli_json("--config", str(cfg), "dream", "--dir", ACME, "--db", str(sample_db),
                     "--dry-run")
    assert entry["dry_run"] is True and entry["status"] == "ok"
    assert entry["trigger"] == "forced" and entry["project_key"] == ACME_KEY
    # what it would have done: the same plan as the real dream
    assert entry["counts"] == EXPECTED_ACME_COUNTS
    assert len(entry["operations"]) == 3
    assert store_snapshot(cfg, isolated_env) == before_store
    assert listed(cfg) == before
    assert show(cfg, ID["NPM_OLD"])["memory"]["status"] == "active"
    assert show(cfg, ID["NPM_OLD"])["lineage"]["superseded_by"] is None
    assert cli("--config", str(cfg), "show", MERGED_ID)[0] == 5
    assert journal_lines(cfg, isolated_env) == [entry]
    code, table = cli("--config", str(cfg), "journal")
    assert code == 0 and "ok+dry" in table.splitlines()[-1]
    # a dry run has nothing to undo: refused
    assert cli("--config", str(cfg), "dream", "--undo", entry["run_id"])[0] == 6
    assert store_snapshot(cfg, isolated_env) == before_store


def test_dream_user_dreams_only_the_user_scope(cfg: Path, isolated_env: dict[str, str]
                                               ) -> None:
    seed(cfg, isolated_env)
    before = listed(cfg)
    code, out = cli("--config", str(cfg), "dream", "--user")  # the table form
    assert code == 0, out
    assert "merge: The user prefers concise answers" in out
    assert "forced" in out and "user" in out
    (entry,) = journal_lines(cfg, isolated_env)
    assert (entry["scope"], entry["project_key"], entry["status"]) == ("user", None, "ok")
    assert entry["counts"]["before"] == 4 and entry["counts"]["after"] == 3
    assert entry["counts"]["merged"] == 1 and entry["counts"]["superseded"] == 0
    after = listed(cfg)
    assert set(after) == set(before) - {ID["USER_2"]}
    for i in set(after) - {ID["USER_1"]}:
        assert after[i] == before[i], i  # every project memory untouched
    assert set(listed(cfg, "--user")) == {ID["USER_1"], ID["USER_TZ"], ID["USER_REVIEW"]}
    assert show(cfg, ID["USER_2"])["lineage"]["superseded_by"] == ID["USER_1"]
    assert cli_json("--config", str(cfg), "journal", "--user") == [entry]


def test_undo_restores_exactly_the_pre_dream_store(cfg: Path, isolated_env: dict[str, str],
                                                   sample_db: Path) -> None:
    seed(cfg, isolated_env)
    before_store = store_snapshot(cfg, isolated_env)
    before = contents(listed(cfg))
    entry = cli_json("--config", str(cfg), "dream", "--dir", ACME, "--db", str(sample_db))
    assert entry["status"] == "ok" and entry["counts"]["after"] == 9
    assert contents(listed(cfg)) != before
    run_id = entry["run_id"]

    undo = cli_json("--config", str(cfg), "dream", "--undo", run_id)
    assert (undo["action"], undo["status"], undo["run_id"]) == ("undo", "undone", run_id)
    assert undo["counts"] == {"restored": 6, "deleted": 1, "before": 9, "after": 13}
    # ids and contents of every memory exactly as before the dream; tombstones revived,
    # the merged memory gone, every payload byte for byte
    assert contents(listed(cfg)) == before
    assert store_snapshot(cfg, isolated_env) == before_store
    for i in ACME_RETIRED:
        m = show(cfg, i)["memory"]
        assert m["status"] == "active" and m.get("superseded_by") is None, m
    assert cli("--config", str(cfg), "show", MERGED_ID)[0] == 5
    # the undo is journaled too (same run, status "undone"), newest first
    journal = cli_json("--config", str(cfg), "journal")
    assert [(e["run_id"], e["status"]) for e in journal] == [(run_id, "undone"),
                                                              (run_id, "ok")]
    assert journal_lines(cfg, isolated_env)[-1] == undo
    # a second undo is refused and changes nothing
    assert cli("--config", str(cfg), "dream", "--undo", run_id)[0] == 6
    assert cli("--config", str(cfg), "dream", "--undo", "no-such-run")[0] == 5
    assert store_snapshot(cfg, isolated_env) == before_store


def test_kill_9_mid_apply_then_the_next_command_finishes_the_dream(
        cfg: Path, isolated_env: dict[str, str], sample_db: Path, tmp_path: Path) -> None:
    import sys

    seed(cfg, isolated_env)
    before = listed(cfg)
    env = {**os.environ, **isolated_env, "OPENCODE_MEMORYD_FAULT": "dream_mid_apply",
           "PYTHONPATH": os.pathsep.join(sys.path)}
    killed = subprocess.run(
        [sys.executable, "-m", "opencode_memoryd", "--config", str(cfg), "dream", "--dir",
         ACME, "--db", str(sample_db), "--json"],
        env=env, capture_output=True, text=True, timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert journal_lines(cfg, isolated_env) == []  # killed before journaling
    # half applied: the surviving and merged memories are written, no tombstone yet
    mid = listed(cfg)
    assert MERGED_ID in mid and set(mid) >= ACME_RETIRED
    # the next dream command rolls the interrupted run forward first, then dreams
    again = cli_json("--config", str(cfg), "dream", "--dir", ACME, "--db", str(sample_db))
    entries = journal_lines(cfg, isolated_env)
    assert len(entries) == 2 and entries[1] == again
    recovered = entries[0]
    assert recovered["status"] == "ok" and "completed by recovery" in recovered["reason"]
    check_acme_dream({**recovered, "reason": None}, trigger="forced")
    check_acme_dreamed(before, listed(cfg))  # exactly the store of a clean dream
    assert again["counts"]["merged"] == again["counts"]["superseded"] == 0  # nothing left


# --------------------------------------------------------------------------- daemon


def _running(proc: subprocess.Popen[str]) -> bool:
    """True while the daemon runs; fails the test at once when it exited."""
    if proc.poll() is not None:
        raise AssertionError(f"the daemon exited with {proc.returncode} (see its log)")
    return True


def _daemon_ready(cfg_path: Path, proc: subprocess.Popen[str]) -> bool:
    """Whether the daemon serves its control socket. Until it wrote ``daemon.json`` the
    CLI is not asked at all: it would open the embedded store itself and keep the starting
    daemon from opening it."""
    _running(proc)
    info = _paths(cfg_path, dict(os.environ))[1] / DAEMON_INFO_FILE
    try:
        if json.loads(info.read_text())["pid"] != proc.pid:
            return False
    except (OSError, ValueError, KeyError):
        return False
    code, out = cli("--config", str(cfg_path), "status", "--json")
    return code == 0 and json.loads(out)["daemon"].get("pid") == proc.pid


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=30)
    assert proc.returncode == 0


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[str]]]:
    """Daemons started by a test; any still running at the end is killed."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for p in started:
        if p.poll() is None:
            p.kill()
            p.wait()


def _log_events(state_dir: Path, event: str, *, skip: int = 0) -> list[dict[str, Any]]:
    """The daemon log's ``event`` records (JSON lines), after the first ``skip`` lines."""
    path = state_dir / LOG_FILE_NAME
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines()[skip:]:
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get("event") == event:
            out.append(rec)
    return out


def _log_lines(state_dir: Path) -> int:
    path = state_dir / LOG_FILE_NAME
    return len(path.read_text().splitlines()) if path.exists() else 0


def _checked(cfg_path: Path, scopes: set[str], *, skip: int, journaled: int) -> bool:
    """Whether the daemon's dream check has decided every scope of ``scopes`` (``"user"``
    or a project key): its gate logged closed after log line ``skip``, or a dream of it
    journaled after the first ``journaled`` journal lines. Waiting for this, a dream that
    should not have happened shows up in the journal instead of as a time-out."""
    state_dir = _paths(cfg_path, dict(os.environ))[1]
    closed = {r.get("project") for r in _log_events(state_dir, "dream_gate_closed",
                                                     skip=skip)}
    dreamed = {e.get("project_key") or "user"
               for e in journal_lines(cfg_path, dict(os.environ))[journaled:]}
    return scopes <= closed | dreamed


@pytest.mark.slow
def test_dream_undo_list_show_through_a_running_daemon(
        tmp_path: Path, fake: FakeOpenAI, isolated_env: dict[str, str], sample_db: Path,
        procs: list[subprocess.Popen[str]]) -> None:
    cfg = llm_config(tmp_path / "d.toml", fake, "enabled = false\n")
    seed(cfg, isolated_env)
    before_store = store_snapshot(cfg, isolated_env)
    before = listed(cfg)
    proc = start_daemon(cfg, isolated_env)
    procs.append(proc)
    assert wait_until(lambda: _daemon_ready(cfg, proc), timeout=60)
    # the daemon holds the embedded store: the CLI could not open it itself, so each of
    # these succeeding means the daemon served it
    code, out = cli("--config", str(cfg), "dream", "--dir", ACME, "--db", str(sample_db),
                    "--json")
    assert code == 0, out
    entry = json.loads(out)
    check_acme_dream(entry, trigger="forced")
    run_id = entry["run_id"]
    check_acme_dreamed(before, listed(cfg))
    check_lineage(cfg, run_id)
    assert cli_json("--config", str(cfg), "journal") == [entry]
    assert journal_lines(cfg, isolated_env) == [entry]
    undo = cli_json("--config", str(cfg), "dream", "--undo", run_id)
    assert undo["status"] == "undone" and undo["counts"]["deleted"] == 1
    assert listed(cfg) == before
    assert [e["status"] for e in journal_lines(cfg, isolated_env)] == ["ok", "undone"]
    assert cli("--config", str(cfg), "dream", "--undo", run_id)[0] == 6  # via the daemon
    assert cli("--config", str(cfg), "dream", "--undo", "no-such-run")[0] == 5
    # the daemon did not dream on its own (dream.enabled = false)
    assert all(e["trigger"] == "forced" for e in journal_lines(cfg, isolated_env))
    _stop(proc)
    # after the daemon let go of the store: what it wrote is there, read locally
    assert store_snapshot(cfg, isolated_env) == before_store
    assert listed(cfg) == before


def _prior(project_key: str | None, ended: datetime, run_id: str) -> dict[str, Any]:
    """A journal entry of an earlier applied dream of one scope."""
    return {"run_id": run_id, "action": "dream", "trigger": "auto", "dry_run": False,
            "scope": "user" if project_key is None else "project",
            "project_key": project_key, "project_root": None, "status": "ok",
            "reason": None, "started_at": iso_utc(ended - timedelta(minutes=1)),
            "ended_at": iso_utc(ended), "counts": {}, "operations": [], "rejected": [],
            "model": "fake-model", "tokens_in": 0, "tokens_out": 0, "duration_ms": 1.0,
            "mode": "llm"}


GATE_CLOSED = {
    # thresholds not met: no dream yet, but fewer new memories than the minimum
    "too_few_new_memories": ("min_new_memories = 100\n", {},
                             r"\d+ new memories since the last dream; the minimum is 100"),
    # every scope dreamed 3 h ago (before its memories were written, so they all count as
    # new); the minimum interval is a day
    "recent_dream": ("min_new_memories = 1\nmin_hours_between_dreams = 24\n",
                     {ACME_KEY: 3.0, PIPE_KEY: 3.0, None: 3.0},
                     r"last dream 3\.0 h ago; the minimum is 24 h"),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(GATE_CLOSED))
def test_daemon_does_not_dream_when_the_gate_is_closed(
        case: str, tmp_path: Path, fake: FakeOpenAI, isolated_env: dict[str, str],
        procs: list[subprocess.Popen[str]]) -> None:
    extra, prior_hours, why = GATE_CLOSED[case]
    cfg = llm_config(tmp_path / "d.toml", fake, extra + "check_interval_minutes = 600\n")
    now = datetime.now(UTC)
    seed(cfg, isolated_env, base=now - timedelta(hours=2))  # all "new" by their time
    state_dir = _paths(cfg, isolated_env)[1]
    journal = DreamJournal(state_dir / JOURNAL_FILE_NAME)
    for n, (key, hours) in enumerate(prior_hours.items()):
        journal.append(_prior(key, now - timedelta(hours=hours), f"prior{n}"))
    prior = journal_lines(cfg, isolated_env)
    before_store = store_snapshot(cfg, isolated_env)
    proc = start_daemon(cfg, isolated_env)
    procs.append(proc)
    assert wait_until(lambda: _daemon_ready(cfg, proc), timeout=60)
    # the start-up check has run for every scope and found each gate closed
    assert wait_until(lambda: _running(proc) and _checked(cfg, SCOPES, skip=0,
                                                          journaled=len(prior)), timeout=30)
    assert journal_lines(cfg, isolated_env) == prior  # no dream was journaled
    reasons = {r["project"]: r["reason"] for r in _log_events(state_dir, "dream_gate_closed")}
    assert set(reasons) == SCOPES
    assert all(re.fullmatch(why, r) for r in reasons.values()), reasons
    info = cli_json("--config", str(cfg), "status")
    assert info["daemon"]["last_dream"] == {}
    _stop(proc)
    assert store_snapshot(cfg, isolated_env) == before_store


@pytest.mark.slow
def test_missed_slot_dreams_once_at_start_then_the_gate_closes(
        tmp_path: Path, fake: FakeOpenAI, isolated_env: dict[str, str],
        procs: list[subprocess.Popen[str]]) -> None:
    # only acme-web (13 memories) reaches min_new_memories; its last dream is 2 days old
    cfg = llm_config(tmp_path / "d.toml", fake, "min_hours_between_dreams = 24\n"
                                                "min_new_memories = 6\n"
                                                "check_interval_minutes = 600\n")
    now = datetime.now(UTC)
    seed(cfg, isolated_env, base=now - timedelta(hours=3))
    state_dir = _paths(cfg, isolated_env)[1]
    old = _prior(ACME_KEY, now - timedelta(hours=48), "missedslot01")
    DreamJournal(state_dir / JOURNAL_FILE_NAME).append(old)
    before = listed(cfg)

    proc = start_daemon(cfg, isolated_env)
    procs.append(proc)
    assert wait_until(lambda: _running(proc) and _checked(cfg, SCOPES, skip=0, journaled=1),
                      timeout=60)
    assert wait_until(lambda: _daemon_ready(cfg, proc), timeout=60)
    lines = journal_lines(cfg, isolated_env)
    assert lines[0] == old and len(lines) == 2, lines
    catch_up = lines[1]
    check_acme_dream(catch_up, trigger="catch-up")
    assert catch_up["project_root"] == ACME
    check_acme_dreamed(before, listed(cfg))
    info = cli_json("--config", str(cfg), "status")
    assert set(info["daemon"]["last_dream"]) == {ACME_KEY}
    assert cli_json("--config", str(cfg), "journal")[0] == catch_up
    _stop(proc)

    # restarted: the gate of acme-web is now closed (it dreamed minutes ago)
    skip = _log_lines(state_dir)
    proc = start_daemon(cfg, isolated_env)
    procs.append(proc)
    assert wait_until(lambda: _daemon_ready(cfg, proc), timeout=60)
    assert wait_until(lambda: _running(proc) and _checked(cfg, SCOPES, skip=skip,
                                                          journaled=2), timeout=30)
    assert journal_lines(cfg, isolated_env) == [old, catch_up]
    acme = [r for r in _log_events(state_dir, "dream_gate_closed", skip=skip)
            if r.get("project") == ACME_KEY]
    assert re.fullmatch(r"last dream \d+\.\d h ago; the minimum is 24 h",
                        acme[0]["reason"]), acme
    assert cli_json("--config", str(cfg), "status")["daemon"]["last_dream"] == {}
    _stop(proc)


def test_dream_and_journal_take_every_folder_list_takes(
        config_file: Path, sample_db: Path, tmp_path: Path) -> None:
    # a folder below a project where no OpenCode session ran: `list` finds the project by
    # its stored root, so `dream` and `journal` do too, with or without a database at hand
    base = ("--config", str(config_file))
    cli_json(*base, "maintain", "--all", "--db", str(sample_db))
    deep = f"{ACME}/packages/ui/src"
    for db in (("--db", str(sample_db)), ()):
        listed = cli_json(*base, "list", "--dir", deep, *db)
        assert listed and {m["project_id"] for m in listed} == {ACME_KEY}
        entry = cli_json(*base, "dream", "--dir", deep, *db)
        assert entry["project_key"] == ACME_KEY and entry["status"] != "failed", entry
        journal = cli_json(*base, "journal", "--dir", deep, *db)
        assert entry["run_id"] in {e["run_id"] for e in journal}
    # a folder with neither sessions nor memories is still not found
    code, _ = cli(*base, "dream", "--dir", str(tmp_path / "elsewhere"), "--db", str(sample_db))
    assert code == 5


@pytest.mark.slow
def test_a_daemon_started_after_a_kill_9_mid_apply_never_serves_the_half_dream(
        cfg: Path, isolated_env: dict[str, str], sample_db: Path,
        procs: list[subprocess.Popen[str]]) -> None:
    import sys

    seed(cfg, isolated_env)
    before = listed(cfg)
    env = {**os.environ, **isolated_env, "OPENCODE_MEMORYD_FAULT": "dream_mid_apply",
           "PYTHONPATH": os.pathsep.join(sys.path)}
    killed = subprocess.run(
        [sys.executable, "-m", "opencode_memoryd", "--config", str(cfg), "dream", "--dir",
         ACME, "--db", str(sample_db), "--json"],
        env=env, capture_output=True, text=True, timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    mid = listed(cfg)  # half applied: the merged memory written, the retired ones still on
    assert MERGED_ID in mid and set(mid) >= ACME_RETIRED
    proc = start_daemon(cfg, isolated_env)
    procs.append(proc)
    assert wait_until(lambda: _daemon_ready(cfg, proc), timeout=60)
    check_acme_dreamed(before, listed(cfg))  # its first answer: the dream finished
    (recovered,) = journal_lines(cfg, isolated_env)
    assert "completed by recovery" in recovered["reason"]


def test_the_agent_may_neither_dream_nor_undo_the_users_dream(
        cfg: Path, isolated_env: dict[str, str], sample_db: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    seed(cfg, isolated_env)
    entry = cli_json("--config", str(cfg), "dream", "--user")
    assert entry["counts"]["merged"] == 1
    dreamed = store_snapshot(cfg, isolated_env)
    monkeypatch.setenv("OPENCODE", "1")  # the agent's shell inside OpenCode
    assert cli("--config", str(cfg), "dream", "--undo", entry["run_id"])[0] == 6
    assert cli("--config", str(cfg), "dream", "--dir", ACME, "--db", str(sample_db))[0] == 6
    assert cli("--config", str(cfg), "dream", "--user")[0] == 6
    assert store_snapshot(cfg, isolated_env) == dreamed  # the merge stands
    assert cli_json("--config", str(cfg), "dream", "--user", "--dry-run")["dry_run"] is True
    monkeypatch.delenv("OPENCODE")
    undo = cli_json("--config", str(cfg), "dream", "--undo", entry["run_id"])
    assert undo["status"] == "undone"
