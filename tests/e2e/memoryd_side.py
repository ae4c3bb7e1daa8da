"""opencode-memoryd beside a sandboxed OpenCode: its config, store, daemon and CLI.

Everything runs as real processes with the sandbox's environment (its ``HOME``, XDG folders
and ``XDG_RUNTIME_DIR``), so the daemon's socket, the plugin that ``install-opencode``
writes and the MCP server OpenCode starts all agree without a path being passed around::

    side = Memoryd(sandbox)                  # writes a rules-mode config file
    side.seed([memory("...", project=sandbox.project_id, root=sandbox.project)])
    side.start()                             # `opencode-memoryd run`, waits until it serves
    side.install_opencode()                  # the real command, into the sandbox's config
    first = sandbox.run("...")               # the plugin and the MCP server talk to it
    side.cli_json("list", "--all")           # any command, through the daemon

The code under test is this checkout's: ``PYTHONPATH`` names its ``daemon/`` folder in
:attr:`Memoryd.env` and in the sandbox's environment, which OpenCode passes on to the MCP
servers it starts.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterable
from contextlib import closing
from datetime import datetime
from pathlib import Path
from typing import Any

import opencode_memoryd
from opencode_memoryd.compose import DAEMON_INFO_FILE
from opencode_memoryd.config.loader import load_config
from opencode_memoryd.config.paths import state_dir, store_dir
from opencode_memoryd.models import Memory, content_hash, point_id
from opencode_memoryd.serve.control.client import ControlClient
from opencode_memoryd.store.edge import EdgeStore

from .opencode_sandbox import OpenCodeSandbox

#: The ``daemon/`` source root of this checkout.
DAEMON_SOURCE = Path(opencode_memoryd.__file__).resolve().parents[1]
#: Longest wait (s) for the daemon to serve after its start (a loaded 2-core machine).
START_TIMEOUT = 120.0


def memory(content: str, *, type_: str = "project", scope: str = "project",
           project: str | None = None, root: Path | str | None = None,
           when: datetime) -> Memory:
    """A memory as the rules extractor would store it (id from scope, project, type, text).

    ``project`` and ``root`` are ignored for ``scope="user"``.
    """
    pkey = None if scope == "user" else project
    return Memory(
        id=point_id(scope, pkey, type_, content),  # type: ignore[arg-type]
        content=content, type=type_, scope=scope,  # type: ignore[arg-type]
        project_id=pkey, project_root=str(root) if pkey and root else None,
        session_id="ses_seed", message_ids=["msg_seed"], source="rules",
        created_at=when, updated_at=when, session_ids=["ses_seed"],
        content_hash=content_hash(content))


class Memoryd:
    """opencode-memoryd for one sandbox.

    Args:
        sandbox: the OpenCode sandbox; its ``env`` gains ``PYTHONPATH``.
        config: extra TOML appended to the config file (``[opencode] settle_seconds = 0``
            and ``[extraction] mode = ...`` are always there).
        mode: the extraction mode.
        name: the config file's name in the sandbox's root (without ``.toml``); a second
            installation needs its own name, state dir and store path.

    Attributes:
        config_path: the config file (``--config`` of every command).
        env: the environment of every command and of the daemon.
        proc: the running daemon, or ``None``.
    """

    def __init__(self, sandbox: OpenCodeSandbox, config: str = "", *, mode: str = "rules",
                 name: str = "memoryd") -> None:
        self.sandbox = sandbox
        sandbox.env["PYTHONPATH"] = str(DAEMON_SOURCE)
        self.env = dict(sandbox.env)
        self.config_path = sandbox.root / f"{name}.toml"
        self.config_path.write_text(
            f'[opencode]\nsettle_seconds = 0\n\n[extraction]\nmode = "{mode}"\n\n{config}')
        cfg = load_config(self.config_path, self.env)
        self.state_dir = state_dir(cfg, self.env)
        self.store_dir = store_dir(cfg, self.env)
        self.proc: subprocess.Popen[bytes] | None = None

    # -- the store and the daemon ---------------------------------------------------------
    def seed(self, memories: Iterable[Memory]) -> None:
        """Upsert ``memories`` into the embedded store (only while no daemon runs)."""
        assert self.proc is None, "the daemon owns the store while it runs"
        store = EdgeStore(self.store_dir)
        try:
            store.upsert(list(memories))
        finally:
            store.close()

    @property
    def socket(self) -> Path:
        """The control socket the running daemon recorded in ``daemon.json``."""
        return Path(json.loads((self.state_dir / DAEMON_INFO_FILE).read_text())["socket"])

    def start(self) -> None:
        """Start ``opencode-memoryd run`` and return once it answers a ping.

        Raises ``AssertionError`` when it exits or does not serve within
        :data:`START_TIMEOUT` seconds (the log file's tail is in the message).
        """
        assert self.proc is None
        self.proc = subprocess.Popen(self._argv("run"), env=self.env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        end = time.monotonic() + START_TIMEOUT
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise AssertionError(f"the daemon exited {self.proc.returncode}\n{self.log()}")
            if self._serving():
                return
            time.sleep(0.05)
        raise AssertionError(f"the daemon did not serve within {START_TIMEOUT} s\n{self.log()}")

    def _serving(self) -> bool:
        try:
            sock = self.socket
        except (OSError, ValueError, KeyError):
            return False
        with ControlClient(sock, timeout_seconds=5) as client:
            return client.ping() == self.proc.pid if self.proc else False

    def stop(self) -> None:
        """Stop the daemon (SIGTERM, as systemd does) and wait for it to exit."""
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGCONT)  # a paused daemon must see the SIGTERM
        self.proc.terminate()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def pause(self) -> None:
        """Freeze the daemon (SIGSTOP): its socket still accepts, nobody answers."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """Undo :meth:`pause`."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    def log(self) -> str:
        """The tail of the daemon's log file."""
        logs = sorted(self.state_dir.glob("*.log"))
        return "\n".join(f"{p.name}:\n{p.read_text()[-4000:]}" for p in logs)

    # -- the CLI --------------------------------------------------------------------------
    def _argv(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "opencode_memoryd", "--config", str(self.config_path),
                *args]

    def cli(self, *args: str, check: bool = True, timeout: float = 180.0
            ) -> subprocess.CompletedProcess[str]:
        """``opencode-memoryd --config CONFIG ARGS`` in the project folder; with ``check``,
        a non-zero exit raises ``AssertionError`` with its output."""
        done = subprocess.run(self._argv(*args), env=self.env, cwd=self.sandbox.project,
                              capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
        if check and done.returncode != 0:
            raise AssertionError(f"opencode-memoryd {' '.join(args)} exited "
                                 f"{done.returncode}\n{done.stdout}\n{done.stderr}")
        return done

    def cli_json(self, *args: str) -> Any:
        """:meth:`cli` with ``--json``, decoded."""
        return json.loads(self.cli(*args, "--json").stdout)

    def marked_sessions(self) -> set[str]:
        """The sessions the state file has a high-water mark for (read-only)."""
        path = self.state_dir / "state.db"
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            return {row[0] for row in db.execute("SELECT session_id FROM marks")}

    def memories(self) -> dict[str, dict[str, Any]]:
        """Every memory, tombstones too (``list --all``), by id."""
        return {m["id"]: m for m in self.cli_json("list", "--all", "--everywhere")}

    def install_opencode(self) -> Path:
        """Run ``install-opencode`` into the sandbox's global config and keep its
        ``mcp.memoryd`` entry for every later run. Returns the plugin file it wrote."""
        self.sandbox.write_config()
        self.cli("install-opencode")
        config = self.sandbox.adopt_config_file()
        assert config["mcp"]["memoryd"]["command"][-1] == "mcp", config
        plugin = self.sandbox.config_dir / "plugin" / "opencode-memoryd.js"
        assert plugin.is_file()
        return plugin

    def close(self) -> None:
        """Stop the daemon if it runs."""
        self.stop()
