"""``context``: the block of memories an OpenCode session starts with."""

from __future__ import annotations

import json
import sys

from opencode_memoryd.cli.commands import COMMANDS, declare
from opencode_memoryd.cli.connect import use_cases
from opencode_memoryd.cli.exits import EXIT_OK
from opencode_memoryd.config.paths import normalize_dir

TYPE_CHECKING = False  # not `typing`'s: the thin client path does not import it
if TYPE_CHECKING:
    import argparse

    from opencode_memoryd.compose import App


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``context`` to the CLI (its arguments from
    :data:`~opencode_memoryd.cli.commands.SERVED`)."""
    declare(sub.add_parser("context", help=COMMANDS["context"]), "context"
            ).set_defaults(handler=cmd_context)


def cmd_context(app: App, args: argparse.Namespace) -> int:
    """``context``: print the block (nothing when empty; the reason goes to stderr)."""
    block = use_cases(app).context(
        directory=normalize_dir(args.dir) if args.dir else None,
        project=args.project, session=args.session, query=args.query)
    if args.json:
        print(json.dumps(block, indent=2))
    elif block["text"]:
        sys.stdout.write(block["text"])
    else:
        print(f"opencode-memoryd: no context block: {block['reason']}", file=sys.stderr)
    return EXIT_OK
