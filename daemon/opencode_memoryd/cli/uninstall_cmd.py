"""``uninstall [--purge]`` and ``uninstall-service``: stop the service before its file
goes, remove the OpenCode plugin and MCP entry, and with ``--purge`` every file of ours.

The order matters: the service is stopped and disabled first (a unit removed while it is
enabled leaves a dangling ``.wants`` link and a daemon still running), then its file is
removed and the manager re-reads its units. Where the manager cannot be asked, the
enablement links are removed by hand (nothing can be running under a manager that does
not run).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path

from opencode_memoryd.cli.commands import COMMANDS
from opencode_memoryd.cli.exits import EXIT_FAILURE, EXIT_OK
from opencode_memoryd.cli.install_cmd import asker, print_changes, print_steps
from opencode_memoryd.cli.render import print_error
from opencode_memoryd.config.paths import APP_NAME, config_path, xdg_data_home
from opencode_memoryd.errors import ConfigError, RefusedError
from opencode_memoryd.install import service_ctl


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``uninstall`` to the CLI."""
    p = sub.add_parser(
        "uninstall", help=COMMANDS["uninstall"],
        description="Stop and disable the user service, then remove its file; remove the "
                    "OpenCode plugin and the `memoryd` MCP entry. With --purge also the "
                    "config file, the state dir (state, log, web token, dream journal) and "
                    "the embedded store, after listing them.")
    p.add_argument("--purge", action="store_true",
                   help="also delete the config, state, log, web token, journal and store")
    p.add_argument("-y", "--yes", action="store_true", help="ask nothing")
    p.add_argument("--dry-run", action="store_true", help="show what would go; remove nothing")
    p.add_argument("--force", action="store_true",
                   help="also remove a plugin file or mcp.memoryd entry we did not write")
    p.set_defaults(without_app=cmd_uninstall)


def _system() -> str:
    return "linux" if sys.platform.startswith("linux") else sys.platform


def remove_service(env: Mapping[str, str], *, dry_run: bool) -> bool:
    """Stop and disable the service, then remove its file and reload the manager (or say
    what would be done). Returns whether every command that ran succeeded."""
    from opencode_memoryd.install import service as service_files

    system = _system()
    path = service_files.service_path(system=system, env=env)
    problem = service_ctl.manager_problem(system, env)
    steps = service_ctl.disable_steps(system) if path.exists() else []
    verb = "would " if dry_run else ""
    # a unit that was never enabled makes `disable` complain: go on regardless
    ran = steps if problem or dry_run else service_ctl.run_steps(steps, env, keep_going=True)
    if problem and system == "linux":
        for link in service_ctl.remove_wants_links(env, dry_run=dry_run):
            print(f"{verb}remove: {link} (service link)")
        if steps:
            print(f"service manager: {problem}: nothing to stop")
    elif steps:
        print_steps(ran, "", dry_run=dry_run)
    if dry_run:
        print(f"{verb}{'remove' if path.exists() else 'keep'}: {path} (service)")
        return True
    removed = service_files.uninstall(system=system, env=env)
    print(f"{'remove' if removed.removed else 'keep'}: {removed.path} (service)")
    if removed.removed and system == "linux" and not problem:
        ran += service_ctl.run_steps([service_ctl.Step(("systemctl", "--user",
                                                         "daemon-reload"))], env)
        print_steps(ran[-1:], "", dry_run=False)
    return not any(s.failed for s in ran)


def _running_pid(state_dir: Path) -> int | None:
    from opencode_memoryd.config.paths import daemon_info

    pid = daemon_info(str(state_dir)).get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        return pid
    return pid


def purge_targets(cfg_file: Path, env: Mapping[str, str]) -> tuple[list[Path], Path, str]:
    """What ``--purge`` deletes: the config file, the state dir and the embedded store
    (and on macOS the launchd log folder), those that exist; the state dir; and a note
    about what stays (a Qdrant server's collection).

    The paths come from the config file when it loads, else from the defaults.
    """
    from opencode_memoryd.config.loader import load_config
    from opencode_memoryd.config.paths import state_dir, store_dir
    from opencode_memoryd.config.schema import Config
    from opencode_memoryd.install.service import launchd_log_dir

    note = ""
    try:
        config = load_config(cfg_file if cfg_file.exists() else None, env)
    except ConfigError as exc:
        config = Config()
        note = f"the config file does not load ({exc}); the default folders are listed"
    state = state_dir(config, env)
    targets = [cfg_file, state]
    if config.qdrant.url:
        note = (note + "; " if note else "") + (
            f"the collection {config.qdrant.collection!r} on {config.qdrant.url} stays")
    else:
        targets.append(store_dir(config, env))
    if _system() == "darwin":
        targets.append(launchd_log_dir(Path(env.get("HOME") or Path.home())))
    return [t for t in targets if t.exists() or t.is_symlink()], state, note


