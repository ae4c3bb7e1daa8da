"""The commands of ``opencode-memoryd`` with their one-line help, in the order ``--help``
lists them, and the arguments of the commands a running daemon serves (:data:`SERVED`):
the one place each is written. Every command module's ``register`` takes its help from
here, and ``opencode-memoryd --help`` is printed from this table alone
(:func:`opencode_memoryd.cli.main.top_level_parser`), without importing the command
modules. A served command's arguments are rendered by :func:`declare` into the full
parser (:mod:`argparse`) and into the fast path's
(:class:`~opencode_memoryd.cli.quickparse.QuickParser`), so the two cannot disagree.
"""

from __future__ import annotations

from opencode_memoryd.config.paths import normalize_dir

TYPE_CHECKING = False  # not `typing`'s: the thin client path does not import it
if TYPE_CHECKING:
    from typing import Any

#: Command name -> the help line ``--help`` shows for it.
COMMANDS: dict[str, str] = {
    "run": "run the daemon in the foreground (for systemd or launchd)",
    "install": ("set everything up in one go: config, user service, OpenCode plugin and MCP "
                "entry, extraction mode (LLM mode through OpenCode's own model)"),
    "uninstall": ("stop and remove the service, the OpenCode plugin and MCP entry; with --purge "
                  "also the config, state, log, journal and store"),
    "maintain": "extract memories from sessions up to now, then exit",
    "list": "list stored memories",
    "search": "search memories (BM25, plus dense vectors if set up)",
    "show": "one memory with its lineage (sessions, messages, dreams)",
    "add": "store a memory by hand (deduplicated, secrets redacted)",
    "edit": ("change a memory's text or type (re-embedded; the old version kept in its history; "
             "journaled)"),
    "forget": ("retire a memory (a tombstone, listed by list --all), or with --purge delete "
               "it for good"),
    "restore": "bring a forgotten memory back",
    "confirm": ("list the agent's user-scope notes awaiting you, or confirm (or --reject) one "
                "by id"),
    "profile": "your user-scope memories by type, with counts and last changes",
    "status": "what is stored, where, and what the last runs did",
    "context": ("print the memory block a new OpenCode session in DIR gets (what the OpenCode "
                "plugin injects)"),
    "mcp": ("serve the `memory` MCP tool on stdin/stdout (started by OpenCode; a client of the "
            "running daemon)"),
    "dream": ("consolidate a scope now: merge duplicates, retire stale facts (recorded in the "
              "dream journal), mark what names a path, dependency or script the project no "
              "longer has"),
    "journal": "print the dream journal (newest first)",
    "install-service": "write the systemd user unit (Linux) or launchd agent (macOS)",
    "uninstall-service": "stop and disable the service, then remove its file",
    "config": "manage the config file",
    "install-opencode": ("write the OpenCode plugin (a memory block in every new session) and "
                         "the `memoryd` MCP server entry into OpenCode's global config"),
    "uninstall-opencode": "remove exactly what install-opencode added",
    "history": "browse OpenCode's conversations (read-only)",
    "reembed": ("rebuild the store's vectors after the embedder changed (memory texts kept; "
                "stop the daemon first)"),
    "rebuild": ("make the store again from OpenCode's databases and the journal of manual "
                "changes, when it is lost or damaged (stop the daemon first)"),
    "doctor": ("check everything capture depends on; say what to do about each problem (exit 1 "
               "when a check fails)"),
    "web": ("open the web page of the running daemon (browse, search, edit, forget; the dream "
            "journal)"),
    "export": "write every memory with its provenance (JSON or Markdown)",
    "import": "add the memories of an export file (deduplicated)",
}


class Arg:
    """One argument of a served command: the names and keywords of ``add_argument``.

    Args:
        names: the option strings (``"--dir"``), or one positional's name.
        options: the keywords (``action``, ``type``, ``default``, ``metavar``, ``help``,
            ``choices``); the fast parser takes the full way for any other.
    """

    __slots__ = ("names", "options")

    def __init__(self, *names: str, **options: Any) -> None:
        self.names = names
        self.options = options


