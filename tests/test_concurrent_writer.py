"""A live writer with OpenCode's PRAGMAs keeps committing while `maintain` reads.

The writer's work is bounded, not timed: it writes ``LIVE_TURNS`` finished turns, then
streams into one reply that stays in flight (what OpenCode commits most while a model
answers) until told to stop. `maintain` never reads past a turn in flight, so each run's
work is bounded too, however fast the writer commits, and the writer keeps committing
through every run.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import cli_json
from opencode_writer import OpenCodeWriter

#: Finished turns the live writer appends before it streams into a reply in flight.
LIVE_TURNS = 100

WRITER = r"""
import json, sqlite3, sys, os
sys.path.insert(0, sys.argv[3])
from opencode_writer import OpenCodeWriter
w = OpenCodeWriter(sys.argv[1], seed=7)
sid = w.new_session(project_id="feedfacefeedfacefeedfacefeedfacefeedface",
                    directory="/tmp/projects/live", worktree="/tmp/projects/live",
                    title="live")
stats = {"commits": 0, "busy": 0, "checkpoints": 0, "full": 0, "errors": []}
stop, turns = sys.argv[2], int(sys.argv[4])
written, part, text = 0, None, ""
print("ready", flush=True)
while not os.path.exists(stop):
    try:
        if written < turns:
            written += 1
            w.append_turn(sid, "keep going", "ok")
            stats["commits"] += 12
        elif part is None:
            part = w.append_turn(sid, "keep streaming", "", finish=False)["reply_part"]
            stats["commits"] += 7
            print("streaming", flush=True)
        else:
            text = (text + " token")[-2000:]
            w.stream(part, text)
            stats["commits"] += 1
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


def _maintain(config_file: Path, db: Path) -> None:
    report = cli_json("--config", str(config_file), "maintain", "--all", "--db", str(db))
    assert report["totals"]["failed"] == 0


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
        [sys.executable, "-c", WRITER, str(sample_db), str(stop), str(Path(__file__).parent),
         str(LIVE_TURNS)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        for _ in range(3):  # while the writer appends its turns (or already streams)
            _maintain(config_file, sample_db)
        # the writer has written all its turns and streams into a reply in flight ...
        assert proc.stdout.readline().strip() == "streaming"
        _maintain(config_file, sample_db)  # ... and keeps committing through this run
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
