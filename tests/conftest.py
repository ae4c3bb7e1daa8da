"""Shared fixtures. Every test runs with HOME and the XDG dirs inside its own tmp_path."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from opencode_memoryd.cli.main import main

FIXTURES = Path(__file__).parent / "fixtures"
SAMPLE_DB = FIXTURES / "opencode-sample.db"
MANIFEST = json.loads((FIXTURES / "opencode-sample.db.manifest.json").read_text())

ACME = "/tmp/projects/sample/acme-web"
PIPELINE = "/tmp/projects/sample/data-pipeline"


@pytest.fixture(scope="session")
def kingfisher_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One folder for the compiled redaction rule catalogue, shared by the runs' workers
    and the daemons they start (compiling it takes seconds, loading it a fraction): beside
    pytest's numbered run folders, in its own temporary root, never in a home."""
    base = tmp_path_factory.getbasetemp()
    root = next((p for p in base.parents if p.name.startswith("pytest-of-")), base)
    folder = root / "kingfisher-cache"
    folder.mkdir(mode=0o700, exist_ok=True)
    return folder


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                 kingfisher_cache: Path) -> dict[str, str]:
    """Point HOME and XDG_* into tmp_path and drop every variable that could leak in."""
    home = tmp_path / "isolated-home"
    home.mkdir()
    env = {
        "KF_RULE_CACHE_DIR": str(kingfisher_cache),
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local/share"),
        "XDG_STATE_HOME": str(home / ".local/state"),
        "PATH": "/usr/bin:/bin",
    }
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    for k in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENCODE_DB", "OPENCODE_MEMORYD_CONFIG",
              "XDG_RUNTIME_DIR", "OPENCODE_MEMORYD_FAULT"):
        monkeypatch.delenv(k, raising=False)
    return env


@pytest.fixture(autouse=True)
def restore_umask() -> Iterator[None]:
    """The CLI sets the process umask to 077; give the next test the umask it had."""
    import os

    old = os.umask(0o022)
    os.umask(old)
    yield
    os.umask(old)


@pytest.fixture
def sample_db(tmp_path: Path) -> Path:
    """A private copy of the real OpenCode 1.18.33 sample database."""
    dst = tmp_path / "opencode" / "opencode.db"
    dst.parent.mkdir(parents=True)
    shutil.copyfile(SAMPLE_DB, dst)
    return dst


def llm_section(fake: Any) -> str:
    """The ``[llm]`` table of a config that talks to ``fake`` (a running
    :class:`fake_openai.FakeOpenAI`): its URL, model ``test-model``, key variable
    ``TEST_LLM_KEY``, a 5 s timeout and no retries; for an f-string config text."""
    return (f'[llm]\nbase_url = "{fake.base_url}"\nmodel = "test-model"\n'
            'api_key_env = "TEST_LLM_KEY"\ntimeout_seconds = 5\nmax_retries = 0')


#: What ``write_config`` adds to a config without an ``[embedding]`` table: keyword search
#: only, as most tests are about something else (the local model's own tests pass
#: ``embedding=""`` to keep the default).
NO_EMBEDDING = '[embedding]\nprovider = "none"\n'


def write_config(path: Path, text: str = "", *, embedding: str = NO_EMBEDDING) -> Path:
    """Write a config file; tests read everything at once (settle 0 s). Without an
    ``[embedding]`` table in ``text``, ``embedding`` is added (default: no embedder)."""
    base = "[opencode]\nsettle_seconds = 0\n"
    if "[opencode]" in text:
        base = ""
    extra = "" if "[embedding]" in text else embedding
    path.write_text(base + text + ("\n" + extra if extra else ""))
    return path


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    """A rules-mode config file with no settle delay."""
    return write_config(tmp_path / "config.toml", "[extraction]\nmode = \"rules\"\n")


