"""The dream journal: append-only JSON lines, idempotent by run, torn-tail repair."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from opencode_memoryd.cli.journal_table import render_table
from opencode_memoryd.dream.journal import DreamJournal


def entry(run_id: str, *, status: str = "ok", scope: str = "project",
          project_key: str | None = "proj-a", minute: int = 0, **extra: Any) -> dict[str, Any]:
    e: dict[str, Any] = {
        "run_id": run_id,
        "started_at": f"2025-01-02T03:{minute:02d}:00.000Z",
        "ended_at": f"2025-01-02T03:{minute:02d}:05.000Z",
        "trigger": "schedule",
        "dry_run": False,
        "scope": scope,
        "project_key": project_key if scope == "project" else None,
        "project_root": f"/tmp/projects/{project_key}" if scope == "project" else None,
        "status": status,
        "reason": None,
        "counts": {"before": 10, "after": 7, "merged": 2, "superseded": 1, "kept": 7,
                   "rejected_plans": 0},
        "operations": [],
        "model": "gpt-test",
        "tokens_in": 1200,
        "tokens_out": 340,
        "duration_ms": 5000,
    }
    e.update(extra)
    return e


@pytest.fixture
def jpath(tmp_path: Path) -> Path:
    return tmp_path / "state" / "opencode-memoryd" / "dream-journal.jsonl"


def run_ids(rows: list[dict[str, Any]]) -> list[str]:
    return [r["run_id"] for r in rows]


def test_round_trip_newest_first(jpath: Path) -> None:
    j = DreamJournal(jpath)
    assert j.entries() == []
    assert j.find("nope") is None
    first = entry("run000000001", minute=1, reason="ünïcode ✓")
    assert j.append(first)
    assert j.append(entry("run000000002", minute=2))
    assert j.append(entry("run000000003", minute=3))
    rows = j.entries()
    assert run_ids(rows) == ["run000000003", "run000000002", "run000000001"]
    assert rows[-1] == first
    raw = jpath.read_bytes()
    assert raw.endswith(b"\n") and raw.count(b"\n") == 3
    assert "ünïcode ✓" in raw.decode("utf-8")  # ensure_ascii=False
    assert b", " not in raw.splitlines()[0]  # compact separators


def test_filters_and_limit(jpath: Path) -> None:
    j = DreamJournal(jpath)
    j.append(entry("a1", project_key="proj-a"))
    j.append(entry("u1", scope="user"))
    j.append(entry("b1", project_key="proj-b"))
    j.append(entry("a2", project_key="proj-a"))
    assert run_ids(j.entries(project_key="proj-a")) == ["a2", "a1"]
    assert run_ids(j.entries(project_key="proj-b")) == ["b1"]
    assert run_ids(j.entries(user=True)) == ["u1"]
    assert run_ids(j.entries(project_key="proj-a", user=True)) == ["a2", "u1", "a1"]
    assert run_ids(j.entries(limit=2)) == ["a2", "b1"]
    assert run_ids(j.entries(project_key="proj-a", limit=1)) == ["a2"]
    assert j.entries(limit=0) == []
    assert j.entries(project_key="nope") == []


def test_idempotent_by_run_id_and_status(jpath: Path) -> None:
    j = DreamJournal(jpath)
    assert j.append(entry("r1", status="running")) is True
    assert j.append(entry("r1", status="running")) is False
    assert j.append(entry("r1", status="ok")) is True
    assert j.append(entry("r1", status="ok", tokens_in=1)) is False
    assert len(jpath.read_bytes().splitlines()) == 2
    assert j.find("r1")["status"] == "ok"
    # A fresh instance (after a crash) builds its index from the file.
    again = DreamJournal(jpath)
    assert again.append(entry("r1", status="ok")) is False
    assert again.append(entry("r2", status="ok")) is True
    assert len(jpath.read_bytes().splitlines()) == 3


def test_find_returns_newest_entry_for_run(jpath: Path) -> None:
    j = DreamJournal(jpath)
    j.append(entry("r1", status="running"))
    j.append(entry("r2"))
    j.append(entry("r1", status="failed", reason="boom"))
    found = j.find("r1")
    assert found is not None and found["status"] == "failed" and found["reason"] == "boom"


def test_rejects_entry_without_run_id_or_not_json(jpath: Path) -> None:
    j = DreamJournal(jpath)
    with pytest.raises(ValueError):
        j.append({"status": "ok"})
    with pytest.raises(ValueError):
        j.append({"run_id": "", "status": "ok"})
    with pytest.raises(ValueError):
        j.append({"run_id": "r1", "bad": object()})
    assert not jpath.exists()


def test_torn_last_line_is_repaired(jpath: Path) -> None:
    j = DreamJournal(jpath)
    j.append(entry("good1"))
    j.append(entry("good2"))
    line = json.dumps(entry("torn1"), ensure_ascii=False).encode()
    half = line[: len(line) // 2]
    with open(jpath, "ab") as f:
        f.write(half)
    with capture_logs() as logs:
        fresh = DreamJournal(jpath)
        rows = fresh.entries()
    assert run_ids(rows) == ["good2", "good1"]
    raw = jpath.read_bytes()
    assert raw.endswith(b"\n") and raw.count(b"\n") == 2
    assert all(json.loads(x) for x in raw.splitlines())
    torn = jpath.with_name(jpath.name + ".torn").read_bytes()
    assert torn == half + b"\n"
    repaired = [e for e in logs if e["event"] == "journal_repaired"]
    assert len(repaired) == 1 and repaired[0]["torn_bytes"] == len(half)
    assert repaired[0]["log_level"] == "warning"
    # The torn run was never recorded, so it may be appended now.
    assert fresh.append(entry("torn1")) is True
    assert fresh.append(entry("good3")) is True
    assert run_ids(DreamJournal(jpath).entries()) == ["good3", "torn1", "good2", "good1"]


def test_torn_line_is_repaired_before_an_append(jpath: Path) -> None:
    j = DreamJournal(jpath)
    j.append(entry("good1"))
    with open(jpath, "ab") as f:
        f.write(b'{"run_id": "x", "sta')
    fresh = DreamJournal(jpath)
    assert fresh.append(entry("good2")) is True
    lines = jpath.read_bytes().splitlines()
    assert [json.loads(x)["run_id"] for x in lines] == ["good1", "good2"]
    assert jpath.with_name(jpath.name + ".torn").read_bytes() == b'{"run_id": "x", "sta\n'


def test_torn_line_written_by_another_writer_is_repaired(jpath: Path) -> None:
    j = DreamJournal(jpath)
    j.append(entry("good1"))
    with open(jpath, "ab") as f:  # another process crashed mid-write after our first use
        f.write(b'{"run_id": "other"')
    assert j.append(entry("good2")) is True
    assert run_ids(j.entries()) == ["good2", "good1"]
    assert jpath.read_bytes().endswith(b"}\n")


def test_corrupt_middle_line_is_skipped_and_counted(jpath: Path) -> None:
    j = DreamJournal(jpath)
    j.append(entry("good1"))
    with open(jpath, "ab") as f:
        f.write(b"\x00\x00garbage{not json\n")
        f.write(b"[1, 2, 3]\n")  # valid JSON, but not an entry
    j.append(entry("good2"))
    with capture_logs() as logs:
        fresh = DreamJournal(jpath)
        assert run_ids(fresh.entries()) == ["good2", "good1"]
        assert run_ids(fresh.entries()) == ["good2", "good1"]
    assert fresh.corrupt_lines == 2
    corrupt = [e for e in logs if e["event"] == "journal_line_corrupt"]
    assert len(corrupt) == 2  # once per line, not once per read
    assert all(e["log_level"] == "warning" for e in corrupt)
    assert fresh.append(entry("good3")) is True
    assert fresh.find("good1") is not None
    assert not jpath.with_name(jpath.name + ".torn").exists()


def test_entries_are_durable_across_instances(jpath: Path) -> None:
    j = DreamJournal(jpath)
    for i in range(5):
        j.append(entry(f"run{i}", minute=i))
    del j
    reopened = DreamJournal(jpath)
    assert run_ids(reopened.entries()) == [f"run{i}" for i in reversed(range(5))]
    assert reopened.find("run2")["started_at"] == "2025-01-02T03:02:00.000Z"


def test_concurrent_appends_from_threads(jpath: Path) -> None:
    j = DreamJournal(jpath)
    errors: list[BaseException] = []

    def worker(t: int) -> None:
        try:
            for i in range(50):
                assert j.append(entry(f"t{t}-{i}", operations=[{"op": "merge", "n": i}]))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    lines = jpath.read_bytes().splitlines()
    assert len(lines) == 200
    ids = {json.loads(x)["run_id"] for x in lines}
    assert ids == {f"t{t}-{i}" for t in range(4) for i in range(50)}
    assert len(DreamJournal(jpath).entries()) == 200


def test_two_instances_share_one_file(jpath: Path) -> None:
    a, b = DreamJournal(jpath), DreamJournal(jpath)
    assert a.append(entry("r1", status="ok"))
    assert b.append(entry("r1", status="ok")) is False  # b sees a's write under the lock
    assert b.append(entry("r2"))
    assert a.append(entry("r2")) is False
    assert len(jpath.read_bytes().splitlines()) == 2


def test_file_mode_0600_when_created(jpath: Path) -> None:
    old = os.umask(0o022)
    try:
        DreamJournal(jpath).append(entry("r1"))
    finally:
        os.umask(old)
    assert stat.S_IMODE(jpath.stat().st_mode) == 0o600


def test_render_table(jpath: Path) -> None:
    j = DreamJournal(jpath)
    j.append(entry("abcdef123456", minute=1))
    j.append(entry("fedcba654321", status="failed", reason="llm timed out\nafter 60 s",
                   minute=2, counts={}))
    j.append(entry("skip00000001", status="skipped", scope="user", reason="nothing to do",
                   minute=3, dry_run=True))
    text = render_table(j.entries())
    lines = text.splitlines()
    assert len(lines) == 4
    assert lines[0].split()[:2] == ["STARTED", "RUN"]
    assert "abcdef123456" in text and "fedcba654321" in text
    assert "ok" in lines[3] and "failed" in lines[2] and "skipped+dry" in lines[1]
    assert "10→7" in lines[3] and "-→-" in lines[2]
    assert "1200/340" in lines[3]
    assert "llm timed out after 60 s" in lines[2]
    assert "nothing to do" in lines[1] and "user" in lines[1]
    assert "/tmp/projects/proj-a" in lines[3]
    assert render_table([]) == "no dreams recorded"


_WRITER = """
import sys
from pathlib import Path
from opencode_memoryd.dream.journal import DreamJournal
j = DreamJournal(Path(sys.argv[1]))
for i in range(50):
    assert j.append({"run_id": f"p{sys.argv[2]}-{i}", "status": "ok", "scope": "user"})
"""


@pytest.mark.slow
def test_concurrent_appends_from_processes(jpath: Path) -> None:
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, str(jpath), str(p)])
             for p in range(3)]
    assert [p.wait(timeout=60) for p in procs] == [0, 0, 0]
    lines = jpath.read_bytes().splitlines()
    assert len(lines) == 150
    assert len({json.loads(x)["run_id"] for x in lines}) == 150
