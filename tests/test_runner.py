"""The capture runner (:mod:`opencode_memoryd.capture.runner`) on the real OpenCode sample
database, a real state file and a real embedded store: a window of sessions read ahead at
once, each session processed and committed, a stop leaving the rest unread."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from conftest import write_config
from opencode_memoryd.capture.batching import WriteGroup
from opencode_memoryd.capture.runner import CaptureRunner, Step
from opencode_memoryd.cli.main import load_app
from opencode_memoryd.models import Mark
from opencode_memoryd.source.reader import OpenCodeDB


def test_the_runner_reads_ahead_by_window_processes_and_stops_when_asked(
        tmp_path: Path, sample_db: Path, isolated_env: dict[str, str]) -> None:
    cfg = write_config(tmp_path / "cfg.toml", f'[opencode]\ndb_paths = ["{sample_db}"]\n'
                       'settle_seconds = 0\n[extraction]\nmode = "rules"\n')
    app = load_app(str(cfg), "maintain", False, isolated_env)
    state, store = app.open_state(), app.open_store()
    source = app.open_source(sample_db)
    try:
        ids = [s.id for s in source.sessions(directory=None)]
        assert len(ids) >= 5
        rows = {s.id: s for s in source.sessions(directory=None)}
        ident = source.identity
        seen: list[tuple[str, dict[str, Mark] | None]] = []

        def step(step: Step) -> None:
            seen.append((step.key[1], step.ends))
            step.processor().process(rows[step.key[1]], ends=step.ends)

        def source_of(source_id: str) -> OpenCodeDB | None:
            return source if source_id == ident else None

        with WriteGroup(state, store) as group:
            runner = CaptureRunner(
                group, lambda db: app.session_processor(db, state, store,
                                                        app.build_extractor(),
                                                        batch=group.batch),
                source_of, window=2, should_stop=lambda: len(seen) >= 3)
            report = runner.run([(ident, sid) for sid in ids], step)
            assert runner.processor(ident) is runner.processor(ident)  # one per database
        assert (report.visited, report.stopped) == (3, True)
        assert [sid for sid, _ in seen] == ids[:3]
        # each window of two sessions is read at once: its newest rows, as the database has them
        assert seen[0][1] == seen[1][1] == source.last_messages(ids[0:2])
        assert seen[2][1] == source.last_messages(ids[2:4])
        with sqlite3.connect(app.state_path) as c:
            marked = {r[0] for r in c.execute("SELECT session_id FROM marks")}
        # the sessions worked are read up to their newest row and committed; the rest waits
        assert marked == set(ids[:3])
    finally:
        source.close()
        store.close()
        state.close()
