"""``install``: the config, the user service, the OpenCode plugin and MCP entry, and the
extraction mode, in one command (questions on a terminal; ``--yes`` for scripts).

Every change is planned first and shown; ``--dry-run`` stops there. The pieces are the
ones ``config init``, ``install-service`` and ``install-opencode`` write, so running
``install`` twice changes nothing the second time and says so.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Literal

from opencode_memoryd.cli.commands import COMMANDS
from opencode_memoryd.cli.exits import EXIT_OK
from opencode_memoryd.config.paths import (
    APP_NAME,
    CONFIG_ENV_VAR,
    config_path,
    xdg_config_home,
)
from opencode_memoryd.errors import MemorydError, RefusedError
from opencode_memoryd.install import service_ctl
from opencode_memoryd.install.config_file import LlmChoice, effective_mode, plan_config
from opencode_memoryd.install.files import FileChange, Plan, carry_out, plan_change, read_text
from opencode_memoryd.install.opencode_provider import (
    ProviderChoice,
    check_endpoint,
    find_provider,
    opencode_api_key,
)

Ask = Callable[[str, bool], bool]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``install`` to the CLI."""
    p = sub.add_parser(
        "install", help=COMMANDS["install"],
        description="Set everything up: the config file (the commented example, when there "
                    "is none), the user service (enabled and started where systemd or "
                    "launchd runs; else the commands to run are printed), the OpenCode "
                    "plugin and the `memoryd` MCP entry, and the extraction mode: LLM "
                    "mode through the model already set up in OpenCode (its small_model, "
                    "else model), or the rules. Shows every change first; running it "
                    "again changes nothing.")
    p.add_argument("-y", "--yes", action="store_true",
                   help="ask nothing: apply the changes and take the defaults")
    p.add_argument("--dry-run", action="store_true", help="show every change; write nothing")
    p.add_argument("--mode", choices=("rules", "llm"),
                   help="extraction mode: `llm` uses OpenCode's model (an error when none "
                        "is usable); `rules` needs no model. Default: LLM mode when OpenCode's "
                        "model is usable and the config file is new, else the config's mode")
    p.add_argument("--opencode-key", action="store_true",
                   help="let the daemon read the API key OpenCode holds for its provider "
                        "(OpenCode's config or auth.json) at each start; it is never copied")
    p.add_argument("--no-start", action="store_true",
                   help="write the service file but do not enable or start it")
    p.add_argument("--force", action="store_true",
                   help="replace a plugin file or mcp.memoryd entry we did not write")
    p.set_defaults(without_app=cmd_install)


def terminal_ask(question: str, default: bool) -> bool:
    """Ask a yes/no ``question`` on the terminal; an empty answer is ``default``, the end
    of the input (Ctrl-D) is no."""
    hint = "[Y/n]" if default else "[y/N]"
    while True:
        try:
            answer = input(f"{question} {hint} ").strip().lower()
        except EOFError:
            print()
            return False
        if not answer:
            return default
        if answer in ("y", "yes", "n", "no"):
            return answer.startswith("y")


def asker(args: argparse.Namespace, *, what: str) -> Ask | None:
    """How to ask: on a terminal without ``--yes``, :func:`terminal_ask`; with ``--yes``
    or ``--dry-run``, ``None`` (take the defaults).

    Raises:
        RefusedError: no terminal to ask on and neither flag given.
    """
    if args.yes or args.dry_run:
        return None
    if not sys.stdin.isatty():
        raise RefusedError(f"no terminal to ask on: pass --yes to {what} without questions, "
                           "or --dry-run to see the changes")
    return terminal_ask


def _llm_mode(found: ProviderChoice, args: argparse.Namespace, ask: Ask | None,
              env: Mapping[str, str]) -> tuple[LlmChoice | None, str]:
    """OpenCode's model as an :class:`LlmChoice`, or why not."""
    if not found.usable:
        return None, found.problem or "no usable model in OpenCode's config"
    what = f"OpenCode's {found.source} {found.provider}/{found.model} at {found.base_url}"
    if found.needs_consent and not args.opencode_key:
        print(f"{what}: its key is in {found.key_place}")
        if ask is None or not ask("Let opencode-memoryd read that key from OpenCode at each "
                                  "start (it is never copied)?", False):
            return None, (f"the key of {found.provider!r} is OpenCode's: pass --opencode-key "
                          "to let the daemon read it at each start")
    key = (opencode_api_key(found.api_key_from, env) if found.api_key_from
           else env.get(found.api_key_env) or None if found.api_key_env else None)
    problem = check_endpoint(found.base_url, key)
    if problem:
        return None, f"{what}: {problem}"
    print(f"{what} answers")
    return LlmChoice(found.base_url, found.model, found.api_key_env, found.api_key_from), ""


def choose_mode(args: argparse.Namespace, old_config: str | None, ask: Ask | None,
                env: Mapping[str, str]) -> tuple[Literal["rules", "llm"] | None, LlmChoice | None]:
    """The extraction mode to write (``None``: leave the config's) and, for LLM mode, its
    keys; says why on stdout.

    Raises:
        RefusedError: ``--mode llm`` and OpenCode's model cannot be used.
    """
    if args.mode == "rules":
        return "rules", None
    found = None
    if args.mode is None and old_config is not None:
        current = effective_mode(old_config)
        found = find_provider(env) if ask is not None and current == "rules" else None
        if found is None or not found.usable or not ask or not ask(
                f"The config uses rules mode; switch to LLM mode with OpenCode's "
                f"{found.source} {found.provider}/{found.model}?", False):
            print(f"extraction: {current} (kept from the config file; --mode changes it)")
            return None, None
    llm, why = _llm_mode(found or find_provider(env), args, ask, env)
    if llm is None:
        if args.mode == "llm":
            raise RefusedError(f"LLM mode: {why}")
        print(f"extraction: rules (only explicit phrases such as \"remember that ...\"), "
              f"since {why}")
        return "rules", None
    if args.mode is None and ask is not None and old_config is None and not ask(
            "Use it to extract memories (LLM mode; the rules catch only explicit phrases)?",
            True):
        return "rules", None
    print("extraction: llm")
    return "llm", llm


