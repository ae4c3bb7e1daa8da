"""structlog configuration: JSON lines to a rotating file, a readable console on a terminal
(and for every command but ``run``).

Every event passes through :func:`_scrub`, which runs secret redaction over every value
(nested dicts and lists, exceptions and other objects as their text), after the exception
and stack were rendered to text (``exception``, ``stack``), so a secret quoted by an error
message or a traceback (SQLite quotes row data) never reaches the log file or the console.
Events never carry transcript text by design (the one exception, the debug-level
``memory_refused``, carries a refused memory's first 80 characters, redacted); the
scrubber is the second line of defence. While a session is processed
(:func:`~opencode_memoryd.redaction.engine.redacting_also`), the values its text revealed
as secrets are redacted too, so a model that proposes one bare (no key word around it)
never writes it to the log.
"""

from __future__ import annotations

import logging
import logging.handlers
import re
import sys
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import structlog

from opencode_memoryd.disk import make_private
from opencode_memoryd.redaction.engine import extra_redaction, redact_by_rules

LOG_FILE_NAME = "opencode-memoryd.log"


#: Short log values seen before and their redacted text: the same few strings (folders,
#: kinds, storages) come back in every event, and redaction is deterministic. Bounded: it
#: starts over when full.
_SCRUBBED: dict[str, str] = {}
_SCRUBBED_MAX = 4096
_SCRUBBED_MAX_CHARS = 256


def _redacted(text: str) -> str:
    got = _SCRUBBED.get(text)
    if got is None:
        got = redact_by_rules(text).text
        if len(text) <= _SCRUBBED_MAX_CHARS:
            if len(_SCRUBBED) >= _SCRUBBED_MAX:
                _SCRUBBED.clear()
            _SCRUBBED[text] = got
    return got


def _redacted_known(text: str) -> str:
    """Redacted by the rules (cached), then by the calling context's extra redaction."""
    return extra_redaction(_redacted(text)).text


