"""Shared helpers of the daemon benchmarks (``daemon_latency.py``, ``daemon_cpu.py``).

Each benchmark runs ``opencode-memoryd run`` as a real child process in a throw-away
environment: HOME and every XDG folder (and TMPDIR) point into a temporary directory,
``OPENCODE_DB`` and the other variables that could reach a real setup are removed, and
the daemon reads its OpenCode database from ``$XDG_DATA_HOME/opencode/opencode.db``.
Nothing here talks to the network.
"""

from __future__ import annotations

import json
import math
import os
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
FIXTURE = TESTS / "fixtures" / "opencode-sample.db"

#: Variables never passed to the daemon (they could point it at a real setup).
_DROPPED_ENV = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENCODE_DB", "OPENCODE_MEMORYD_CONFIG",
                "XDG_RUNTIME_DIR", "OPENCODE_MEMORYD_FAULT", "PYTHONPATH")

_CLK_TCK = os.sysconf("SC_CLK_TCK")

sys.path.insert(0, str(TESTS))
from opencode_writer import OpenCodeWriter  # noqa: E402


class TimedWriter(OpenCodeWriter):
    """An ``OpenCodeWriter`` that notes when the session row was first committed.

    That commit (the ``INSERT INTO session`` of a new session, else a turn's first
    ``time_updated`` bump) is what the daemon keys on: the turn's earlier message inserts
    leave the session row unchanged. Reset ``session_commit`` to ``None`` before a turn.
    """

    session_commit: float | None = None

    def _commit(self, sql: str, params: tuple[Any, ...]) -> None:
        super()._commit(sql, params)
        if self.session_commit is None and (sql.startswith("INSERT INTO session")
                                            or sql.startswith("UPDATE session")):
            self.session_commit = time.time()


def home_dirs(root: Path) -> dict[str, str]:
    """HOME, the XDG folders and TMPDIR inside ``root`` (created): a throw-away home."""
    home = root / "home"
    env = {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local/share"),
        "XDG_STATE_HOME": str(home / ".local/state"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "TMPDIR": str(root / "tmp"),
    }
    for p in env.values():
        Path(p).mkdir(parents=True, exist_ok=True)
    return env


class Sandbox:
    """A temporary HOME with its XDG folders, a config file and the daemon's paths.

    Args:
        root: an empty folder (the caller creates and removes it).
        config: the TOML text of the config file.
    """

    def __init__(self, root: Path, config: str) -> None:
        self.root = root
        self.env = home_dirs(root)
        self.data_dir = Path(self.env["XDG_DATA_HOME"]) / "opencode"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.opencode_db = self.data_dir / "opencode.db"
        self.state_dir = Path(self.env["XDG_STATE_HOME"]) / "opencode-memoryd"
        self.state_db = self.state_dir / "state.db"
        self.config = root / "config.toml"
        self.config.write_text(config)
        self.stderr_path = root / "daemon.stderr"

    def full_env(self) -> dict[str, str]:
        """The child's environment: ours, minus anything that could reach a real setup."""
        env = {k: v for k, v in os.environ.items() if k not in _DROPPED_ENV}
        env.update(self.env)
        env["PATH"] = os.environ.get("PATH", "/usr/bin:/bin")
        # the daemon under test is this checkout's, whatever the environment installed
        env["PYTHONPATH"] = str(ROOT / "daemon")
        return env

    def cli(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        """Run one ``opencode-memoryd`` command to completion."""
        return subprocess.run([sys.executable, "-m", "opencode_memoryd", "--config",
                               str(self.config), *args], env=self.full_env(),
                              capture_output=True, text=True, timeout=timeout)

    def start_daemon(self) -> Daemon:
        """Start ``opencode-memoryd run`` (stderr goes to a file, never a full pipe)."""
        err = self.stderr_path.open("ab")
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "opencode_memoryd", "--config", str(self.config), "run"],
                env=self.full_env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=err)
        finally:
            err.close()
        return Daemon(proc, self)


