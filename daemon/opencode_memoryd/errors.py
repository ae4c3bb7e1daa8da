"""The exception hierarchy of opencode-memoryd.

::

    MemorydError
    ├── ConfigError            bad or unreadable config file (exit 78)
    ├── SourceError            the OpenCode database cannot be used
    │   └── SourceSchemaError  a schema we do not recognise (names what is missing)
    ├── StateError             our own state file cannot be used
    ├── StoreError             the memory store (Qdrant) failed or refused
    │   └── EmbedderMismatchError  the store was built with another embedder
    ├── UpstreamError          the LLM or embedding endpoint failed (``retryable`` flag)
    ├── ExtractionError        the LLM answered something we cannot accept
    │   └── ReplyCutOff        the answer was cut off at the token cap (``finish_reason=length``)
    ├── NotFoundError          no such memory, project or run (exit 5, HTTP 404)
    ├── RefusedError           refused: it would overwrite or undo what it must not (exit 6)
    │   ├── DreamError         a dream operation was refused (undo of a run not applied)
    │   └── InstallRefusedError  install-opencode would change a file it did not write
    ├── DiskFullError          too little free space to write safely (names the directory)
    ├── AlreadyRunning         another daemon holds the single-instance lock
    ├── ControlError           the control socket cannot be served or reached
    │   └── DaemonUnreachableError  no daemon accepted the connection (safe to do it locally)
    ├── RequestError           a control request's payload is invalid (HTTP 400)
    └── RemoteError            the daemon answered a call with an error
"""

from __future__ import annotations


class MemorydError(Exception):
    """Base class of every error this package raises on purpose."""


class ConfigError(MemorydError):
    """The config file is missing, unreadable or invalid.

    Attributes:
        path: the file that was read (``None`` for defaults only).
        problems: one line per problem, each ``at `key.path`: message``.
    """

    def __init__(self, path: str | None, problems: list[str]) -> None:
        self.path = path
        self.problems = list(problems)
        where = f" in {path}" if path else ""
        body = "\n".join(f"  {p}" for p in self.problems)
        super().__init__(f"invalid configuration{where}:\n{body}")


class SourceError(MemorydError):
    """The OpenCode database cannot be found, opened or read."""


class SourceSchemaError(SourceError):
    """The OpenCode database has a schema this version does not understand."""


class StateError(MemorydError):
    """Our own state file cannot be opened or written."""


class StoreError(MemorydError):
    """The memory store failed, or refused an operation."""


class StoreInUseError(StoreError):
    """The embedded store is open in another process (Qdrant Edge allows one at a time)."""


class EmbedderMismatchError(StoreError):
    """The store was built with a different embedder (name or dimension)."""


