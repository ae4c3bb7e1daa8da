"""End-to-end harness: the genuine OpenCode CLI in an isolated sandbox, talking to a stand-in model.

What a test gets (fixture ``opencode_sandbox`` in ``tests/e2e/conftest.py``)::

    def test_block_reaches_model(opencode_sandbox: OpenCodeSandbox) -> None:
        opencode_sandbox.install_plugin(Path("my-plugin.js"))         # or the JS text
        opencode_sandbox.add_mcp("memoryd", [sys.executable, "server.py"], {"K": "V"})
        opencode_sandbox.script("look it up", call_tool("memoryd_memory", query="pnpm"),
                                reply("Found it."))
        first = opencode_sandbox.run("please look it up")              # a new session
        again = opencode_sandbox.run("and again", session=first.session_id)
        chat = first.chat_requests                                    # without the title one
        assert chat[0].system[1] == "..."                             # what OpenCode sent
        assert "memoryd_memory" in chat[0].tool_names

* :class:`OpenCodeSandbox` builds, under the test's ``tmp_path``: ``HOME``, the four XDG
  folders (``XDG_CONFIG_HOME/opencode/opencode.json`` holds the global config with the stub
  provider, written before every run from :attr:`OpenCodeSandbox.config`; plugins go in
  ``XDG_CONFIG_HOME/opencode/plugin/``), a git project with a fixed author and date (so its
  OpenCode project id, the root-commit hash, is the same on every run) and, under ``/tmp``
  (Unix socket paths are limited to 107 bytes), ``XDG_RUNTIME_DIR``.
* OpenCode runs with only the sandbox's environment (:attr:`OpenCodeSandbox.env`: ``PATH``,
  ``LANG``, ``HOME``, the XDG variables and the ``OPENCODE_DISABLE_*`` switches that keep it
  off the network); a test may add variables, e.g. the daemon's socket path.
* The model is :class:`stub_model.StubModel`, in the test process; every request body it
  receives is kept (:attr:`OpenCodeSandbox.requests`, and per run :attr:`RunResult.requests`).
* :meth:`OpenCodeSandbox.run` is ``opencode run --format json [--session ID] MESSAGE`` in the
  project (``PWD`` set: OpenCode takes its directory from it), with a timeout, returning a
  :class:`RunResult` (exit code, stdout events, session id, wall time, the requests).

Requirements and how to run::

    tests/e2e/install-opencode.sh             # once: opencode-ai@1.18.33 into .cache/, ripgrep
    python -m pytest tests/e2e                 # the tests are marked slow

Environment variables:

* ``OPENCODE_BIN``: the OpenCode binary to test (default ``.cache/opencode-ai/bin/opencode``);
* ``CI``: when set (and not ``0``/``false``), a missing binary, ``rg``, ``git`` or ``npm`` makes
  the tests fail instead of skip.

When a config folder has a plugin, OpenCode first installs ``@opencode-ai/plugin`` into it from
the npm registry, which adds 4-7 s (once 40 s) and a registry round trip to the first run of
every sandbox. The session fixture installs the same package once with npm into a base folder
(about 5 s) that every sandbox copies as hard links; OpenCode accepts it as installed.

Measured on the 2-core machine (OpenCode 1.18.33): ``opencode --version`` 1.5 s; a first run in
a fresh sandbox 4.5-6.5 s, a run that continues a session 3.5-8 s (the spread is machine load);
a turn with one call to a Python MCP server 6-10 s.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .opencode_install import link_tree
from .stub_model import ModelRequest, Step, StepFn, StubModel

#: The switches the OpenCode fixture generator sets: no update checks, model list fetches,
#: sharing, LSP downloads, built-in plugins or Claude Code files.
DISABLE_SWITCHES = (
    "OPENCODE_DISABLE_AUTOUPDATE", "OPENCODE_DISABLE_MODELS_FETCH", "OPENCODE_DISABLE_SHARE",
    "OPENCODE_DISABLE_LSP_DOWNLOAD", "OPENCODE_DISABLE_DEFAULT_PLUGINS",
    "OPENCODE_DISABLE_CLAUDE_CODE",
)
GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "Sandbox", "GIT_AUTHOR_EMAIL": "sandbox@example.invalid",
    "GIT_COMMITTER_NAME": "Sandbox", "GIT_COMMITTER_EMAIL": "sandbox@example.invalid",
    "GIT_AUTHOR_DATE": "2026-01-15T10:00:00Z", "GIT_COMMITTER_DATE": "2026-01-15T10:00:00Z",
    "GIT_CONFIG_NOSYSTEM": "1",
}


@dataclass(frozen=True)
class RunResult:
    """One ``opencode run``.

    Attributes:
        returncode: OpenCode's exit code.
        stdout: its standard output (``--format json``: one JSON event per line).
        stderr: its standard error.
        events: the stdout lines that parse as JSON objects, in order.
        session_id: the ``sessionID`` of the events (``None`` when there was none).
        seconds: wall time from start to exit.
        requests: the model requests received while it ran, in arrival order.
        log_errors: the ``level=ERROR`` lines OpenCode added to its log during the run
            (e.g. ``message="failed to load plugin" ... error="Plugin export is not a function"``).
    """

    returncode: int
    stdout: str
    stderr: str
    events: list[dict[str, Any]]
    session_id: str | None
    seconds: float
    requests: list[ModelRequest]
    log_errors: list[str]

    @property
    def text(self) -> str:
        """The assistant's text parts of this run, joined with newlines."""
        return "\n".join(
            str(e["part"].get("text", "")) for e in self.events
            if e.get("type") == "text" and isinstance(e.get("part"), dict)
        )

    @property
    def chat_requests(self) -> list[ModelRequest]:
        """:attr:`requests` without OpenCode's title-generation request."""
        return [r for r in self.requests if not r.is_title]


