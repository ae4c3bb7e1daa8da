"""Exit codes: the contract with shells, systemd (``RestartPreventExitStatus``) and users.

An error's exit code is its class's ``exit_code`` (:mod:`opencode_memoryd.errors`); the
names below read them, so each number is written once.
"""

from __future__ import annotations

from opencode_memoryd.errors import (
    ConfigError,
    MemorydError,
    NotFoundError,
    RefusedError,
    RequestError,
    SourceError,
)

EXIT_OK = 0
EXIT_FAILURE = MemorydError.exit_code
EXIT_USAGE = RequestError.exit_code
EXIT_INTERNAL = 3
EXIT_SOURCE = SourceError.exit_code
EXIT_NOT_FOUND = NotFoundError.exit_code
EXIT_REFUSED = RefusedError.exit_code
EXIT_CONFIG = ConfigError.exit_code
EXIT_INTERRUPTED = 130

EXIT_CODES_HELP = """\
exit codes:
  0    success (also when a reader such as `head` closed the output early)
  1    operational failure: the LLM endpoint or the store failed, too little disk
       space, or a session could not be processed (its high-water mark did not
       move; the next run retries it)
  2    usage error
  3    unexpected internal error (the traceback is in the log file)
  4    OpenCode database missing, unreadable, or of an unrecognised schema
  5    not found: no memory with that id (or it is already forgotten), no project
       for the folder given, no session or dream run with that id
  6    refused, nothing changed: the file exists (config init), the dream run
       cannot be undone, install-opencode would change a file it did not write,
       install has neither a terminal nor --yes, or OpenCode's model cannot be
       used for --mode llm, or reembed or rebuild while the daemon runs or another process holds
       the store (or rebuild of a store on a Qdrant server)
  78   configuration error (EX_CONFIG), a state dir or store this user may not
       use (the message names the folder and the fix), and `run` on a store
       whose vectors do not fit the configuration (run `opencode-memoryd reembed`)
  130  interrupted
"""
