"""``install-opencode`` / ``uninstall-opencode``: connect OpenCode to the daemon."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from opencode_memoryd.cli.commands import COMMANDS
from opencode_memoryd.cli.exits import EXIT_OK
from opencode_memoryd.config.paths import CONFIG_ENV_VAR

if TYPE_CHECKING:
    from opencode_memoryd.compose import App
    from opencode_memoryd.install.files import InstallReport


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``install-opencode`` and ``uninstall-opencode`` to the CLI."""
    i = sub.add_parser(
        "install-opencode",
        help=COMMANDS["install-opencode"],
        description="Writes $XDG_CONFIG_HOME/opencode/plugin/opencode-memoryd.js, one "
                    "file for OpenCode 1.x and 2.x that finds the daemon's socket when a "
                    "session asks, and adds mcp.memoryd to the global opencode.json(c), "
                    "keeping every other key, comment and the formatting (both go into "
                    "$OPENCODE_CONFIG_DIR when that is set). Says which OpenCode "
                    "`opencode --version` on PATH reports. Running it again changes "
                    "nothing.")
    i.add_argument("--dry-run", action="store_true", help="print what would change; "
                                                          "write nothing")
    i.add_argument("--force", action="store_true",
                   help="replace a plugin file or mcp.memoryd entry we did not write")
    i.set_defaults(handler=cmd_install)
    u = sub.add_parser("uninstall-opencode",
                       help=COMMANDS["uninstall-opencode"])
    u.add_argument("--dry-run", action="store_true", help="print what would change; "
                                                          "write nothing")
    u.add_argument("--force", action="store_true",
                   help="also remove a plugin file or mcp.memoryd entry we did not write")
    u.set_defaults(handler=cmd_uninstall)


def _print(report: InstallReport) -> None:
    verb = "would " if report.dry_run else ""
    for change in report.changes:
        action = "keep" if change.action == "unchanged" else change.action
        print(f"{verb}{action}: {change.path} ({change.kind})"
              + (f"  [{change.note}]" if change.note else ""))
    if report.dry_run and report.diff:
        print(report.diff, end="" if report.diff.endswith("\n") else "\n")


def cmd_install(app: App, args: argparse.Namespace) -> int:
    """``install-opencode``: the plugin file and the MCP entry."""
    from opencode_memoryd.install import opencode
    from opencode_memoryd.install.opencode_plugin import opencode_version, version_note

    env = dict(app.env)
    if args.config:  # the MCP server must read the same config file as this command
        env[CONFIG_ENV_VAR] = str(app.config_path)
    report = opencode.install(dry_run=args.dry_run, env=env, force=args.force)
    _print(report)
    print(f"plugin: {version_note(opencode_version(app.env))}")
    if not args.dry_run and report.changed:
        print("restart OpenCode to load them; the daemon must run for memories to arrive "
              "(`opencode-memoryd install-service`)")
    return EXIT_OK


def cmd_uninstall(app: App, args: argparse.Namespace) -> int:
    """``uninstall-opencode``: remove what ``install-opencode`` added."""
    from opencode_memoryd.install import opencode

    _print(opencode.uninstall(dry_run=args.dry_run, env=app.env, force=args.force))
    return EXIT_OK