def _shorter(plan: Plan) -> Plan:
    """A new config file's plan, its diff taken from the commented example (which
    ``config.example.toml`` shows) rather than from nothing."""
    from dataclasses import replace

    from opencode_memoryd.config.example import render_example
    from opencode_memoryd.install.files import unified_diff

    if plan.change.action != "create" or plan.new is None:
        return plan
    diff = unified_diff(plan.change.path, render_example(), plan.new)
    note = "the commented example" + (", changed as shown" if diff else "")
    return replace(plan, change=replace(plan.change, diff=diff, note=note))


def _service_plan(env: Mapping[str, str]) -> tuple[Plan | None, str]:
    """The service file's plan, or ``None`` (said on stdout) where no service manager is
    supported; and the system's name."""
    from opencode_memoryd.install import service as service_files

    system = "linux" if sys.platform.startswith("linux") else sys.platform
    try:
        r = service_files.install(dry_run=True, env=env)
    except ValueError as exc:
        print(f"service: skipped: {exc}; run `opencode-memoryd run` yourself")
        return None, system
    return plan_change(r.path, "service", read_text(r.path), r.content), system


def service_env_hint(system: str, env: Mapping[str, str]) -> str:
    """Where the service reads extra variables (an API key) from, for the user: the
    unit's ``EnvironmentFile`` (``%E``, the user's config home), or the plist's
    ``EnvironmentVariables``."""
    if system.startswith("linux"):
        return f"{xdg_config_home(env) / APP_NAME / 'service.env'} (chmod 600)"
    return "the plist's EnvironmentVariables"


def print_changes(changes: tuple[FileChange, ...] | list[FileChange], *, dry_run: bool,
                  diff: bool) -> None:
    """One line per file (``create: PATH (kind)``), then, with ``diff``, the diffs."""
    verb = "would " if dry_run else ""
    for change in changes:
        action = "keep" if change.action == "unchanged" else change.action
        print(f"{verb}{action}: {change.path} ({change.kind})"
              + (f"  [{change.note}]" if change.note else ""))
    if diff:
        text = "".join(c.diff for c in changes)
        print(text, end="" if text.endswith("\n") or not text else "\n")


def print_steps(steps: list[service_ctl.Step], problem: str, *, dry_run: bool) -> bool:
    """Say what the service manager did (or would do, or what to run by hand); returns
    whether every step that ran succeeded."""
    if not steps:
        return True
    if problem:
        print(f"service manager: {problem}; run these yourself:")
        for step in steps:
            print(f"  {step.shell}")
        return True
    ok = True
    for step in steps:
        if dry_run or step.returncode is None:
            print(f"{'would run' if dry_run else 'not run'}: {step.shell}")
        elif step.failed:
            ok = False
            print(f"failed ({step.returncode}): {step.shell}: {step.output}")
        else:
            print(f"ran: {step.shell}")
    return ok


def cmd_install(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    """``install``: plan, show, confirm, write, start."""
    from opencode_memoryd.install import opencode

    ask = asker(args, what="install")
    cfg_path = Path(args.config or config_path(env)).expanduser()
    mode, llm = choose_mode(args, read_text(cfg_path), ask, env)
    oc_env = dict(env)
    if args.config:  # the MCP server and the service read the same file as this command
        oc_env[CONFIG_ENV_VAR] = str(cfg_path)
    plans = [_shorter(plan_config(cfg_path, mode, llm))]
    service, system = _service_plan(oc_env)
    plans += [service] if service is not None else []
    oc = opencode.install(dry_run=True, env=oc_env, force=args.force)
    changes = [p.change for p in plans] + list(oc.changes)
    changed = any(c.action != "unchanged" for c in changes)
    problem = service_ctl.manager_problem(system, env)
    running = service is not None and not problem and service_ctl.is_running(system, env)
    steps = ([] if service is None or args.no_start
             or (running and service.change.action == "unchanged")
             else service_ctl.enable_steps(system, service.change.path, restart=running))
    if not changed and (not steps or problem):
        print_changes(changes, dry_run=args.dry_run, diff=False)
        print("nothing to change: opencode-memoryd is installed")
        print_steps(steps, problem, dry_run=args.dry_run)
        return EXIT_OK
    print_changes(changes, dry_run=True, diff=args.dry_run)
    if args.dry_run:
        print_steps(steps, problem, dry_run=True)
        print("dry run: nothing was written")
        return EXIT_OK
    if ask is not None and changed and not ask("Apply these changes?", True):
        print("nothing was written")
        return EXIT_OK
    carry_out(plans, dry_run=False)
    opencode.install(env=oc_env, force=args.force)
    if changed:
        print_changes(changes, dry_run=False, diff=False)
    ran = service_ctl.run_steps(steps, env) if steps and not problem else steps
    if not print_steps(ran, problem, dry_run=False):
        raise MemorydError("the service did not start; see the failed command above")
    if llm is not None and llm.api_key_env and service is not None:
        print(f"the service does not see this shell's variables: put {llm.api_key_env}=... "
              f"in {service_env_hint(system, env)}")
    print("restart OpenCode to load the plugin and the MCP server")
    return EXIT_OK
