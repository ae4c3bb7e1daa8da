"""``web``: open the daemon's web page in a browser, logged in with a one-time code."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from opencode_memoryd.cli.commands import COMMANDS
from opencode_memoryd.cli.exits import EXIT_FAILURE, EXIT_OK, EXIT_REFUSED
from opencode_memoryd.cli.manage import OPENCODE_ENV_VAR

if TYPE_CHECKING:
    from opencode_memoryd.compose import App


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``web`` to the CLI."""
    w = sub.add_parser("web", help=COMMANDS["web"],
                       description="Open the page the daemon serves on 127.0.0.1 when "
                                   "[web] enabled = true, logged in with a one-time code "
                                   "(good once, for two minutes). The browser is started "
                                   "with the path of web-login.html (mode 0600, in the "
                                   "state dir), which holds the code: no secret goes on "
                                   "its command line. Refused inside OpenCode (OPENCODE=1): "
                                   "the page acts as you.")
    w.add_argument("--print", dest="print_only", action="store_true",
                   help="only print the page's address with a one-time code (#code=…, "
                        "good once, for two minutes), do not start a browser")
    w.set_defaults(handler=cmd_web)


def _alive(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def not_served(app: App, info: dict[str, object] | None) -> str:
    """Why no page answers, for ``web``: the daemon could not bind its port (another
    program holds it: the setting to change), it started before ``[web]`` was enabled (a
    restart), or no daemon runs."""
    from opencode_memoryd.config.paths import daemon_info
    from opencode_memoryd.web.token import page_url

    cfg = app.config.web
    where = app.config_path or "the config file"
    if info is not None and _alive(info.get("pid")) and info.get("error"):
        if info.get("port_taken"):
            return (f"the daemon (pid {info['pid']}) could not serve the web page: "
                    f"{info.get('host')}:{info.get('port')} is taken by another program "
                    f"(`ss -ltnp 'sport = :{info.get('port')}'` shows which); set `[web] port` "
                    f"in {where} to a free port (0: any free port) and restart the daemon")
        return (f"the daemon (pid {info['pid']}) could not serve the web page: "
                f"{info['error']}; change `[web]` in {where} and restart the daemon")
    pid = daemon_info(str(app.state_dir)).get("pid")
    if _alive(pid):
        return (f"the daemon (pid {pid}) started before `[web] enabled = true`: restart it "
                "(`systemctl --user restart opencode-memoryd`, or stop `opencode-memoryd "
                "run` and start it again)")
    return ("no daemon serves the web page: start it (`opencode-memoryd run`, or its "
            f"service); it will listen on {page_url(cfg.host, cfg.port)}")


def cmd_web(app: App, args: argparse.Namespace) -> int:
    """``web [--print]``: open the page in a browser through a ``0600`` login page that
    holds a one-time code (good for two minutes), and print the page's address; with
    ``--print``, print the address with the code instead. Exit 1 when the page is off or
    no daemon serves it, or the login page cannot be written; 6 inside OpenCode
    (``OPENCODE=1``: the agent's shell), where a login would make the agent the user."""
    if app.env.get(OPENCODE_ENV_VAR) == "1":
        print("opencode-memoryd: web: refused inside OpenCode (OPENCODE=1): the page "
              "acts as the user; open it from your own shell", file=sys.stderr)
        return EXIT_REFUSED
    import time
    import webbrowser

    from opencode_memoryd.errors import StateError
    from opencode_memoryd.web.token import (
        load_or_create_token,
        login_code,
        page_url,
        read_web_info,
        write_login_page,
    )

    cfg = app.config.web
    where = app.config_path or "the config file"
    if not cfg.enabled:
        print(f"opencode-memoryd: the web page is off: set `[web] enabled = true` in {where} "
              "and restart the daemon", file=sys.stderr)
        return EXIT_FAILURE
    info = read_web_info(app.state_dir)
    if info is None or not _alive(info.get("pid")) or info.get("error"):
        print(f"opencode-memoryd: {not_served(app, info)}", file=sys.stderr)
        return EXIT_FAILURE
    host, port = str(info["host"]), int(info["port"])
    token = load_or_create_token(app.state_dir)
    with_code = page_url(host, port, code=login_code(token, time.time()))
    if args.print_only:
        print(with_code)
        return EXIT_OK
    # a browser's command line is readable by every user of this machine: it gets the
    # path of a 0600 file that holds the code, never the code
    try:
        login_page = write_login_page(app.state_dir, with_code)
    except StateError as exc:
        print(f"opencode-memoryd: {exc}; `opencode-memoryd web --print` prints an address "
              "to open instead", file=sys.stderr)
        return EXIT_FAILURE
    print(page_url(host, port))
    if not webbrowser.open(login_page.as_uri()):
        print("opencode-memoryd: no browser could be started; open "
              f"{login_page.as_uri()} in one within two minutes, or the address "
              "`opencode-memoryd web --print` prints", file=sys.stderr)
    return EXIT_OK
