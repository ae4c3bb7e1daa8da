"""``config`` and ``install-service`` / ``uninstall-service``: setting things up."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from opencode_memoryd.cli.commands import COMMANDS
from opencode_memoryd.cli.exits import EXIT_FAILURE, EXIT_OK
from opencode_memoryd.cli.render import print_error
from opencode_memoryd.cli.uninstall_cmd import cmd_uninstall_service
from opencode_memoryd.config.paths import config_path
from opencode_memoryd.errors import RefusedError

if TYPE_CHECKING:
    from opencode_memoryd.compose import App


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``install-service``, ``uninstall-service`` and ``config`` to the CLI."""
    inst = sub.add_parser("install-service",
                          help=COMMANDS["install-service"])
    inst.add_argument("--dry-run", action="store_true",
                      help="print the file and where it would go; write nothing")
    inst.set_defaults(without_app=cmd_service)
    un = sub.add_parser("uninstall-service", help=COMMANDS["uninstall-service"])
    un.set_defaults(without_app=cmd_uninstall_service)

    c = sub.add_parser("config", help=COMMANDS["config"])
    csub = c.add_subparsers(dest="config_command", required=True, metavar="ACTION")
    ci = csub.add_parser("init", help="write a commented config file (never overwrites)")
    ci.add_argument("path", nargs="?", help="where (default: the config path)")
    ci.set_defaults(without_app=cmd_config_init)
    csub.add_parser("show", help="print the effective config and its path"
                    ).set_defaults(handler=cmd_config_show)
    csub.add_parser("path", help="print the config path").set_defaults(
        without_app=cmd_config_path)


def cmd_config_path(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    """``config path``: the config file this command line would read."""
    print(args.config or config_path(env))
    return EXIT_OK


def cmd_config_init(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    """``config init [PATH]``: write the commented example config (mode 0600).

    Raises:
        RefusedError: the file exists (exit 6); it is left as it was.
    """
    target = Path(args.path or args.config or config_path(env)).expanduser()
    try:
        from opencode_memoryd.config.loader import init_config

        written = init_config(target)
    except FileExistsError:
        raise RefusedError(f"{target} already exists; not overwritten") from None
    print(f"wrote {written}")
    return EXIT_OK


def cmd_config_show(app: App, args: argparse.Namespace) -> int:
    """``config show``: the effective config as TOML, under its path."""
    import tomli_w

    print(f"# {app.config_path}")
    print(tomli_w.dumps(app.config.model_dump(mode="json")))
    return EXIT_OK


def cmd_service(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    """``install-service`` (``uninstall-service`` is in :mod:`.uninstall_cmd`)."""
    from opencode_memoryd.install import service as service_files

    try:
        r = service_files.install(dry_run=args.dry_run, env=env)
    except ValueError as exc:
        print_error(exc)
        return EXIT_FAILURE
    if args.dry_run:  # nothing written: nothing to enable yet
        print(f"# would write {r.path} (dry run: nothing was written)\n{r.content}")
        return EXIT_OK
    print(f"wrote {r.path}")
    print(f"enable it with: {r.enable_command}")
    return EXIT_OK
