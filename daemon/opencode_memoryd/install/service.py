"""Service files: a systemd user unit (Linux) and a launchd agent (macOS) for ``run``.

The templates ship in ``opencode_memoryd/install/templates/`` and use :class:`string.Template`
placeholders. :func:`install` renders them with the real program path and the user's home,
writes the result where the user's service manager looks, and returns the command that
loads it; :func:`uninstall` removes the file. Neither function starts, stops or asks the
service manager anything: the CLI prints the command for the user to run.

Where the files go:

- Linux: ``$XDG_CONFIG_HOME/systemd/user/opencode-memoryd.service`` (default
  ``~/.config/systemd/user/``), one of the directories a systemd user manager reads units
  from (``man systemd.unit``, "unit file load path").
- macOS: ``~/Library/LaunchAgents/io.github.opencode-memoryd.plist``; logs go to
  ``~/Library/Logs/opencode-memoryd/``. The label follows launchd's reverse-DNS convention
  and is derived from the program name.

The program is given as a command line in POSIX shell syntax (:mod:`shlex`), such as
``/usr/local/bin/opencode-memoryd`` or ``'/opt/my tools/python' -m opencode_memoryd``;
its first word must be an absolute path. ``run`` is appended. :func:`default_executable`
picks the program of the running installation.

The rendered examples in the repository's ``systemd/`` folder come from
:mod:`opencode_memoryd.install.examples`.
"""

from __future__ import annotations

import os
import shlex
import string
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from xml.sax.saxutils import escape as xml_escape

from opencode_memoryd.config.paths import APP_NAME, CONFIG_ENV_VAR, xdg_config_home
from opencode_memoryd.install.files import write_atomic

__all__ = [
    "LAUNCHD_LABEL",
    "PINNED_ENV_VARS",
    "SYSTEMD_UNIT_NAME",
    "InstallResult",
    "UninstallResult",
    "default_executable",
    "install",
    "launchd_log_dir",
    "pinned_env",
    "program_argv",
    "render_launchd_plist",
    "render_systemd_unit",
    "service_path",
    "uninstall",
]

#: The systemd unit name (``systemctl --user status opencode-memoryd``).
SYSTEMD_UNIT_NAME = f"{APP_NAME}.service"
#: The launchd job label; the plist file is named after it.
LAUNCHD_LABEL = f"io.github.{APP_NAME}"
#: Variables copied from the installing environment into the service's environment when
#: set: they decide which config, OpenCode database and state the daemon uses. Secrets
#: (API keys) are never copied: unit files and plists are readable by other local users.
PINNED_ENV_VARS = (
    CONFIG_ENV_VAR,
    "OPENCODE_DB",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
)

PLIST_NAME = f"{LAUNCHD_LABEL}.plist"
_LAUNCHD_PATH_TAIL = ("/usr/bin", "/bin", "/usr/sbin", "/sbin")


@dataclass(frozen=True, slots=True)
class InstallResult:
    """What :func:`install` wrote (or would write, with ``dry_run``).

    Attributes:
        path: the unit file or plist.
        content: its full text.
        enable_command: the shell command that loads and starts the service.
        written: whether the file was written (``False`` for a dry run).
    """

    path: Path
    content: str
    enable_command: str
    written: bool


@dataclass(frozen=True, slots=True)
class UninstallResult:
    """What :func:`uninstall` did.

    Attributes:
        path: the unit file or plist.
        removed: whether a file was there and was removed.
        disable_command: the shell command that stops the service and unloads it.
    """

    path: Path
    removed: bool
    disable_command: str


# --------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------


def default_executable() -> str:
    """The command that runs this installation, in shell syntax, for the ``exe`` arguments.

    The ``opencode-memoryd`` console script next to :data:`sys.executable` when it exists
    (a venv, pipx or ``uv tool`` install), else ``<sys.executable> -m opencode_memoryd``.
    The interpreter path is made absolute but symlinks are kept, since a venv's
    ``bin/python`` is a symlink that must stay inside the venv.

    Raises:
        RuntimeError: Python cannot tell the path of its interpreter.
    """
    if not sys.executable:
        raise RuntimeError("cannot tell the path of the Python interpreter (sys.executable)")
    python = os.path.abspath(sys.executable)
    script = os.path.join(os.path.dirname(python), APP_NAME)
    if os.path.isfile(script) and os.access(script, os.X_OK):
        return shlex.join([script])
    return shlex.join([python, "-m", "opencode_memoryd"])


