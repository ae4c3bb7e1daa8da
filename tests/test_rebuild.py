"""A lost or damaged store: ``doctor`` fails and names ``rebuild``; ``rebuild`` moves the
store aside and makes it again from OpenCode's database and the journal of manual
changes, every memory as it was (edits kept, forgotten ones still forgotten)."""

from __future__ import annotations

import json
import random
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conftest import ACME, cli, cli_json, start_daemon, wait_until, write_config

FIELDS = ("content", "type", "scope", "status", "source", "project_id", "section")


@pytest.fixture
def cfg(tmp_path: Path, sample_db: Path) -> Path:
    return write_config(tmp_path / "config.toml",
                        f'[opencode]\nsettle_seconds = 0\ndb_paths = ["{sample_db}"]\n'
                        '[extraction]\nmode = "rules"\n')


def snapshot(cfg: Path) -> dict[str, dict[str, Any]]:
    """Every memory, tombstones too: id -> the fields a rebuild must keep."""
    return {m["id"]: {f: m.get(f) for f in FIELDS}
            for m in cli_json("--config", str(cfg), "list", "--all")}


def store_path(cfg: Path) -> Path:
    return Path(cli_json("--config", str(cfg), "status")["store"]["path"])


def check(cfg: Path, name: str) -> tuple[int, dict[str, Any]]:
    code, out = cli("--config", str(cfg), "doctor", "--json")
    return code, next(c for c in json.loads(out)["checks"] if c["name"] == name)


def seed(cfg: Path) -> dict[str, dict[str, Any]]:
    """Extract the sample database, then change memories by hand: two adds, an edit and
    a forget of extracted memories, a forget of an added one."""
    base = ("--config", str(cfg))
    cli_json(*base, "maintain", "--all")
    added = cli_json(*base, "add", "Releases are tagged vX.Y.Z on main.", "--dir", ACME)
    cli_json(*base, "add", "I prefer tabs over spaces in every file.", "--user")
    extracted = {m["content"]: m["id"] for m in cli_json(*base, "list", "--all")
                 if m["source"] == "rules" and m["type"] != "session-summary"}
    edited, forgotten = sorted(extracted.values())[:2]
    cli_json(*base, "edit", edited, "Our API base path is /api/v3 since March.")
    cli_json(*base, "forget", forgotten)
    cli_json(*base, "forget", added["memory"]["id"])
    before = snapshot(cfg)
    assert sum(m["status"] == "retired" for m in before.values()) == 2
    assert "Our API base path is /api/v3 since March." in {m["content"] for m in
                                                          before.values()}
    return before


def test_a_deleted_segment_fails_doctor_and_rebuild_brings_every_memory_back(
        cfg: Path) -> None:
    before = seed(cfg)
    assert check(cfg, "store")[1]["status"] == "ok"
    path = store_path(cfg)
    for segment in (path / "shard" / "segments").iterdir():
        shutil.rmtree(segment)
    assert len(snapshot(cfg)) < len(before)  # lost, and nothing else says so

    code, store = check(cfg, "store")
    assert code == 1 and store["status"] == "fail", store
    assert "lost memories" in store["detail"]
    assert "opencode-memoryd rebuild" in store["fix"]

    report = cli_json("--config", str(cfg), "rebuild")
    moved = Path(report["moved_to"])
    assert moved.parent == path.parent and moved.name.startswith("qdrant.broken-")
    assert (moved / "store.json").exists()  # moved aside, not deleted
    assert report["marks_reset"] > 0 and report["failed"] == 0
    assert report["manual_restored"] == 4  # two adds, an edit, a forget of each kind
    assert report["points"] == len(before)
    assert snapshot(cfg) == before
    assert check(cfg, "store")[1]["status"] == "ok"
    # the store is whole: nothing more to extract, nothing written twice
    again = cli_json("--config", str(cfg), "maintain", "--all")
    assert again["totals"]["added"] == 0
    assert snapshot(cfg) == before


def test_a_deleted_store_fails_doctor_and_rebuild_makes_it_again(cfg: Path) -> None:
    before = seed(cfg)
    shutil.rmtree(store_path(cfg))
    code, store = check(cfg, "store")
    assert code == 1 and store["status"] == "fail"
    assert "opencode-memoryd rebuild" in store["fix"]
    report = cli_json("--config", str(cfg), "rebuild")
    assert report["moved_to"] is None and report["old_store_read"] is False
    assert snapshot(cfg) == before


def garble_wal(path: Path) -> None:
    """Overwrite the head of every WAL segment of the store at ``path``."""
    rng = random.Random(22)
    for seg in (path / "shard" / "wal").glob("open-*"):
        with seg.open("r+b") as f:
            f.write(bytes(rng.randrange(256) for _ in range(4096)))