def cli(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    """Run the CLI in-process; return (exit code, stdout)."""
    out = io.StringIO()
    with redirect_stdout(out):
        code = main(list(args), env=env)
    return code, out.getvalue()


def cli_json(*args: str, env: dict[str, str] | None = None) -> Any:
    """Run the CLI with --json and decode its output (asserts exit 0)."""
    code, out = cli(*args, "--json", env=env)
    assert code == 0, out
    return json.loads(out)


def marks(state_db: Path) -> dict[str, tuple[int, str]]:
    """Every high-water mark in a state file, by session id."""
    with sqlite3.connect(state_db) as c:
        return {r[0]: (r[1], r[2]) for r in
                c.execute("SELECT session_id, time_created, message_id FROM marks")}


@pytest.fixture
def state_db(isolated_env: dict[str, str]) -> Iterator[Path]:
    """Where the state file of a test run lives."""
    yield Path(isolated_env["XDG_STATE_HOME"]) / "opencode-memoryd" / "state.db"


#: Every daemon :func:`start_daemon` started in the running test; :func:`reap_daemons`
#: kills those still running when the test ends, whatever happened in it.
_STARTED: list[subprocess.Popen[str]] = []


def start_daemon(cfg: Path, env: dict[str, str], *, capture: bool = False
                 ) -> subprocess.Popen[str]:
    """Start `opencode-memoryd run` as a real process with the test's isolated env.

    Output is discarded unless ``capture`` (then read it with ``communicate()``; a
    long-running daemon would block on a full pipe). The log file in the state dir keeps
    everything anyway. The test stops it itself; one still running when the test ends
    (a failed assertion before its ``finally``, a test that forgot) is killed then.
    """
    full = {**os.environ, **env, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "opencode_memoryd", "--config", str(cfg), "run"], env=full,
        stdout=subprocess.PIPE if capture else subprocess.DEVNULL,
        stderr=subprocess.PIPE if capture else subprocess.DEVNULL, text=True)
    _STARTED.append(proc)
    return proc


@pytest.fixture(autouse=True)
def reap_daemons() -> Iterator[None]:
    """Kill (SIGKILL) every daemon of :func:`start_daemon` the test left running, and wait
    for it, so no test run leaves a process behind."""
    yield
    while _STARTED:
        proc = _STARTED.pop()
        if proc.poll() is None:
            proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):  # SIGKILL cannot be refused
            proc.wait(timeout=30)


def read_marks(state_db: Path) -> dict[str, str]:
    """Session id -> last processed message id, read-only (safe while a daemon writes)."""
    if not state_db.exists():
        return {}
    try:
        with sqlite3.connect(f"file:{state_db}?mode=ro", uri=True) as c:
            return {r[0]: r[1] for r in c.execute("SELECT session_id, message_id FROM marks")}
    except sqlite3.Error:
        return {}


def socket_file(path: Path) -> Path:
    """A bound (not listening) Unix socket at ``path``, its folder made private (0700): a
    socket file where the plugin looks, that nothing answers."""
    path.parent.mkdir(mode=0o700, parents=True)
    path.parent.chmod(0o700)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.bind(str(path))
    return path


def wait_until(pred: Any, timeout: float = 30.0, interval: float = 0.1) -> bool:
    """Poll ``pred()`` until it is true or ``timeout`` seconds pass."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(interval)
    return False


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """After a run that ran ``tests/test_rules_corpus.py``: print the rules extractor's
    per-category table on the labelled corpus (whatever ``-s``, ``-q`` or ``-n`` say)."""
    ran = any(getattr(r, "nodeid", "").startswith("tests/test_rules_corpus.py")
              or "test_rules_corpus.py::" in getattr(r, "nodeid", "")
              for reports in terminalreporter.stats.values() for r in reports)
    if not ran:
        return
    from rules_scoring import load, score, table

    terminalreporter.write_sep("=", "rules extractor on the labelled corpus")
    for line in table(score(load())).splitlines():
        terminalreporter.write_line(line)