def render_systemd_unit(exe: str, *, env: Mapping[str, str]) -> str:
    """The systemd user unit that runs ``<exe> run``.

    ``exe`` is a command line in shell syntax whose first word is an absolute path (see
    the module docstring). ``env`` supplies the :data:`PINNED_ENV_VARS` that are set (XDG
    ones only when absolute, as the XDG spec requires); they join ``PYTHONUNBUFFERED=1``
    on the ``Environment=`` line. Words are quoted for systemd: ``%`` is doubled
    (``man systemd.unit``, specifiers) and so is ``$`` in the arguments of
    ``ExecStart=`` (``man systemd.service``, command lines: ``$$`` is a literal dollar;
    the program path itself is not subject to variable substitution).

    Raises:
        ValueError: ``exe`` is empty, not valid shell syntax, does not start with an
            absolute path, or contains control characters.
    """
    argv = _argv(exe)
    # systemd executes the first word as a path as written and substitutes variables only
    # in the arguments, so "$" is doubled in the arguments only.
    exec_start = " ".join(_systemd_word(a, in_exec=i > 0) for i, a in enumerate(argv))
    return fill_unit(exec_start, pinned_env(env))


def render_launchd_plist(exe: str, *, home: Path, env: Mapping[str, str] | None = None) -> str:
    """The launchd agent plist that runs ``<exe> run``.

    ``exe`` is as for :func:`render_systemd_unit`; ``home`` is the user's home, under which
    the stdout and stderr files go (``Library/Logs/opencode-memoryd/``). The environment
    holds ``PATH`` (the program's folder, then the system folders: launchd's own default
    is only the system folders), ``PYTHONUNBUFFERED=1`` and the :data:`PINNED_ENV_VARS` set
    in ``env``. ``launchd.plist(5)`` asks for an absolute program that neither forks into
    the background nor ignores SIGTERM; ``run`` does neither.

    Raises:
        ValueError: as :func:`render_systemd_unit`.
    """
    return fill_plist(_argv(exe), home=Path(home), env=pinned_env(env or {}))


def program_argv(exe: str) -> list[str]:
    """The words of the program command line ``exe`` (shell syntax, see the module docstring).

    Raises:
        ValueError: ``exe`` is empty, not valid shell syntax, does not start with an
            absolute path, or contains control characters.
    """
    try:
        argv = shlex.split(exe)
    except ValueError as e:
        raise ValueError(f"cannot parse the program command line {exe!r}: {e}") from None
    if not argv:
        raise ValueError("the program command line is empty")
    if not os.path.isabs(argv[0]):
        raise ValueError(f"the program must be an absolute path, not {argv[0]!r}")
    for arg in argv:
        if any(ord(c) < 0x20 or ord(c) == 0x7F for c in arg):
            raise ValueError(f"control character in the program command line: {arg!r}")
    return argv


def _argv(exe: str) -> list[str]:
    return [*program_argv(exe), "run"]


def pinned_env(env: Mapping[str, str]) -> list[tuple[str, str]]:
    """The :data:`PINNED_ENV_VARS` set in ``env``, as ``(name, value)`` pairs in that order.

    Empty values are left out, and so are relative ``XDG_*`` values (the XDG spec says to
    ignore them).

    Raises:
        ValueError: a value contains a control character.
    """
    pinned = []
    for name in PINNED_ENV_VARS:
        value = env.get(name, "")
        if not value or (name.startswith("XDG_") and not os.path.isabs(value)):
            continue
        if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
            raise ValueError(f"control character in ${name}: {value!r}")
        pinned.append((name, value))
    return pinned


def _systemd_word(arg: str, *, in_exec: bool) -> str:
    """One word of a systemd setting, quoted so that systemd reads back exactly ``arg``."""
    text = arg.replace("%", "%%")
    if in_exec:
        text = text.replace("$", "$$")
    if arg and arg != ";" and not any(c.isspace() or c in "\"'\\" for c in arg):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _template(name: str) -> string.Template:
    text = resources.files("opencode_memoryd.install").joinpath("templates", name)
    return string.Template(text.read_text(encoding="utf-8"))


def fill_unit(exec_start: str, env: list[tuple[str, str]]) -> str:
    pairs = [("PYTHONUNBUFFERED", "1"), *env]
    environment = " ".join(_systemd_word(f"{k}={v}", in_exec=False) for k, v in pairs)
    return _template(SYSTEMD_UNIT_NAME).substitute(
        exec_start=exec_start, environment=environment
    )


def fill_plist(argv: list[str], *, home: Path, env: list[tuple[str, str]]) -> str:
    logs = launchd_log_dir(home)
    path = [os.path.dirname(argv[0])]
    path += [p for p in _LAUNCHD_PATH_TAIL if p not in path]
    variables = [("PATH", ":".join(path)), ("PYTHONUNBUFFERED", "1"), *env]
    return _template(PLIST_NAME).substitute(
        label=LAUNCHD_LABEL,
        program_arguments="\n".join(f"    <string>{xml_escape(a)}</string>" for a in argv),
        stdout_path=xml_escape(str(logs / "stdout.log")),
        stderr_path=xml_escape(str(logs / "stderr.log")),
        environment_variables="\n".join(
            f"    <key>{xml_escape(k)}</key>\n    <string>{xml_escape(v)}</string>"
            for k, v in variables
        ),
    )