class Daemon:
    """A running daemon child process."""

    def __init__(self, proc: subprocess.Popen[bytes], box: Sandbox) -> None:
        self.proc = proc
        self.box = box
        self.started = time.monotonic()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def check_alive(self) -> None:
        """Raise with the stderr tail when the daemon has exited."""
        if not self.alive():
            raise RuntimeError(f"daemon exited with code {self.proc.returncode}\n"
                               f"stderr tail:\n{self.stderr_tail()}")

    def cpu_seconds(self) -> float:
        """User + system CPU time of the daemon (all its threads), from /proc/<pid>/stat."""
        raw = Path(f"/proc/{self.pid}/stat").read_text()
        fields = raw[raw.rindex(")") + 2:].split()
        # fields[0] is the state (field 3); utime and stime are fields 14 and 15
        return (int(fields[11]) + int(fields[12])) / _CLK_TCK

    def thread_cpu(self) -> dict[int, tuple[str, float]]:
        """Each thread's ``(name, CPU seconds)`` by its id (the names are the kernel's:
        a Python thread shows as its process unless the interpreter names it)."""
        out: dict[int, tuple[str, float]] = {}
        for task in Path(f"/proc/{self.pid}/task").iterdir():
            try:
                raw = (task / "stat").read_text()
            except OSError:  # the thread ended meanwhile
                continue
            name = raw[raw.index("(") + 1:raw.rindex(")")]
            fields = raw[raw.rindex(")") + 2:].split()
            out[int(task.name)] = (name, (int(fields[11]) + int(fields[12])) / _CLK_TCK)
        return out

    def context_switches(self) -> int:
        """Voluntary + involuntary context switches of all the daemon's threads (a count
        of wake-ups: an idle process that polls shows many)."""
        total = 0
        for task in Path(f"/proc/{self.pid}/task").iterdir():
            try:
                text = (task / "status").read_text()
            except OSError:  # the thread ended meanwhile
                continue
            for line in text.splitlines():
                if "ctxt_switches:" in line:
                    total += int(line.split()[1])
        return total

    def threads(self) -> int:
        """Number of threads of the daemon."""
        return sum(1 for _ in Path(f"/proc/{self.pid}/task").iterdir())

    def rss_mb(self) -> float:
        """Resident memory of the daemon, in MiB (VmRSS from /proc/<pid>/status)."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def stderr_tail(self, lines: int = 15) -> str:
        try:
            text = self.box.stderr_path.read_text(errors="replace")
        except OSError:
            return "(no stderr)"
        return "\n".join(text.splitlines()[-lines:])

    def caught_up(self) -> bool:
        """Whether the daemon logged ``catch_up_queued``: its first full pass over the
        databases is done, so from then on the queue reflects the catch-up work."""
        try:
            return '"catch_up_queued"' in (self.box.state_dir /
                                           "opencode-memoryd.log").read_text(errors="replace")
        except OSError:
            return False

    def wait_ready(self, timeout: float = 120) -> float:
        """Wait until start-up is complete (``daemon.json`` written: commands are served)
        and the first full pass is done (:meth:`caught_up`); return seconds taken."""
        info = self.box.state_dir / "daemon.json"
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            self.check_alive()
            if info.exists() and self.caught_up():
                return time.monotonic() - self.started
            time.sleep(0.02)
        raise TimeoutError(f"daemon not ready after {timeout} s\n{self.stderr_tail()}")

    def stop(self, timeout: float = 30) -> tuple[int | None, float]:
        """SIGTERM, wait; return (exit code, seconds to exit). Killed if it hangs."""
        if not self.alive():
            return self.proc.returncode, 0.0
        t = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None, time.monotonic() - t
        return self.proc.returncode, time.monotonic() - t

    def kill(self) -> None:
        """Last-resort cleanup (only this child)."""
        if self.alive():
            self.proc.kill()
            self.proc.wait()


class StateReader:
    """A read-only connection to the daemon's state file (safe while the daemon writes)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.conn: sqlite3.Connection | None = None

    def _c(self) -> sqlite3.Connection | None:
        if self.conn is None and self.path.exists():
            try:
                self.conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True,
                                            timeout=1, isolation_level=None,
                                            check_same_thread=False)
            except sqlite3.Error:
                return None
        return self.conn

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        c = self._c()
        if c is None:
            return []
        try:
            return c.execute(sql, params).fetchall()
        except sqlite3.OperationalError:  # table not created yet, a busy moment
            return []

    def queue_row(self, session_id: str) -> tuple[int, int] | None:
        """``(last_change_ms, due_ms)`` of a queued session, or ``None``."""
        rows = self.query("SELECT last_change_ms, due_ms FROM queue WHERE session_id=?",
                          (session_id,))
        return (int(rows[0][0]), int(rows[0][1])) if rows else None

    def queue_len(self) -> int:
        rows = self.query("SELECT count(*) FROM queue")
        return int(rows[0][0]) if rows else -1

    def mark(self, session_id: str) -> str | None:
        rows = self.query("SELECT message_id FROM marks WHERE session_id=?", (session_id,))
        return str(rows[0][0]) if rows else None

    def marks_count(self) -> int:
        rows = self.query("SELECT count(*) FROM marks")
        return int(rows[0][0]) if rows else 0

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def poll(pred: Callable[[], Any], *, timeout: float, interval: float = 0.003,
         alive: Callable[[], None] | None = None) -> tuple[Any, float]:
    """Call ``pred()`` every ``interval`` s until truthy; return (value, time.time() seen).

    Raises TimeoutError when ``timeout`` passes; ``alive()`` is called now and then so a
    crashed daemon ends the wait at once.
    """
    end = time.monotonic() + timeout
    n = 0
    while True:
        value = pred()
        seen = time.time()
        if value:
            return value, seen
        if time.monotonic() > end:
            raise TimeoutError
        n += 1
        if alive is not None and n % 100 == 0:
            alive()
        time.sleep(interval)


