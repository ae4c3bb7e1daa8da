"""The commands of ``opencode-memoryd`` with their one-line help, in the order ``--help``
lists them: the one place each line is written. Every command module's ``register`` takes
its help from here, and ``opencode-memoryd --help`` is printed from this table alone
(:func:`opencode_memoryd.cli.main.top_level_parser`), without importing the command
modules."""

from __future__ import annotations

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
