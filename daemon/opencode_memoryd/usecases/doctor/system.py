"""``daemon``, ``service`` and ``linger``: the daemon answers, its service is installed and
enabled (systemd user unit on Linux, launchd agent on macOS), and on Linux the user's
service manager outlives the login session (``loginctl`` linger).

The service managers are asked through :attr:`Probes.run`; a check whose program is not
installed, or that cannot reach its manager (a container without systemd), is ``skip``;
where no systemd user instance runs, no fix names ``systemctl --user enable``.
"""

from __future__ import annotations

import getpass
import os

from opencode_memoryd.install.service import (
    LAUNCHD_LABEL,
    SYSTEMD_UNIT_NAME,
    service_path,
)
from opencode_memoryd.usecases.doctor.model import FAIL, OK, SKIP, WARN, Check, Context

#: ``systemctl is-enabled`` answers meaning the unit starts at login.
ENABLED_STATES = frozenset({"enabled", "enabled-runtime", "linked", "linked-runtime",
                            "alias", "generated", "transient"})
#: ``systemctl is-enabled`` answers meaning the unit is known but will not start.
DISABLED_STATES = frozenset({"disabled", "static", "indirect", "masked", "masked-runtime",
                             "not-found", "bad"})
_START = ("`opencode-memoryd install` (it writes, enables and starts the service), or "
          "`opencode-memoryd run`")
#: ``systemctl --user is-system-running`` answers meaning the user's manager runs.
MANAGER_UP = frozenset({"running", "degraded", "starting", "initializing", "maintenance"})
_NO_MANAGER = ("start it with `opencode-memoryd run` (in a terminal multiplexer, or from "
               "your login profile): no systemd user instance runs here, so a user unit "
               "cannot be enabled")


def user_manager_state(ctx: Context) -> str | None:
    """``None`` when the user's systemd instance runs (or this is not Linux); else its
    ``systemctl --user is-system-running`` answer (``offline``, a bus error) or
    ``systemctl is not installed``."""
    if not ctx.probes.platform.startswith("linux"):
        return None
    answer = ctx.probes.run(["systemctl", "--user", "is-system-running"])
    if answer is None:
        return "systemctl is not installed"
    word = (answer[1].strip().splitlines() or [""])[0]
    return None if word in MANAGER_UP else (word or f"exit {answer[0]}")


def _start(ctx: Context) -> str:
    """How to start the daemon here: the service where a service manager runs."""
    return _START if user_manager_state(ctx) is None else _NO_MANAGER


def daemon_check(ctx: Context) -> Check:
    """The ``daemon`` check, from :attr:`Probes.daemon` (a failure first when the socket's
    folder is not certainly this user's: :attr:`Probes.socket_problem`)."""
    if ctx.probes.socket_problem:
        return Check("daemon", FAIL, ctx.probes.socket_problem,
                     "remove that folder (as its owner, or root), or set XDG_RUNTIME_DIR to "
                     "a folder of your own; then restart the daemon and run "
                     "`opencode-memoryd install-opencode`")
    probe = ctx.probes.daemon
    if probe.status is None:
        if probe.socket is not None:
            return Check("daemon", FAIL,
                         f"daemon.json names {probe.socket}, but no daemon answers there "
                         f"({probe.error or 'no answer'}): it stopped without cleaning up",
                         f"restart it: systemctl --user restart {SYSTEMD_UNIT_NAME}, or "
                         "`opencode-memoryd run`")
        return Check("daemon", WARN, "not running: nothing is captured until a daemon runs "
                                     "or `opencode-memoryd maintain` is run", _start(ctx))
    d = probe.status.get("daemon") or {}
    detail = (f"running (pid {d.get('pid')}, since {d.get('since')}, "
              f"{d.get('change_detection')}); "
              f"{d.get('pending_count', len(d.get('pending') or []))} session(s) "
              "pending" + ("; catching up" if d.get("catching_up") else "")
              + (f"; last error: {d['last_error']}" if d.get("last_error") else ""))
    if d.get("config_error"):
        return Check("daemon", WARN, f"{detail}; {d['config_error']}",
                     "fix the config file (`opencode-memoryd doctor` names the problem): the "
                     "daemon takes it up once it is valid, with no restart")
    paused = d.get("paused")
    if paused:
        return Check("daemon", WARN, f"{detail}; LLM work paused until {paused.get('until')}: "
                                     f"{paused.get('reason')}",
                     "fix the cause (see llm-endpoint); the daemon retries by itself")
    return Check("daemon", OK, detail)


