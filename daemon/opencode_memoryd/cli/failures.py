"""How a command reports that it failed: ``opencode-memoryd: MESSAGE`` on stderr, or with
``--json`` an error object on stdout (a script reads one stream), secrets redacted in both.

The object: ``{"error": {"type": "NotFoundError", "message": "...", "exit_code": 5}}``;
``type`` is the error's class name (``UsageError`` for a message without one).
"""

from __future__ import annotations

import json
import sys

TYPE_CHECKING = False  # not `typing`'s: the thin client path does not import it
if TYPE_CHECKING:
    from collections.abc import Sequence


def wants_json(argv: Sequence[str]) -> bool:
    """Whether the command line asks for JSON (``--json`` after the command)."""
    return "--json" in argv


def report(error: object, code: int, as_json: bool) -> int:
    """Print ``error`` (an exception, or a message) as the command's failure; returns
    ``code``, the exit code, which the JSON object carries too."""
    from opencode_memoryd.redaction.engine import redact  # only when there is an error

    message = redact(str(error)).text
    if as_json:
        kind = type(error).__name__ if isinstance(error, BaseException) else "UsageError"
        print(json.dumps({"error": {"type": kind, "message": message, "exit_code": code}},
                         indent=2))
    else:
        print(f"opencode-memoryd: {message}", file=sys.stderr)
    return code


def refused_access(exc: BaseException, argv: Sequence[str]) -> int | None:
    """When ``exc`` (or the ``OSError`` it was raised from) is this user being refused a
    folder of ours (:func:`~opencode_memoryd.disk.access_problem`): report it with the
    folder and its fix, and return exit 78 (``EX_CONFIG``: a service manager does not
    restart on it); else ``None``."""
    from opencode_memoryd.disk import access_problem

    cause = exc if isinstance(exc, OSError) else exc.__cause__
    problem = access_problem(cause) if isinstance(cause, OSError) else None
    if problem is None:
        return None
    from opencode_memoryd.cli.exits import EXIT_CONFIG

    return report(problem, EXIT_CONFIG, wants_json(argv))