class UpstreamError(MemorydError):
    """A call to the LLM or embedding endpoint failed.

    Attributes:
        kind: one of ``rate_limit``, ``server``, ``timeout``, ``connection``, ``auth``,
            ``not_found``, ``context_length``, ``bad_request``.
        retryable: whether the same call may succeed later.
        status: the HTTP status code, when there was one.
        retry_after_seconds: the server's ``Retry-After``, when it sent one.
        tokens_in: prompt tokens the server reported for the failed call (``usage`` in
            the error body), else 0.
        tokens_out: completion tokens it reported, else 0.
        delivered: the request reached the endpoint whole and may have been answered (and
            paid for) without the answer reaching us: a read timeout, a connection dropped
            while waiting for the answer, a gateway timeout (504). Sending it again at once
            may pay for the same prompt twice.
    """

    def __init__(
        self,
        message: str,
        *,
        kind: str,
        retryable: bool,
        status: int | None = None,
        retry_after_seconds: float | None = None,
        tokens_in: int = 0,
        tokens_out: int = 0,
        delivered: bool = False,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.retryable = retryable
        self.status = status
        self.retry_after_seconds = retry_after_seconds
        self.tokens_in = tokens_in
        self.tokens_out = tokens_out
        self.delivered = delivered


class ExtractionError(MemorydError):
    """The LLM's answer was not valid JSON or did not match the memory schema.

    Attributes:
        tokens_in: prompt tokens the refused answer cost (0 when unknown).
        tokens_out: completion tokens the refused answer cost (0 when unknown).
        reply_digest: SHA-256 (hex) of the refused answer's text, when there was one: two
            failures with the same digest got the same answer byte for byte.
    """

    def __init__(self, message: str, *, tokens_in: int = 0, tokens_out: int = 0,
                 reply_digest: str | None = None) -> None:
        super().__init__(message)
        self.tokens_in = tokens_in
        self.tokens_out = tokens_out
        self.reply_digest = reply_digest


class ReplyCutOff(ExtractionError):
    """The answer stopped at the output token cap (``finish_reason=length``) before it was
    complete: the same request would be cut off again, so the caller asks for less (a
    smaller chunk, a smaller group) or allows more."""


class AlreadyRunning(MemorydError):
    """Another ``opencode-memoryd run`` holds the single-instance lock."""


class ControlError(MemorydError):
    """The control endpoint cannot be served or reached.

    Raised by :meth:`ControlServer.start` (another live server holds the socket, the path
    is unusable) and by :meth:`ControlClient.call` (no answer, timeout, malformed reply).
    When the call may already have reached the daemon (a timeout, a dropped connection)
    this base class is raised; when it certainly did not, :class:`DaemonUnreachableError`.
    """


class DaemonUnreachableError(ControlError):
    """No daemon accepted the connection (no socket file, or connection refused).

    The request was not delivered, so the caller may safely do the work itself.
    """


class SocketOwnerError(ControlError):
    """A socket, or its folder, is not certainly this user's: a symbolic link, another
    user's, open to others, or served by another user's process. Nothing was sent (see
    :mod:`opencode_memoryd.serve.peer`)."""


class RequestError(MemorydError):
    """Raised by a handler to reject its payload (missing or invalid fields): HTTP 400."""


class NotFoundError(MemorydError):
    """What a use case was asked to act on does not exist: no memory with that id (or
    none that is active and visible to this user), no project for a folder, no dream run
    with that id. Nothing was changed. Exit 5; the control socket answers HTTP 404."""


class RemoteError(MemorydError):
    """The daemon answered a call with an error.

    Attributes:
        type: the server-side error's class name (e.g. ``"UpstreamError"``), or a protocol
            error name (``"NotFound"``, ``"BadRequest"``, ``"RequestTooLarge"``,
            ``"InternalError"``, ...).
        kind: the server-side error's ``kind`` attribute, when it had one.
        message: the error message (also ``str(exc)``).
        status: the HTTP status code.
    """

    def __init__(self, message: str, *, type: str, kind: str | None = None,
                 status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.type = type
        self.kind = kind
        self.status = status


class RefusedError(MemorydError):
    """The operation was refused and nothing was changed: it would overwrite a file, or
    undo or change something it must not (e.g. ``config init`` over an existing file)."""


class DreamError(RefusedError):
    """A dream operation was refused (e.g. undoing a run that is not applied)."""


class DiskFullError(MemorydError):
    """Too little free space to write safely; nothing was written.

    Attributes:
        directory: the directory that lacks space.
        needed_bytes: the free space required.
        free_bytes: the free space found.
    """

    def __init__(self, directory: str, needed_bytes: int, free_bytes: int) -> None:
        self.directory = directory
        self.needed_bytes = needed_bytes
        self.free_bytes = free_bytes
        super().__init__(
            f"not enough free space in {directory}: {_mib(free_bytes)} free, "
            f"{_mib(needed_bytes)} needed; nothing was written (free some space and run "
            "again)")


def _mib(n: int) -> str:
    return f"{n / (1024 * 1024):.1f} MiB"


class InstallRefusedError(RefusedError):
    """``install-opencode``/``uninstall-opencode`` left the user's files as they were.

    Raised when a file cannot be parsed (an OpenCode config that is not valid JSONC, or
    whose ``mcp`` is not an object), or when the change would overwrite something
    opencode-memoryd did not write (a foreign plugin file or ``mcp.memoryd`` entry) and
    ``force`` was not given. Nothing was written when it is raised.

    Attributes:
        path: the file in question.
        reason: what is wrong, one sentence.
    """

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}")