class OpenCodeSandbox:
    """An isolated OpenCode installation, a git project and a stand-in model.

    Args:
        root: an empty folder for the sandbox (a test's ``tmp_path``).
        opencode: the OpenCode binary.
        model: the running stand-in model the config points at.
        warm_config: a folder from :func:`opencode_install.install_plugin_dependency` to copy
            into the config folder, or ``None`` (OpenCode then installs the dependency itself
            when it needs it).

    Attributes:
        home, config_dir, data_dir, runtime_dir, tmp_dir, project: the sandbox's folders
            (``config_dir`` is ``$XDG_CONFIG_HOME/opencode``).
        env: the environment every run gets (a test may add to it).
        config: the global ``opencode.json``, written before every run.
        timings: ``(message, seconds)`` of every run so far.
    """

    def __init__(self, root: Path, opencode: Path, model: StubModel,
                 warm_config: Path | None = None) -> None:
        self.root = root
        self.opencode = opencode
        self.model = model
        self.home = root / "home"
        xdg = {"XDG_CONFIG_HOME": root / "config", "XDG_DATA_HOME": root / "data",
               "XDG_STATE_HOME": root / "state", "XDG_CACHE_HOME": root / "cache"}
        self.runtime_dir = Path(tempfile.mkdtemp(prefix="oc-run-", dir="/tmp"))
        self.config_dir = xdg["XDG_CONFIG_HOME"] / "opencode"
        self.data_dir = xdg["XDG_DATA_HOME"] / "opencode"
        # OpenCode's runtime unpacks a native library (about 5 MB) into $TMPDIR at every
        # start and leaves it: here it goes into the runtime folder, removed by close()
        self.tmp_dir = self.runtime_dir / "tmp"
        for d in (self.home, *xdg.values(), self.config_dir / "plugin", self.tmp_dir):
            d.mkdir(parents=True, exist_ok=True)
        if warm_config is not None:
            link_tree(warm_config, self.config_dir)
        self.env: dict[str, str] = {
            "PATH": os.environ.get("PATH") or "/usr/bin:/bin", "LANG": "C.UTF-8",
            "HOME": str(self.home), "XDG_RUNTIME_DIR": str(self.runtime_dir),
            "TMPDIR": str(self.tmp_dir),
            **{k: str(v) for k, v in xdg.items()}, **dict.fromkeys(DISABLE_SWITCHES, "1"),
        }
        if shutil.which("rg", path=self.env["PATH"]) is None:
            raise RuntimeError(f"rg is not on PATH {self.env['PATH']}: OpenCode would download it")
        self.config: dict[str, Any] = stub_config(model.base_url)
        self.project = self.make_project(root / "project")
        self.timings: list[tuple[str, float]] = []

    # -- set-up -------------------------------------------------------------------------
    def make_project(self, path: Path, files: Mapping[str, str] | None = None) -> Path:
        """A git repository at ``path`` with ``files`` (default a README) in one commit by a
        fixed author at a fixed date. Returns ``path``."""
        for rel, text in (files or {"README.md": "# Sandbox project\n"}).items():
            (path / rel).parent.mkdir(parents=True, exist_ok=True)
            (path / rel).write_text(text)
        env = {"PATH": self.env["PATH"], "HOME": str(self.home), **GIT_IDENTITY}
        for cmd in (["git", "init", "-q", "-b", "main"], ["git", "add", "-A"],
                    ["git", "commit", "-q", "-m", "Initial commit"]):
            subprocess.run(cmd, cwd=path, env=env, check=True, capture_output=True)
        return path

    @property
    def db_path(self) -> Path:
        """OpenCode's database, ``$XDG_DATA_HOME/opencode/opencode.db`` (exists after a run)."""
        return self.data_dir / "opencode.db"

    @property
    def project_id(self) -> str:
        """OpenCode's id for :attr:`project`: its root-commit hash (40 hex digits)."""
        out = subprocess.run(["git", "rev-list", "--max-parents=0", "HEAD"], cwd=self.project,
                             capture_output=True, text=True, check=True)
        return out.stdout.split()[0]

    def install_plugin(self, source: Path | str, name: str | None = None) -> Path:
        """Put a plugin into ``$XDG_CONFIG_HOME/opencode/plugin/``, which OpenCode auto-loads.

        ``source`` is a file to copy (keeping its name unless ``name`` is given) or the
        module's JavaScript text (written as ``name``, default ``test-plugin.js``).
        Returns the installed file.
        """
        if isinstance(source, Path):
            dest = self.config_dir / "plugin" / (name or source.name)
            shutil.copyfile(source, dest)
        else:
            dest = self.config_dir / "plugin" / (name or "test-plugin.js")
            dest.write_text(source)
        return dest

    def add_mcp(self, name: str, command: Sequence[str],
                environment: Mapping[str, str] | None = None, **options: Any) -> None:
        """Configure a local (stdio) MCP server as ``config["mcp"][name]``.

        ``command`` is the argv (absolute program path recommended); ``environment`` is added
        to OpenCode's own environment for the server; ``options`` (``timeout`` in ms,
        ``cwd``, ``enabled``) go into the entry unchanged. OpenCode names the server's tools
        ``<name>_<tool>``.
        """
        entry: dict[str, Any] = {"type": "local", "command": list(command), "enabled": True}
        if environment:
            entry["environment"] = dict(environment)
        self.config.setdefault("mcp", {})[name] = entry | options

    def script(self, match: str, *steps: Step | StepFn) -> None:
        """Script the model's answers; see :meth:`stub_model.StubModel.script`."""
        self.model.script(match, *steps)

    @property
    def requests(self) -> list[ModelRequest]:
        """Every model request so far (title requests included), in arrival order."""
        return self.model.requests

    # -- running ------------------------------------------------------------------------
    def cli(self, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        """Any other OpenCode command in the project, e.g. ``cli("mcp", "list")`` (which shows
        whether each MCP server connected: OpenCode drops a failing one without a log line) or
        ``cli("debug", "config")``. Terminal colour codes are removed from stdout."""
        self._write_config()
        done = subprocess.run([str(self.opencode), *args], cwd=self.project,
                              env=self.env | {"PWD": str(self.project)}, capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        done.stdout = re.sub(r"\x1b\[[0-9;]*m", "", done.stdout)
        return done

    def run(self, message: str, session: str | None = None, *, cwd: Path | None = None,
            timeout: float = 90.0, check: bool = True) -> RunResult:
        """``opencode run --format json [--session ID] MESSAGE`` in ``cwd`` (default the project).

        OpenCode stores a multi-word message wrapped in double quotes. Stdout and stderr go to
        files under ``root/runs/`` (kept for debugging). On timeout (seconds) the process group
        is killed. Raises ``AssertionError`` on timeout, or, when ``check``, on a non-zero exit
        or an ERROR line in OpenCode's log (a plugin that failed to load does not stop a run).
        """
        cwd = cwd or self.project
        self._write_config()
        cmd = [str(self.opencode), "run", "--format", "json"]
        cmd += ["--session", session] if session else []
        runs = self.root / "runs"
        runs.mkdir(exist_ok=True)
        out_path, err_path = (runs / f"{len(self.timings):02d}.{s}" for s in ("stdout", "stderr"))
        seen, errors_before = len(self.model.requests), len(self.log_errors())
        start = time.monotonic()
        with out_path.open("w") as out, err_path.open("w") as err:
            proc = subprocess.Popen([*cmd, message], cwd=cwd, env=self.env | {"PWD": str(cwd)},
                                    stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                    start_new_session=True)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                _kill_group(proc.pid, signal.SIGKILL)
                proc.wait()
                raise AssertionError(
                    f"opencode run timed out after {timeout} s\n{self.diagnostics(err_path)}"
                ) from None
            finally:
                _kill_group(proc.pid, signal.SIGTERM)  # e.g. an MCP server left behind
        seconds = time.monotonic() - start
        self.timings.append((message, seconds))
        result = _result(proc.returncode, out_path.read_text(), err_path.read_text(), seconds,
                         self.model.requests[seen:], self.log_errors()[errors_before:])
        if check and (result.returncode != 0 or result.log_errors):
            raise AssertionError(f"opencode run exited {result.returncode}\n"
                                 + "".join(f"{line}\n" for line in result.log_errors)
                                 + self.diagnostics(err_path))
        return result

    def log_errors(self) -> list[str]:
        """Every ``level=ERROR`` line of OpenCode's log so far, oldest first."""
        return [line for log in sorted((self.data_dir / "log").glob("*.log"))
                for line in log.read_text().splitlines() if " level=ERROR " in line]

    def diagnostics(self, stderr: Path | None = None) -> str:
        """The tail of a run's stderr and of OpenCode's own log, for failure messages."""
        parts = []
        if stderr is not None and stderr.exists():
            parts.append("stderr:\n" + stderr.read_text()[-3000:])
        for log in sorted((self.data_dir / "log").glob("*.log")):
            parts.append(f"{log.name}:\n" + log.read_text()[-3000:])
        return "\n".join(parts)

    @property
    def config_file(self) -> Path:
        """The global config file, ``$XDG_CONFIG_HOME/opencode/opencode.json``."""
        return self.config_dir / "opencode.json"

    def write_config(self) -> Path:
        """Write :attr:`config` to :attr:`config_file` (every run does it first); returns
        the file."""
        self.config_file.write_text(json.dumps(self.config, indent=2))
        return self.config_file

    def adopt_config_file(self) -> dict[str, Any]:
        """Take :attr:`config_file` as it is now (e.g. after an installer edited it) as
        :attr:`config`, so later runs keep the edit. The file must be plain JSON (an
        installer's JSONC comments are not kept). Returns the new :attr:`config`."""
        self.config = json.loads(self.config_file.read_text())
        return self.config

    def _write_config(self) -> None:
        self.write_config()

    def close(self) -> None:
        """Remove the runtime folder under ``/tmp`` (the rest lives in ``root``)."""
        shutil.rmtree(self.runtime_dir, ignore_errors=True)


def stub_config(base_url: str) -> dict[str, Any]:
    """The global ``opencode.json``: only the stub provider (``stub/stub-coder`` for turns,
    ``stub/stub-small`` for titles), no autoupdate or sharing, no LSP or formatters, and
    permissions that never stop a run to ask (web fetches denied)."""
    return {
        "autoupdate": False,
        "share": "disabled",
        "enabled_providers": ["stub"],
        "model": "stub/stub-coder",
        "small_model": "stub/stub-small",
        "provider": {"stub": {
            "npm": "@ai-sdk/openai-compatible",
            "name": "Stub model (scripted, loopback)",
            "options": {"baseURL": base_url, "apiKey": "stub-key-not-secret"},
            "models": {
                "stub-coder": {"name": "Stub Coder", "tool_call": True,
                               "limit": {"context": 32000, "output": 4000}},
                "stub-small": {"name": "Stub Small", "tool_call": False,
                               "limit": {"context": 32000, "output": 1000}},
            },
        }},
        "permission": {"edit": "allow", "bash": "allow", "webfetch": "deny",
                       "external_directory": "allow"},
        "lsp": False,
        "formatter": False,
    }


def _result(code: int, stdout: str, stderr: str, seconds: float,
            requests: list[ModelRequest], log_errors: list[str]) -> RunResult:
    events = []
    for line in stdout.splitlines():
        with contextlib.suppress(ValueError):
            obj = json.loads(line)
            if isinstance(obj, dict):
                events.append(obj)
    session = next((str(e["sessionID"]) for e in events if e.get("sessionID")), None)
    return RunResult(code, stdout, stderr, events, session, seconds, requests, log_errors)


def _kill_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
