"""The daemon's kept context blocks (``usecases/context_cache.py``): served again while
nothing changed, built again when the store or an OpenCode database is written."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import write_config
from opencode_memoryd.compose import App
from opencode_memoryd.config.loader import load_config
from opencode_memoryd.usecases.context_cache import ContextCache
from opencode_writer import OpenCodeWriter
from test_context import ACME, ACME_KEY, MAIN, SEED, SUBAGENT, mem


@pytest.fixture
def app(tmp_path: Path, sample_db: Path, isolated_env: dict[str, str]) -> App:
    cfg = write_config(tmp_path / "cfg.toml", f"""
[opencode]
settle_seconds = 0
db_paths = ["{sample_db}"]
[extraction]
mode = "rules"
[context]
max_entries = 2
""")
    # two entries: what the block shows anyway leaves room for the task's hits
    return App(config=load_config(cfg, isolated_env), env=isolated_env, config_path=cfg)


def test_repeated_requests_are_served_until_the_store_is_written(app: App) -> None:
    store = app.open_store()
    cache = ContextCache(app, store)
    try:
        store.upsert(SEED)
        first = cache.context(directory=ACME, session=MAIN, project=None, query=None)
        assert "pnpm" in first["text"]
        assert len(cache.pool.databases()) == 1  # one connection, kept open
        again = cache.context(directory=ACME, session=MAIN, project=None, query=None)
        assert again == first
        store.upsert([mem("Releases are tagged vX.Y.Z.", minutes=60, type_="feedback")])
        after = cache.context(directory=ACME, session=MAIN, project=None, query=None)
        assert "Releases are tagged vX.Y.Z." in after["text"]
        sub = cache.context(directory=ACME, session=SUBAGENT, project=None, query=None)
        assert sub["reason"] == "sub-agent session"
    finally:
        cache.close()
        store.close()


def test_a_new_opencode_session_is_seen_at_once(app: App, sample_db: Path,
                                                tmp_path: Path) -> None:
    # a folder with no session yet, then OpenCode opens one there: the folder's project
    # and the session's first message must be read again, not served from before
    folder = str(tmp_path / "acme-worktree")
    store = app.open_store()
    cache = ContextCache(app, store)
    writer = OpenCodeWriter(sample_db)
    try:
        store.upsert(SEED)
        before = cache.context(directory=folder, session=None, project=None, query=None)
        assert before["project_keys"] == [] and "pnpm" not in before["text"]
        sid = writer.new_session(project_id=ACME_KEY, directory=folder)
        empty = cache.context(directory=folder, session=sid, project=None, query=None)
        assert empty["project_keys"] == [ACME_KEY] and "pnpm" in empty["text"]
        assert "relevant" not in empty["sections"]  # no first message yet, no query
        writer.append_turn(sid, "Which GitHub Actions deploys does this project use?")
        found = cache.context(directory=folder, session=sid, project=None, query=None)
        assert found["sections"].get("relevant"), found
    finally:
        writer.close()
        cache.close()
        store.close()
