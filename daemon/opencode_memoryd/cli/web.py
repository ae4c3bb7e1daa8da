"""``web``: open the daemon's web page in a browser, with the access token."""

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
                                   "[web] enabled = true. Prints the address with the "
                                   "access token (the token file is web-token in the state "
                                   "dir); the browser gets a one-time login code instead, "
                                   "good for two minutes. Refused inside OpenCode "
                                   "(OPENCODE=1): the token acts as you.")
    w.add_argument("--print", dest="print_only", action="store_true",
                   help="only print the address, do not start a browser")
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


def cmd_web(app: App, args: argparse.Namespace) -> int:
    """``web [--print]``: print the page's address with the token, and open the page in a
    browser with a one-time login code (good for two minutes) instead of the token; exit 1
    when the page is off or no daemon serves it, 6 inside OpenCode (``OPENCODE=1``: the
    agent's shell), where the token would make the agent the user."""
    if app.env.get(OPENCODE_ENV_VAR) == "1":
        print("opencode-memoryd: web: refused inside OpenCode (OPENCODE=1): the page's token "
              "acts as the user; open the page from your own shell", file=sys.stderr)
        return EXIT_REFUSED
    import time
    import webbrowser

    from opencode_memoryd.web.token import (
        load_or_create_token,
        login_code,
        page_url,
        read_web_info,
    )

    cfg = app.config.web
    where = app.config_path or "the config file"
    if not cfg.enabled:
        print(f"opencode-memoryd: the web page is off: set `[web] enabled = true` in {where} "
              "and restart the daemon", file=sys.stderr)
        return EXIT_FAILURE
    info = read_web_info(app.state_dir)
    if info is None or not _alive(info.get("pid")):
        print("opencode-memoryd: no daemon serves the web page: start it (`opencode-memoryd "
              f"run`, or its service); it will listen on {page_url(cfg.host, cfg.port)}",
              file=sys.stderr)
        return EXIT_FAILURE
    host, port = str(info["host"]), int(info["port"])
    token = load_or_create_token(app.state_dir)
    print(page_url(host, port, token))
    # the browser gets a one-time code, not the token: its command line is readable by
    # every user of this machine, and the page's port too
    if not args.print_only and not webbrowser.open(
            page_url(host, port, code=login_code(token, time.time()))):
        print("opencode-memoryd: no browser could be started; open the address above",
              file=sys.stderr)
    return EXIT_OK