def pct(values: Sequence[float], q: float) -> float:
    """The ``q``-quantile (0..1) by the nearest-rank method."""
    s = sorted(values)
    if not s:
        return float("nan")
    k = max(0, min(len(s) - 1, math.ceil(q * len(s)) - 1))
    return s[k]


def summary_ms(values: Sequence[float]) -> str:
    """``p50 … ms, p95 … ms, max … ms (n=…)`` of values in seconds."""
    if not values:
        return "no samples"
    ms = [v * 1000 for v in values]
    return (f"p50 {statistics.median(ms):8.1f} ms   p95 {pct(ms, 0.95):8.1f} ms   "
            f"max {max(ms):8.1f} ms   min {min(ms):7.1f} ms   (n={len(ms)})")


def daemon_info(box: Sandbox) -> dict[str, Any]:
    try:
        return json.loads((box.state_dir / "daemon.json").read_text())
    except (OSError, ValueError):
        return {}


def control_call(sock: Path, route: str, payload: dict[str, Any] | None = None, *,
                 timeout: float = 5.0) -> tuple[int, Any]:
    """``POST /v1/<route>`` on the daemon's control socket (plain HTTP/1.1 over the Unix
    socket, no client library); return ``(status code, decoded JSON body)``.

    Raises:
        OSError: nothing listens there, or no answer within ``timeout`` seconds.
    """
    body = json.dumps(payload or {}).encode()
    request = (f"POST /v1/{route} HTTP/1.1\r\nHost: opencode-memoryd\r\n"
               f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
               "Connection: close\r\n\r\n").encode() + body
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(str(sock))
        s.sendall(request)
        chunks = []
        while True:
            got = s.recv(65536)
            if not got:
                break
            chunks.append(got)
    raw = b"".join(chunks)
    head, _, rest = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, json.loads(rest) if rest else None


def peak_rss_mb(pid: int) -> float:
    """Peak resident memory of a running process, in MiB (VmHWM)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")
