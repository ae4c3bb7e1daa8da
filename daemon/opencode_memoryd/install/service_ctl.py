"""Starting and stopping the user service through the service manager.

:mod:`.service` writes the unit or plist; this module asks systemd (``systemctl --user``)
or launchd (``launchctl``) to load, start, stop and unload it, where that manager can be
reached. Where it cannot (a container without systemd: ``systemctl --user`` says "Failed
to connect to bus"), nothing is run and the caller prints the commands instead.

A systemd user manager is reachable when ``systemctl`` is on ``PATH`` and
``$XDG_RUNTIME_DIR/systemd/private`` exists: the socket ``systemctl --user`` connects to
(``man systemctl``, ``--user``; ``man systemd``, the user manager's runtime directory).
launchd is reachable when ``launchctl`` is on ``PATH`` (every macOS login).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from opencode_memoryd.install.service import LAUNCHD_LABEL, SYSTEMD_UNIT_NAME, service_path

__all__ = [
    "Step",
    "disable_steps",
    "enable_steps",
    "is_running",
    "manager_problem",
    "prune_empty",
    "remove_wants_links",
    "run_steps",
]

_TIMEOUT_SECONDS = 60.0


@dataclass(frozen=True, slots=True)
class Step:
    """One service-manager command and what came of it.

    Attributes:
        argv: the command.
        returncode: its exit status; ``None`` when it was not run.
        output: its stderr (else stdout), stripped; empty when not run.
    """

    argv: tuple[str, ...]
    returncode: int | None = None
    output: str = ""

    @property
    def shell(self) -> str:
        """The command as one would type it."""
        import shlex

        return shlex.join(self.argv)

    @property
    def failed(self) -> bool:
        """Whether it ran and exited non-zero."""
        return self.returncode not in (None, 0)


def _linux(system: str) -> bool:
    return system.startswith("linux")


def manager_problem(system: str, env: Mapping[str, str]) -> str:
    """Why the service manager of ``system`` (``"linux"`` or ``"darwin"``) cannot be asked
    from here, for the user; empty when it can (see the module docstring)."""
    tool = "systemctl" if _linux(system) else "launchctl"
    if shutil.which(tool, path=env.get("PATH", os.defpath)) is None:
        return f"{tool} is not on PATH"
    if _linux(system):
        runtime = env.get("XDG_RUNTIME_DIR", "")
        if not runtime or not (Path(runtime) / "systemd" / "private").exists():
            return "no systemd user manager runs for this login ($XDG_RUNTIME_DIR/systemd/private)"
    return ""


def _domain() -> str:
    return f"gui/{os.getuid()}"


def enable_steps(system: str, path: Path, *, restart: bool) -> list[Step]:
    """The commands that load the service file at ``path`` and start it now and at each
    login; ``restart``: the file changed under a running service, which must re-read it."""
    if _linux(system):
        steps = [Step(("systemctl", "--user", "daemon-reload")),
                 Step(("systemctl", "--user", "enable", "--now", SYSTEMD_UNIT_NAME))]
        if restart:
            steps.append(Step(("systemctl", "--user", "restart", SYSTEMD_UNIT_NAME)))
        return steps
    steps = [Step(("launchctl", "bootout", f"{_domain()}/{LAUNCHD_LABEL}"))] if restart else []
    return [*steps, Step(("launchctl", "bootstrap", _domain(), str(path)))]


def disable_steps(system: str) -> list[Step]:
    """The commands that stop the service and keep it from starting at login; run them
    before the file is removed (a unit removed first leaves its ``.wants`` link and a
    running daemon behind)."""
    if _linux(system):
        return [Step(("systemctl", "--user", "disable", "--now", SYSTEMD_UNIT_NAME))]
    return [Step(("launchctl", "bootout", f"{_domain()}/{LAUNCHD_LABEL}"))]


def is_running(system: str, env: Mapping[str, str]) -> bool:
    """Whether the service is enabled and running (systemd: ``is-enabled`` and
    ``is-active`` both succeed; launchd: the job is loaded). ``False`` when the manager
    cannot be asked."""
    if manager_problem(system, env):
        return False
    checks: list[tuple[str, ...]]
    if _linux(system):
        checks = [("systemctl", "--user", "is-enabled", "--quiet", SYSTEMD_UNIT_NAME),
                  ("systemctl", "--user", "is-active", "--quiet", SYSTEMD_UNIT_NAME)]
    else:
        checks = [("launchctl", "print", f"{_domain()}/{LAUNCHD_LABEL}")]
    return all(_run(argv, env).returncode == 0 for argv in checks)


def run_steps(steps: Sequence[Step], env: Mapping[str, str], *, keep_going: bool = False
              ) -> list[Step]:
    """Run each step in order; stop after the first failure unless ``keep_going``.
    Returns the steps with their outcome (those not run keep ``returncode`` ``None``)."""
    done: list[Step] = []
    stopped = False
    for step in steps:
        if stopped:
            done.append(step)
            continue
        done.append(_run(step.argv, env))
        stopped = done[-1].failed and not keep_going
    return done


def _run(argv: Sequence[str], env: Mapping[str, str]) -> Step:
    try:
        done = subprocess.run(list(argv), env=dict(env), capture_output=True, text=True,
                              timeout=_TIMEOUT_SECONDS, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Step(tuple(argv), 127, str(exc))
    output = (done.stderr or done.stdout).strip()
    return Step(tuple(argv), done.returncode, output)


def remove_wants_links(env: Mapping[str, str], *, dry_run: bool = False) -> list[Path]:
    """The ``*.wants/opencode-memoryd.service`` links of the user's unit folder (what
    ``systemctl --user enable`` made), removed unless ``dry_run``; for when systemd cannot
    be asked to disable the unit itself. Returns the links."""
    folder = service_path(system="linux", env=env).parent
    if not folder.is_dir():
        return []
    links = sorted(p for p in folder.glob(f"*.wants/{SYSTEMD_UNIT_NAME}") if p.is_symlink())
    if not dry_run:
        for link in links:
            link.unlink(missing_ok=True)
            _remove_if_empty(link.parent)
    return links


def _remove_if_empty(folder: Path) -> None:
    with contextlib.suppress(OSError):
        folder.rmdir()


def prune_empty(folders: Sequence[Path], *, stop: Path) -> list[Path]:
    """Remove each folder of ``folders`` that is empty, then its parents while they are
    empty, up to (not including) ``stop``; a folder not under ``stop`` is left alone.
    Returns the removed folders."""
    limit = stop
    removed = []
    for folder in folders:
        current = folder
        while current != limit and limit in current.parents:
            try:
                current.rmdir()
            except OSError:
                break
            removed.append(current)
            current = current.parent
    return removed
