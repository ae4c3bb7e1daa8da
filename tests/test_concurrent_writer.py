"""A live writer with OpenCode's PRAGMAs keeps committing while `maintain` reads."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from conftest import cli_json
from opencode_writer import OpenCodeWriter

WRITER = r"""
import json, sqlite3, sys, time, os
sys.path.insert(0, sys.argv[3])
from opencode_writer import OpenCodeWriter
w = OpenCodeWriter(sys.argv[1], seed=7)
sid = w.new_session(project_id="feedfacefeedfacefeedfacefeedfacefeedface",
                    directory="/tmp/projects/live", worktree="/tmp/projects/live",
                    title="live")
stats = {"commits": 0, "busy": 0, "checkpoints": 0, "full": 0, "errors": []}
stop = sys.argv[2]
print("ready", flush=True)
while not os.path.exists(stop):
    try:
        w.append_turn(sid, "keep going", "ok")
        stats["commits"] += 12
        busy, log, done = w.conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        stats["checkpoints"] += 1
        if busy == 0 and log == done:
            stats["full"] += 1
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            stats["busy"] += 1
        else:
            stats["errors"].append(str(exc))
print(json.dumps(stats), flush=True)
"""


def test_writer_never_busy_and_checkpoints_complete(sample_db: Path, config_file: Path,
                                                    tmp_path: Path) -> None:
    w = OpenCodeWriter(sample_db, seed=1)  # switches the copy to WAL, like the live file
    for i in range(60):
        sid = w.new_session(project_id=f"{i:040x}", directory=f"/tmp/projects/p{i}",
                            worktree=f"/tmp/projects/p{i}", title=f"s{i}")
        w.append_turn(sid, f"remember that service {i} listens on port {8000 + i}", "ok")
        w.append_turn(sid, "run the tests", "All green.", bash="pytest -q")
    w.close()
    stop = tmp_path / "stop"
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(sample_db), str(stop), str(Path(__file__).parent)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        started = time.monotonic()
        runs = 0
        while runs < 3 or time.monotonic() - started < 2:
            report = cli_json("--config", str(config_file), "maintain", "--all",
                              "--db", str(sample_db))
            assert report["totals"]["failed"] == 0
            runs += 1
    finally:
        stop.write_text("")
        out, _ = proc.communicate(timeout=30)
    stats = json.loads(out.strip().splitlines()[-1])
    print("writer stats:", stats)
    assert stats["errors"] == []
    assert stats["busy"] == 0
    assert stats["checkpoints"] > 0
    assert stats["full"] >= 1
    # every remembered port made it, once
    memories = cli_json("--config", str(config_file), "list")
    ports = [m for m in memories if "listens on port" in m["content"]]
    assert len(ports) == 60