# --------------------------------------------------------------------------------------
# Installing
# --------------------------------------------------------------------------------------


def _system(system: str | None) -> str:
    name = sys.platform if system is None else system
    if name.startswith("linux"):
        return "linux"
    if name == "darwin":
        return "darwin"
    raise ValueError(f"no service manager support for {name!r}: only linux and darwin")


def _home(env: Mapping[str, str]) -> Path:
    home = env.get("HOME", "")
    return Path(home) if home else Path.home()


def launchd_log_dir(home: Path) -> Path:
    """The folder of the launchd agent's stdout and stderr files.

    ``<home>/Library/Logs/opencode-memoryd``, the per-user log folder of macOS.
    """
    return Path(home) / "Library" / "Logs" / APP_NAME


def service_path(*, system: str | None = None, env: Mapping[str, str] | None = None) -> Path:
    """The file :func:`install` writes: the systemd unit (linux) or the agent plist (darwin).

    ``system`` is ``"linux"`` or ``"darwin"`` (default: from :data:`sys.platform`); ``HOME``
    and ``XDG_CONFIG_HOME`` come from ``env`` (default: :data:`os.environ`).

    Raises:
        ValueError: another ``system``.
    """
    env = os.environ if env is None else env
    if _system(system) == "linux":
        return xdg_config_home(env) / "systemd" / "user" / SYSTEMD_UNIT_NAME
    return _home(env) / "Library" / "LaunchAgents" / PLIST_NAME


def install(
    *,
    system: str | None = None,
    dry_run: bool = False,
    env: Mapping[str, str] | None = None,
    exe: str | None = None,
) -> InstallResult:
    """Write the service file for this user; return it and the command that enables it.

    ``system`` and ``env`` are as for :func:`service_path`; ``exe`` defaults to
    :func:`default_executable`. Creates the missing directories (on macOS also the log
    directory, since launchd opens the log files but creates no folders) and replaces an
    existing file atomically, so installing twice leaves the same file. With ``dry_run``
    nothing on disk is touched.

    The enable command is ``systemctl --user daemon-reload && systemctl --user enable
    --now opencode-memoryd.service`` (reload unit files, then start now and at every
    login) or ``launchctl bootstrap gui/<uid> <plist>`` (load into the user's GUI domain;
    ``RunAtLoad`` starts it). After a re-install, a running service keeps its old
    settings until restarted (``systemctl --user restart``, or ``launchctl bootout`` then
    ``bootstrap``).

    Raises:
        ValueError: an unsupported ``system`` or a bad ``exe`` (see
            :func:`render_systemd_unit`).
        OSError: a directory or the file cannot be written.
    """
    env = os.environ if env is None else env
    name = _system(system)
    exe = default_executable() if exe is None else exe
    path = service_path(system=name, env=env)
    if name == "linux":
        content = render_systemd_unit(exe, env=env)
        enable = (
            f"systemctl --user daemon-reload && systemctl --user enable --now {SYSTEMD_UNIT_NAME}"
        )
        folders = [path.parent]
    else:
        home = _home(env)
        content = render_launchd_plist(exe, home=home, env=env)
        enable = f"launchctl bootstrap gui/{os.getuid()} {shlex.quote(str(path))}"
        folders = [path.parent, launchd_log_dir(home)]
    if not dry_run:
        for folder in folders:
            folder.mkdir(parents=True, exist_ok=True)
        write_atomic(path, content)
    return InstallResult(path=path, content=content, enable_command=enable, written=not dry_run)


def uninstall(
    *, system: str | None = None, env: Mapping[str, str] | None = None
) -> UninstallResult:
    """Remove the service file written by :func:`install`, if it is there.

    Only the file is removed; the running service is left alone. The disable command
    stops and unloads it: ``systemctl --user disable --now opencode-memoryd.service;
    systemctl --user daemon-reload`` or ``launchctl bootout gui/<uid>/<label>``. Run it
    before uninstalling; it also works afterwards (launchctl addresses the job by label,
    and systemd 252 still removes the enablement link of a missing unit and stops the
    loaded unit).

    Raises:
        ValueError: an unsupported ``system``.
        OSError: the file exists but cannot be removed.
    """
    env = os.environ if env is None else env
    name = _system(system)
    path = service_path(system=name, env=env)
    if name == "linux":
        disable = (
            f"systemctl --user disable --now {SYSTEMD_UNIT_NAME}; systemctl --user daemon-reload"
        )
    else:
        disable = f"launchctl bootout gui/{os.getuid()}/{LAUNCHD_LABEL}"
    try:
        path.unlink()
        removed = True
    except FileNotFoundError:
        removed = False
    return UninstallResult(path=path, removed=removed, disable_command=disable)