def scrub_value(value: Any) -> Any:
    """``value`` with every secret redacted: strings, the items of dicts, lists and tuples
    (recursively); numbers, booleans and ``None`` unchanged; any other object (an
    exception, a path) as its redacted text."""
    if isinstance(value, str):
        return _redacted_known(value) if value else value
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, dict):
        return {k: scrub_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [scrub_value(v) for v in value]
    return _redacted_known(str(value))


#: Fields that hold our own identifiers, never a secret: an OpenCode project id is the hash
#: of a repository's root commit, which bare high-entropy detection would otherwise hide.
_ID_FIELDS = frozenset({"project", "project_id", "project_key", "scope_key"})
_HEXISH = frozenset("0123456789abcdef")
#: Fields that hold OpenCode's identifiers (``ses_…``, ``msg_…``, ``prt_…``): one of that
#: shape is left as it is (redaction would leave it unchanged, at a cost per event).
_OPENCODE_ID_FIELDS = frozenset({"session_id", "message_id", "part_id"})
_OPENCODE_ID = re.compile(r"(?:ses|msg|prt)_[0-9A-Za-z]{1,40}")
#: structlog's ``TimeStamper(fmt="iso", utc=True)``
_TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z")


def _is_project_id(value: object) -> bool:
    return isinstance(value, str) and len(value) == 40 and set(value) <= _HEXISH


def _is_own(key: str, value: object) -> bool:
    """Whether a field is ours and of its known shape: an identifier, or the event's
    time stamp (written by structlog's ``TimeStamper`` just before)."""
    if key in _ID_FIELDS:
        return _is_project_id(value)
    if key in _OPENCODE_ID_FIELDS:
        return isinstance(value, str) and _OPENCODE_ID.fullmatch(value) is not None
    return key == "timestamp" and isinstance(value, str) and _TIMESTAMP.fullmatch(value) is not None


def _scrub(_logger: Any, _name: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    for key, value in list(event.items()):
        if key.startswith("_"):  # structlog's own (_record, _from_structlog)
            continue
        if _is_own(key, value):
            continue
        event[key] = scrub_value(value)
    return event


class _OnceFormatter(structlog.stdlib.ProcessorFormatter):
    """A formatter that renders a record once however often it is asked: the log file's
    size check before a write (``shouldRollover``) and the write itself, and the console
    when it prints the same JSON lines, share the text. Shared by handlers (each calls it
    under its own lock): the last record and its text are kept as one tuple, and a record
    is recognised by identity."""

    _last: tuple[logging.LogRecord, str] | None = None

    def format(self, record: logging.LogRecord) -> str:
        last = self._last
        if last is not None and last[0] is record:
            return last[1]
        text = super().format(record)
        self._last = (record, text)
        return text


class _FileHandler(logging.handlers.RotatingFileHandler):
    """The log file. A record that cannot be written (the disk is full) is dropped, and the
    first of a run of such failures is told in one line on stderr: never a traceback."""

    _failing = False
    _failed_now = False

    def handleError(self, record: logging.LogRecord) -> None:
        self._failed_now = True
        if not self._failing:
            self._failing = True
            sys.stderr.write(f"opencode-memoryd: cannot write the log file "
                             f"{self.baseFilename} ({sys.exc_info()[1]}); records are "
                             "dropped until it can\n")

    def emit(self, record: logging.LogRecord) -> None:
        self._failed_now = False
        super().emit(record)
        if not self._failed_now:
            self._failing = False


def _last_line_of_exception(_logger: Any, _name: str,
                            event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """A command's console line keeps a traceback's last line (``Type: message``); the
    log file has it whole."""
    text = event.get("exception")
    if isinstance(text, str) and text.strip():
        event["exception"] = text.strip().splitlines()[-1]
    return event


def configure(
    *,
    log_dir: Path | None,
    level: str = "info",
    console_level: str = "warning",
    max_bytes: int = 10 * 1024 * 1024,
    backups: int = 5,
    stream: Any = None,
    console_format: str = "auto",
) -> Path | None:
    """Configure logging once per process.

    Args:
        log_dir: folder of the JSON-lines file (``opencode-memoryd.log``, rotated at
            ``max_bytes`` with ``backups`` old files); ``None`` for no file.
        level: the file's level (``debug``, ``info``, ``warning``, ``error``).
        console_level: the console's level.
        stream: the console stream (default ``sys.stderr``).
        console_format: ``auto``: readable lines on a terminal (structlog's console
            renderer, levels coloured unless ``NO_COLOR`` is set) and JSON lines otherwise
            (under systemd or launchd, whose journals keep them); ``human``: readable lines
            always (coloured on a terminal; a traceback cut to its last line). Library
            chatter (APScheduler's job lines) is
            logged only when ``level`` or ``console_level`` is ``debug``.

    Returns:
        The log file path, or ``None``.
    """
    stream = stream or sys.stderr
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        # tracebacks become text here, so the scrubber sees them
        structlog.processors.StackInfoRenderer(),
        structlog.processors.format_exc_info,
        _scrub,
    ]
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
        h.close()
    root.setLevel(logging.DEBUG)

    json_lines = _OnceFormatter(
        foreign_pre_chain=shared,
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                    structlog.processors.JSONRenderer()],
    )
    console = logging.StreamHandler(stream)
    console.setLevel(getattr(logging, console_level.upper()))
    terminal = hasattr(stream, "isatty") and stream.isatty()
    if terminal or console_format == "human":
        import os

        colors = terminal and not os.environ.get("NO_COLOR")
        brief = [_last_line_of_exception] if console_format == "human" else []
        console.setFormatter(structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=shared,
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *brief,
                        structlog.dev.ConsoleRenderer(colors=colors)],
        ))
    else:  # the same lines as the file (rendered once for both)
        console.setFormatter(json_lines)
    root.addHandler(console)

    path: Path | None = None
    if log_dir is not None:
        log_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        make_private(log_dir, (LOG_FILE_NAME + "*",))  # also files an older version left
        path = log_dir / LOG_FILE_NAME
        fh = _FileHandler(path, maxBytes=max_bytes, backupCount=backups, encoding="utf-8")
        fh.setLevel(getattr(logging, level.upper()))
        fh.setFormatter(json_lines)
        root.addHandler(fh)
    for noisy in ("httpx", "httpx2", "httpcore", "httpcore2", "openai", "urllib3",
                  "watchfiles"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    debug = "debug" in (level.lower(), console_level.lower())
    logging.getLogger("apscheduler").setLevel(logging.DEBUG if debug else logging.WARNING)

    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )
    return path