def service_check(ctx: Context) -> Check:
    """The ``service`` check."""
    platform = ctx.probes.platform
    if platform.startswith("linux"):
        return _systemd_check(ctx)
    if platform == "darwin":
        return _launchd_check(ctx)
    return Check("service", SKIP, f"no service manager support on {platform}")


def _systemd_check(ctx: Context) -> Check:
    """The ``service`` check on Linux: the user unit and ``systemctl --user is-enabled``."""
    unit = service_path(system="linux", env=ctx.app.env)
    if not unit.exists():
        return Check("service", WARN, f"no systemd user unit at {unit}", _start(ctx))
    answer = ctx.probes.run(["systemctl", "--user", "is-enabled", SYSTEMD_UNIT_NAME])
    if answer is None:
        return Check("service", SKIP, f"{unit} exists; systemctl is not installed")
    word = (answer[1].strip().splitlines() or [""])[0]
    if word in ENABLED_STATES:
        return Check("service", OK, f"{unit}: {word}")
    manager = user_manager_state(ctx)
    if word in DISABLED_STATES and manager is not None:
        return Check("service", WARN, f"{unit}: {word}, and no systemd user instance "
                                      f"runs here ({manager})", _NO_MANAGER)
    if word in DISABLED_STATES:
        return Check("service", WARN, f"{unit}: {word}, so it does not start at login",
                     "systemctl --user daemon-reload && systemctl --user enable --now "
                     + SYSTEMD_UNIT_NAME)
    return Check("service", SKIP, f"{unit} exists; the user's systemd cannot be asked: "
                                  f"{word or answer[0]}")


def _launchd_check(ctx: Context) -> Check:
    """The ``service`` check on macOS: the agent's plist and ``launchctl print``."""
    plist = service_path(system="darwin", env=ctx.app.env)
    if not plist.exists():
        return Check("service", WARN, f"no launchd agent at {plist}", _START)
    answer = ctx.probes.run(["launchctl", "print", f"gui/{os.getuid()}/{LAUNCHD_LABEL}"])
    if answer is None:
        return Check("service", SKIP, f"{plist} exists; launchctl is not available")
    if answer[0] == 0:
        return Check("service", OK, f"{plist}: loaded")
    return Check("service", WARN, f"{plist} exists but is not loaded",
                 f"launchctl bootstrap gui/{os.getuid()} {plist}")


def linger_check(ctx: Context) -> Check:
    """The ``linger`` check (Linux, with the unit installed)."""
    if not ctx.probes.platform.startswith("linux"):
        return Check("linger", SKIP, "only systemd has linger")
    if not service_path(system="linux", env=ctx.app.env).exists():
        return Check("linger", SKIP, "no systemd user unit installed")
    user = ctx.app.env.get("USER") or getpass.getuser()
    answer = ctx.probes.run(["loginctl", "show-user", user, "-p", "Linger"])
    if answer is None:
        return Check("linger", SKIP, "loginctl is not installed")
    text = answer[1].strip()
    if answer[0] == 0 and text == "Linger=yes":
        return Check("linger", OK, f"{user}: the user's services run without a login")
    if answer[0] == 0 and text == "Linger=no":
        return Check("linger", WARN, f"{user}: the daemon stops when the last login session "
                                     "ends, and starts again only at the next login",
                     f"loginctl enable-linger {user}")
    return Check("linger", SKIP, f"logind cannot be asked: {(text.splitlines() or ['?'])[0]}")