def _delete(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def _purge(args: argparse.Namespace, env: Mapping[str, str]) -> bool:
    """List and delete the purge targets; ``False`` when the user said no."""
    cfg_file = Path(args.config or config_path(env)).expanduser()
    targets, state, note = purge_targets(cfg_file, env)
    pid = _running_pid(state)
    if pid is not None and not args.dry_run:
        raise RefusedError(f"a daemon still runs (pid {pid}) with this state dir: stop it "
                           "(`opencode-memoryd uninstall` stops the service), then purge")
    if note:
        print(f"note: {note}")
    if not targets:
        print("nothing to purge")
        return True
    print("purge deletes:" if not args.dry_run else "purge would delete:")
    for target in targets:
        print(f"  {target}{'/' if target.is_dir() else ''}")
    if args.dry_run:
        return True
    ask = asker(args, what="purge")
    if ask is not None and not ask("Delete these (memories cannot be brought back)?", False):
        print("nothing was purged")
        return False
    for target in targets:
        _delete(target)
    # our own folders left empty (the default config and data folders)
    service_ctl.prune_empty([cfg_file.parent, state.parent, xdg_data_home(env) / APP_NAME],
                            stop=Path(env.get("HOME") or Path.home()))
    print("purged")
    return True


def _refuse_a_daemon_the_service_does_not_stop(args: argparse.Namespace,
                                               env: Mapping[str, str]) -> None:
    """Raise :class:`RefusedError` when a daemon runs with the state dir ``--purge`` would
    delete and stopping the service cannot stop it (no service file, or no manager to ask).
    """
    from opencode_memoryd.install import service as service_files

    cfg_file = Path(args.config or config_path(env)).expanduser()
    _, state, _ = purge_targets(cfg_file, env)
    pid = _running_pid(state)
    if pid is None:
        return
    try:
        stoppable = (service_files.service_path(system=_system(), env=env).exists()
                     and not service_ctl.manager_problem(_system(), env))
    except ValueError:
        stoppable = False
    if not stoppable:
        raise RefusedError(f"a daemon runs (pid {pid}) that the service does not run: stop "
                           "it first, then purge; nothing was removed")


def cmd_uninstall(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    """``uninstall [--purge]``."""
    from opencode_memoryd.install import opencode
    from opencode_memoryd.install.opencode_plugin import plugin_dirs
    from opencode_memoryd.install.service import service_path

    if args.purge and not args.dry_run:  # refuse before anything is removed
        asker(args, what="purge")
        _refuse_a_daemon_the_service_does_not_stop(args, env)
    folders = list(plugin_dirs(env))
    try:
        ok = remove_service(env, dry_run=args.dry_run)
        folders.append(service_path(system=_system(), env=env).parent)
    except ValueError as exc:  # no service manager support here: no service to remove
        print(f"service: skipped: {exc}")
        ok = True
    report = opencode.uninstall(dry_run=args.dry_run, env=env, force=args.force)
    print_changes(report.changes, dry_run=args.dry_run, diff=False)
    if not args.dry_run:  # the folders install made, when nothing else is in them
        service_ctl.prune_empty(folders, stop=Path(env.get("HOME") or Path.home()))
    if args.purge and not _purge(args, env):
        return EXIT_OK
    if args.dry_run:
        print("dry run: nothing was removed")
    return EXIT_OK if ok else EXIT_FAILURE


def cmd_uninstall_service(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    """``uninstall-service``: stop and disable the service, then remove its file."""
    try:
        ok = remove_service(env, dry_run=False)
    except ValueError as exc:
        print_error(exc)
        return EXIT_FAILURE
    return EXIT_OK if ok else EXIT_FAILURE
