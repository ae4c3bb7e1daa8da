"""A dream never holds the daemon: SIGTERM during the start-up catch-up dream stops it
within 10 s, commands are answered while it runs, and a skipped dream closes the gate."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from conftest import ACME, cli, start_daemon, wait_until
from fake_openai import FakeOpenAI
from opencode_memoryd.compose import App
from opencode_memoryd.config.loader import load_config
from opencode_memoryd.dream.journal import DreamJournal
from opencode_memoryd.store.edge import EdgeStore
from opencode_memoryd.usecases.dreams import dream_gate
from test_dream_cli import (
    ACME_KEY,
    JOURNAL_FILE_NAME,
    PIPE_KEY,
    _daemon_ready,
    _paths,
    _prior,
    journal_lines,
    llm_config,
    planner,
    seed,
    store_snapshot,
)

#: How long the slow model thinks about each dream plan (s).
PLAN_SECONDS = 8.0


class SlowPlanner:
    """The scripted planner of ``test_dream_cli``, answering each plan slowly; counts the
    plan requests it got."""

    def __init__(self) -> None:
        self.plans = 0
        self.delay = PLAN_SECONDS
        self.lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Any:
        schema = ((body.get("response_format") or {}).get("json_schema") or {}).get("name")
        if schema == "dream_plan":
            with self.lock:
                self.plans += 1
            time.sleep(self.delay)
        return planner(body)


@pytest.fixture
def slow() -> Iterator[tuple[FakeOpenAI, SlowPlanner]]:
    model = SlowPlanner()
    with FakeOpenAI(responder=model) as fake:
        yield fake, model


def _timed(*args: str) -> tuple[int, float]:
    started = time.monotonic()
    code, _ = cli(*args)
    return code, time.monotonic() - started


@pytest.mark.slow
def test_sigterm_during_the_catch_up_dream_and_commands_meanwhile(
        tmp_path: Path, slow: tuple[FakeOpenAI, SlowPlanner], sample_db: Path,
        isolated_env: dict[str, str]) -> None:
    fake, model = slow
    cfg = llm_config(tmp_path / "d.toml", fake, "min_hours_between_dreams = 24\n"
                                                "min_new_memories = 1\n"
                                                "check_interval_minutes = 600\n")
    now = datetime.now(UTC)
    seed(cfg, isolated_env, base=now - timedelta(hours=3))
    # only acme-web's gate is open (its dream plans three groups); the others dreamed
    # an hour ago
    old = [_prior(ACME_KEY, now - timedelta(hours=48), "old0"),
           _prior(PIPE_KEY, now - timedelta(hours=1), "old1"),
           _prior(None, now - timedelta(hours=1), "old2")]
    journal = DreamJournal(_paths(cfg, isolated_env)[1] / JOURNAL_FILE_NAME)
    for entry in old:
        journal.append(entry)
    before = store_snapshot(cfg, isolated_env)
    proc = start_daemon(cfg, isolated_env)
    try:
        # the catch-up dream is planning (its first plan request is being answered)
        assert wait_until(lambda: model.plans >= 1, timeout=180)
        assert wait_until(lambda: _daemon_ready(cfg, proc), timeout=120)
        # commands are answered while it dreams (generous bounds: a busy machine), also
        # an extraction of the very project it dreams (the dream locks it only to apply)
        for args in (("status", "--json"), ("list", "--json"), ("search", "pnpm", "--json"),
                     ("maintain", "--dir", ACME, "--db", str(sample_db), "--json")):
            code, took = _timed("--config", str(cfg), *args)
            assert code == 0 and took < 5, (args, code, took)
        assert model.plans < 3  # still dreaming: the test measured during the dream
        stopped = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
        took = time.monotonic() - stopped
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0
    assert took < 10, f"SIGTERM took {took:.1f} s"
    # the interrupted dream changed nothing (maintain may have added memories of its
    # own), and says so in the journal (or was cut off in its model call, before it could)
    after = store_snapshot(cfg, isolated_env)
    assert {i: after.get(i) for i in before} == before
    interrupted = journal_lines(cfg, isolated_env)[len(old):]
    assert [e["status"] for e in interrupted] in ([], ["failed"])
    assert all("stopped" in (e["reason"] or "") for e in interrupted)
    # it did not count: the next start dreams acme-web again, to the end
    model.delay = 0
    proc = start_daemon(cfg, isolated_env)
    try:
        assert wait_until(lambda: any(e["status"] == "ok" for e in
                                      journal_lines(cfg, isolated_env)[len(old):]),
                          timeout=180)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    done = [e for e in journal_lines(cfg, isolated_env)[len(old):] if e["status"] == "ok"]
    assert [(e["project_key"], e["trigger"]) for e in done] == [(ACME_KEY, "catch-up")]


def test_a_skipped_dream_closes_the_gate(tmp_path: Path, isolated_env: dict[str, str]
                                         ) -> None:
    cfg_path = tmp_path / "c.toml"
    cfg_path.write_text("[dream]\nmin_hours_between_dreams = 24\nmin_new_memories = 0\n")
    env = dict(os.environ)
    app = App(config=load_config(cfg_path, env), env=env, config_path=cfg_path)
    journal = DreamJournal(tmp_path / "journal.jsonl")
    store = EdgeStore(tmp_path / "store")
    try:
        assert dream_gate(app, journal, store, ACME_KEY)[0]  # never dreamed: open
        skipped = _prior(ACME_KEY, datetime.now(UTC) - timedelta(hours=1), "skipped01")
        skipped.update(status="skipped", reason="no candidate groups")
        journal.append(skipped)
        is_open, why = dream_gate(app, journal, store, ACME_KEY)
        assert not is_open and why.startswith("last dream 1.0 h ago"), why
        failed = _prior(None, datetime.now(UTC) - timedelta(hours=1), "failed01")
        failed.update(status="failed", reason="stopped: the daemon is shutting down")
        journal.append(failed)
        assert dream_gate(app, journal, store, None)[0]  # a failed dream does not count
    finally:
        store.close()
