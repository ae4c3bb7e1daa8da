"""What every check returns (:class:`Check`), what the checks are given (:class:`Context`)
and the edges they touch besides files (:class:`Probes`).

A check is a small function of a :class:`Context` returning one :class:`Check` or a list
of them; :func:`guarded` turns an exception raised by the check itself into a ``fail``
record, so one broken check never hides the others.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from opencode_memoryd.disk import access_problem
from opencode_memoryd.logs import LOG_FILE_NAME
from opencode_memoryd.state.db import StateDB

if TYPE_CHECKING:
    from opencode_memoryd.usecases.ports import AppPort

log = structlog.get_logger(__name__)

OK, WARN, FAIL, SKIP = "ok", "warn", "fail", "skip"
#: Every status, best first.
STATUSES: tuple[str, ...] = (OK, SKIP, WARN, FAIL)
#: How long a service-manager command may take, in seconds.
COMMAND_TIMEOUT_SECONDS = 10.0

#: Runs a command: ``(exit code, stdout + stderr)``, or ``None`` when the program is absent.
RunCommand = Callable[[Sequence[str]], "tuple[int, str] | None"]


@dataclass(frozen=True, slots=True)
class Check:
    """The outcome of one check.

    Attributes:
        name: the check's stable id (``database``, ``llm-endpoint``, ...).
        status: ``ok``, ``warn``, ``fail`` or ``skip`` (does not apply here).
        detail: what was found, one line.
        fix: what to do about it, one line (empty when there is nothing to do).
    """

    name: str
    status: str
    detail: str
    fix: str = ""

    def to_dict(self) -> dict[str, str]:
        """``{"name", "status", "detail", "fix"}`` (JSON-safe)."""
        return {"name": self.name, "status": self.status, "detail": self.detail,
                "fix": self.fix}


def run_command(argv: Sequence[str]) -> tuple[int, str] | None:
    """Run a short command (``systemctl``, ``launchctl``, ``loginctl``) found on ``PATH``.

    Returns:
        ``(exit code, stdout + stderr)``; ``None`` when the program is not installed; exit
        code ``-1`` with the error text when it could not run or took longer than
        :data:`COMMAND_TIMEOUT_SECONDS`.
    """
    exe = shutil.which(argv[0])
    if exe is None:
        return None
    try:
        done = subprocess.run([exe, *argv[1:]], capture_output=True, text=True,
                              timeout=COMMAND_TIMEOUT_SECONDS, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return -1, str(exc)
    return done.returncode, done.stdout + done.stderr


def disk_free(path: Path) -> int:
    """Free bytes for an unprivileged user on the file system holding ``path``.

    Raises:
        OSError: ``path`` cannot be examined.
    """
    return shutil.disk_usage(path).free


@dataclass(frozen=True, slots=True)
class DaemonProbe:
    """What the caller learned of a running daemon before the checks ran.

    Attributes:
        status: the daemon's answer to the ``status`` route (``daemon``, ``store``, ...),
            or ``None`` when no daemon answered.
        socket: the control socket ``daemon.json`` names, or ``None`` when there is no
            such file (no daemon, or one that stopped cleanly).
        error: why a daemon named by ``daemon.json`` gave no answer.
        integrity: the daemon's answer to the ``integrity`` route
            (:func:`~opencode_memoryd.usecases.integrity.store_integrity`), else ``None``
            and ``integrity_error`` says why.
    """

    status: dict[str, Any] | None = None
    socket: str | None = None
    error: str | None = None
    #: its answer to the ``integrity`` route, or why there was none
    integrity: dict[str, Any] | None = None
    integrity_error: str | None = None

    @property
    def running(self) -> bool:
        """A daemon answered."""
        return self.status is not None


@dataclass(frozen=True, slots=True)
class Probes:
    """The edges the checks touch besides files, each replaceable.

    Attributes:
        socket: the control socket the OpenCode plugin should talk to.
        socket_problem: why its folder or file is not certainly this user's (another
            user's, a link, open to others), or ``None``.
        daemon: what the caller learned of a running daemon.
        run: runs a service-manager command (:func:`run_command`).
        disk_free: free bytes under a path (:func:`disk_free`).
        platform: :data:`sys.platform`.
        llm_timeout_seconds: the longest wait for the LLM endpoint's answer.
    """

    socket: Path
    socket_problem: str | None = None
    daemon: DaemonProbe = field(default_factory=DaemonProbe)
    run: RunCommand = run_command
    disk_free: Callable[[Path], int] = disk_free
    platform: str = sys.platform
    llm_timeout_seconds: float = 15.0


class Context:
    """What every check is given: the application, the probes, one clock reading, and the
    state file opened at most once (and only when it exists: ``doctor`` creates nothing).

    Args:
        app: the configured application.
        probes: the edges.
    """

    def __init__(self, app: AppPort, probes: Probes) -> None:
        self.app = app
        self.probes = probes
        self.now = app.clock()
        self.now_ms = int(self.now.timestamp() * 1000)
        self._state: StateDB | None = None

    def state(self) -> StateDB | None:
        """The state file, or ``None`` when it does not exist yet.

        Raises:
            StateError: it exists but cannot be opened.
        """
        if self._state is None and self.app.state_path.exists():
            self._state = self.app.open_state()
        return self._state

    def close(self) -> None:
        """Close the state file if it was opened."""
        if self._state is not None:
            self._state.close()
            self._state = None


def guarded(name: str, check: Callable[[], Check | Sequence[Check]]) -> list[Check]:
    """Run one check; an exception it raises becomes a ``fail`` record named ``name`` (a
    file this user may not use: the path and the fix, see
    :func:`~opencode_memoryd.disk.access_problem`).

    Returns:
        The check's records, as a list.
    """
    try:
        result = check()
    except Exception as exc:
        cause = exc if isinstance(exc, OSError) else exc.__cause__
        problem = access_problem(cause) if isinstance(cause, OSError) else None
        if problem is not None:
            detail, _, fix = problem.partition("; fix: ")
            return [Check(name, FAIL, detail, fix or "use a writable folder")]
        log.exception("doctor_check_failed", check=name)
        return [Check(name, FAIL, f"the check itself failed: {type(exc).__name__}: {exc}",
                      f"see {LOG_FILE_NAME} in the state dir, and report it")]
    return [result] if isinstance(result, Check) else list(result)