class Exclusive:
    """A mutually exclusive group of :class:`Arg` (``required``: one of them is)."""

    __slots__ = ("arguments", "required")

    def __init__(self, *arguments: Arg, required: bool = False) -> None:
        self.arguments = arguments
        self.required = required


class Served:
    """A command a running daemon serves: where its handler is, and its arguments.

    Args:
        module: the command module under :mod:`opencode_memoryd.cli`.
        handler: the name of the module's ``handler(app, args)`` function.
        arguments: :class:`Arg` and :class:`Exclusive` items, in ``--help``'s order.
        description: the text ``COMMAND --help`` shows under the usage line, if any.
    """

    __slots__ = ("arguments", "description", "handler", "module")

    def __init__(self, module: str, handler: str, *arguments: Arg | Exclusive,
                 description: str | None = None) -> None:
        self.module = module
        self.handler = handler
        self.arguments = arguments
        self.description = description


#: The commands a running daemon serves, with their arguments: rendered by :func:`declare`.
SERVED: dict[str, Served] = {
    "list": Served(
        "memories", "cmd_list",
        Exclusive(
            Arg("--dir", metavar="DIR", type=normalize_dir,
                help="only the memories of DIR's project (default: the current folder's, "
                     "when it has some)"),
            Arg("--user", action="store_true", help="only user-scope memories"),
            Arg("--everywhere", action="store_true",
                help="every project's memories (the default outside a project's folder)")),
        Arg("--db", metavar="PATH", help="OpenCode database used to resolve --dir (without "
            "one: the projects stored for DIR or a parent folder)"),
        Arg("--all", action="store_true",
            help="also the memories a dream retired (tombstones)"),
        Arg("--json", action="store_true", help="print a JSON array"),
        description="Without --dir, --user or --everywhere: the memories of the current "
                    "folder's project when it has some, else every project's."),
    "search": Served(
        "memories", "cmd_search",
        Arg("query"),
        Arg("--dir", metavar="DIR", type=normalize_dir,
            help="DIR's project memories and user-scope memories only"),
        Arg("--db", metavar="PATH", help="OpenCode database used to resolve --dir"),
        Arg("--limit", type=int, default=10, metavar="N", help="results (default 10)"),
        Arg("--all", action="store_true",
            help="also match the memories a dream retired (tombstones)"),
        Arg("--json", action="store_true", help="print a JSON array")),
    "status": Served("status", "cmd_status", Arg("--json", action="store_true", help="print JSON")),
    "context": Served(
        "context", "cmd_context",
        Exclusive(
            Arg("--dir", metavar="DIR", type=normalize_dir, help="the session's folder"),
            Arg("--project", metavar="ID", help="an OpenCode project id"),
            required=True),
        Arg("--session", metavar="ID", help="the session (a sub-agent session gets nothing)"),
        Arg("--query", metavar="TEXT",
            help="the task, for the \"Relevant to the task\" section"),
        Arg("--json", action="store_true",
            help="print JSON: text, entries per section, project keys, reason")),
}


def declare(parser: Any, command: str) -> Any:
    """Add the arguments of served ``command`` (:data:`SERVED`) to ``parser`` and return
    it.

    Args:
        parser: an :class:`argparse.ArgumentParser` or a
            :class:`~opencode_memoryd.cli.quickparse.QuickParser` (the same calls).
        command: a key of :data:`SERVED`.

    Raises:
        KeyError: ``command`` is not served.
        Unsure: (a ``QuickParser``) an argument it cannot parse the way argparse does.
    """
    for item in SERVED[command].arguments:
        if isinstance(item, Exclusive):
            group = parser.add_mutually_exclusive_group(required=item.required)
            for arg in item.arguments:
                group.add_argument(*arg.names, **arg.options)
        else:
            parser.add_argument(*item.names, **item.options)
    return parser