def test_a_garbled_wal_names_rebuild_in_doctor_and_at_the_daemon_start(
        cfg: Path, isolated_env: dict[str, str]) -> None:
    before = seed(cfg)
    path = store_path(cfg)
    garble_wal(path)

    code, store = check(cfg, "store")
    assert code == 1 and store["status"] == "fail"
    assert "opencode-memoryd rebuild" in store["fix"]
    daemon = start_daemon(cfg, isolated_env, capture=True)
    try:
        _out, err = daemon.communicate(timeout=60)
    finally:
        daemon.kill()
    assert daemon.returncode != 0
    assert "run `opencode-memoryd rebuild` with the daemon stopped" in err

    report = cli_json("--config", str(cfg), "rebuild")
    assert report["old_store_read"] is False and "WAL" in report["old_store_error"]
    assert snapshot(cfg) == before  # manual changes from the journal alone


def test_rebuild_is_refused_while_the_daemon_runs(
        cfg: Path, isolated_env: dict[str, str]) -> None:
    before = seed(cfg)
    path = store_path(cfg)
    daemon = start_daemon(cfg, isolated_env)
    try:
        assert wait_until(lambda: cli("--config", str(cfg), "status", "--json")[1]
                          and cli_json("--config", str(cfg), "status")["daemon"]["running"],
                          timeout=60)
        code, _ = cli("--config", str(cfg), "rebuild")
        assert code == 6
        # the daemon owns the store: it answers the store check
        store = check(cfg, "store")[1]
        assert store["status"] == "ok" and "the daemon's store" in store["detail"], store
        assert not list(path.parent.glob("qdrant.broken-*"))
    finally:
        daemon.send_signal(signal.SIGTERM)
        try:
            daemon.wait(timeout=30)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()
    assert snapshot(cfg) == before


def test_rebuild_in_llm_mode_replays_the_recorded_results_without_a_call(
        tmp_path: Path, sample_db: Path, isolated_env: dict[str, str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from fake_openai import FakeOpenAI
    from test_maintain_llm import remember_responder

    monkeypatch.setenv("TEST_LLM_KEY", "test-key")
    with FakeOpenAI(responder=remember_responder) as fake:
        cfg = write_config(tmp_path / "llm.toml", f"""
[opencode]
settle_seconds = 0
db_paths = ["{sample_db}"]
[extraction]
mode = "llm"
[llm]
base_url = "{fake.base_url}"
model = "test-model"
api_key_env = "TEST_LLM_KEY"
max_retries = 0
""")
        cli_json("--config", str(cfg), "maintain", "--all")
        before = snapshot(cfg)
        calls = len(fake.chat_requests)
        assert calls and any(m["source"] == "llm" for m in before.values())
        shutil.rmtree(store_path(cfg))
        report = cli_json("--config", str(cfg), "rebuild")
        assert report["failed"] == 0
        assert len(fake.chat_requests) == calls  # every result came from the state file
        assert snapshot(cfg) == before


def test_manual_memories_from_before_the_journal_come_from_the_old_store(
        cfg: Path, isolated_env: dict[str, str]) -> None:
    before = seed(cfg)
    journal = Path(isolated_env["XDG_STATE_HOME"]) / "opencode-memoryd" / "manual-journal.jsonl"
    journal.unlink()  # written by a version that kept no journal of manual changes
    report = cli_json("--config", str(cfg), "rebuild")
    assert report["old_store_read"] is True
    manual = {i for i, m in before.items() if m["source"] == "manual"}
    assert len(manual) == 2 and report["manual_restored"] == 2
    assert {i: m for i, m in snapshot(cfg).items() if i in manual} == {
        i: before[i] for i in manual}
    # exported to the journal before the store moved: a second rebuild has them too
    ops = [json.loads(line)["op"] for line in journal.read_text().splitlines()]
    assert ops == ["export", "export"]
    shutil.rmtree(store_path(cfg))
    cli_json("--config", str(cfg), "rebuild")
    assert {i: m for i, m in snapshot(cfg).items() if i in manual} == {
        i: before[i] for i in manual}


def test_a_store_whose_reads_fail_fails_doctor_and_rebuild_makes_it_again(cfg: Path) -> None:
    before = seed(cfg)
    rng = random.Random(3)
    path = store_path(cfg)
    for page in path.glob("shard/segments/*/payload_storage/page_*"):
        with page.open("r+b") as f:
            f.write(bytes(rng.randrange(256) for _ in range(65536)))
    assert cli("--config", str(cfg), "list", "--all")[0] == 1  # opens, but cannot read
    code, store = check(cfg, "store")
    assert code == 1 and store["status"] == "fail"
    assert "cannot be read" in store["detail"] and "opencode-memoryd rebuild" in store["fix"]
    report = cli_json("--config", str(cfg), "rebuild")
    assert report["old_store_read"] is False
    assert Path(report["moved_to"]).parent == path.parent
    assert snapshot(cfg) == before
