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

Each class carries what it becomes outside the process, in one place: ``exit_code`` (the
command's exit status, see ``opencode-memoryd --help``), ``http_status`` (the control
socket's and the REST API's answer) and ``wire_type`` (the ``type`` of the error envelope,
the class's name). :func:`describe` reads them for an exception; :func:`error_envelope`
is its error body; :meth:`RemoteError.local` turns an envelope a client received back into
the exception the daemon raised.

The control socket and the REST API answer in one envelope: ``{"result": ...}`` on success
(:func:`result_body`), ``{"error": {"type": str, "message": str, "kind": str | null}}`` on
failure (:func:`error_body`), the HTTP status telling which.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not `typing`'s: the thin client path does not import it
if TYPE_CHECKING:
    from typing import Any, ClassVar

#: The message of an error that is not one of ours (a bug): its details stay in the log.
GENERIC_MESSAGE = "internal error in the daemon; see its log for details"
#: The envelope ``type`` of an error that is not one of ours.
INTERNAL_TYPE = "InternalError"

#: Every error class by its ``wire_type`` (filled as the classes are defined).
_BY_WIRE_TYPE: dict[str, type[MemorydError]] = {}


class MemorydError(Exception):
    """Base class of every error this package raises on purpose.

    Class attributes (a subclass inherits its parent's unless it sets its own):
        exit_code: the CLI's exit status for it (1, operational failure).
        http_status: the HTTP status the control socket and the REST API answer (500).
        wire_type: the ``type`` in the error envelope: the class's own name, always.
    """

    exit_code: ClassVar[int] = 1
    http_status: ClassVar[int] = 500
    wire_type: ClassVar[str] = "MemorydError"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.wire_type = cls.__name__
        _BY_WIRE_TYPE[cls.wire_type] = cls

    @classmethod
    def from_wire(cls, message: str, kind: str | None) -> MemorydError:
        """The error rebuilt from an envelope's ``message`` and ``kind`` (what a client
        knows of it); ``str()`` of the result is ``message``."""
        return cls(message)

    @classmethod
    def _rebuilt(cls, message: str, **attributes: object) -> MemorydError:
        """An instance whose ``str()`` is ``message``, with ``attributes`` set, for the
        classes whose constructor takes other arguments than a message."""
        err = cls.__new__(cls)
        Exception.__init__(err, message)
        err.__dict__.update(attributes)
        return err


_BY_WIRE_TYPE[MemorydError.wire_type] = MemorydError


def describe(exc: BaseException) -> tuple[int, str, str, str | None]:
    """``(http_status, wire type, message, kind)`` of an exception a use case raised.

    ``kind`` is the error's ``kind`` attribute as a string (e.g. ``UpstreamError.kind``),
    else ``None``. An exception that is not a :class:`MemorydError` (a bug) is
    ``(500, "InternalError", GENERIC_MESSAGE, None)``: its message may hold internals.
    """
    if not isinstance(exc, MemorydError):
        return 500, INTERNAL_TYPE, GENERIC_MESSAGE, None
    kind = getattr(exc, "kind", None)
    if not isinstance(kind, str | None):
        kind = str(kind)
    return exc.http_status, exc.wire_type, str(exc), kind


def result_body(result: Any) -> dict[str, Any]:
    """The success envelope of the control socket and the REST API: ``{"result": result}``."""
    return {"result": result}


def error_body(type_name: str, message: str, kind: Any = None) -> dict[str, Any]:
    """The error envelope of the control socket and the REST API: ``{"error": {"type":
    type_name, "message": message, "kind": str | None}}`` (a ``kind`` that is not a string
    is written as one)."""
    if not isinstance(kind, str | None):
        kind = str(kind)
    return {"error": {"type": type_name, "message": message, "kind": kind}}


#: The envelope's ``type`` of an error that is an HTTP status, not one of our classes: a
#: fixed table (reason phrases of RFC 9110 without spaces; Python's own phrases change
#: between versions), the same on the control socket and the REST API.
STATUS_TYPES = {
    400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound",
    405: "MethodNotAllowed", 408: "RequestTimeout", 409: "Conflict", 411: "LengthRequired",
    413: "RequestTooLarge", 414: "URITooLong", 415: "UnsupportedMediaType",
    431: "RequestHeaderFieldsTooLarge", 500: "InternalError", 501: "NotImplemented",
    502: "BadGateway", 503: "ServiceUnavailable", 505: "HTTPVersionNotSupported",
}


def status_type(status: int) -> str:
    """The envelope's ``type`` of an error that is an HTTP status, not one of our classes
    (a missing token, an unknown route, a malformed request): :data:`STATUS_TYPES`
    (``404`` -> ``NotFound``, ``413`` -> ``RequestTooLarge``), ``Error`` for another
    number."""
    return STATUS_TYPES.get(status, "Error")


def error_envelope(exc: BaseException) -> tuple[int, dict[str, Any]]:
    """The answer to ``exc`` on the control socket and the REST API: ``(status,``
    :func:`error_body` ``)`` (see :func:`describe`)."""
    status, type_name, message, kind = describe(exc)
    return status, error_body(type_name, message, kind)


class ConfigError(MemorydError):
    """The config file is missing, unreadable or invalid. Exit 78 (``EX_CONFIG``), HTTP 400.

    Attributes:
        path: the file that was read (``None`` for defaults only).
        problems: one line per problem, each ``at `key.path`: message``.
    """

    exit_code = 78
    http_status = 400

    def __init__(self, path: str | None, problems: list[str]) -> None:
        self.path = path
        self.problems = list(problems)
        where = f" in {path}" if path else ""
        body = "\n".join(f"  {p}" for p in self.problems)
        super().__init__(f"invalid configuration{where}:\n{body}")

    @classmethod
    def from_wire(cls, message: str, kind: str | None) -> MemorydError:
        """See :meth:`MemorydError.from_wire` (``path`` unknown, the message the one
        problem)."""
        return cls._rebuilt(message, path=None, problems=[message])


class SourceError(MemorydError):
    """The OpenCode database cannot be found, opened or read. Exit 4."""

    exit_code = 4


class SourceSchemaError(SourceError):
    """The OpenCode database has a schema this version does not understand."""


class StateError(MemorydError):
    """Our own state file cannot be opened or written."""


class StoreError(MemorydError):
    """The memory store failed, or refused an operation."""


class StoreInUseError(StoreError):
    """The embedded store is open in another process (Qdrant Edge allows one at a time)."""


class EmbedderMismatchError(StoreError):
    """The store was built with a different embedder (name or dimension). HTTP 409."""

    http_status = 409


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

    HTTP 502 (the daemon's own upstream failed).
    """

    http_status = 502

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

    @classmethod
    def from_wire(cls, message: str, kind: str | None) -> MemorydError:
        """See :meth:`MemorydError.from_wire`: the daemon's ``kind`` (``remote`` when it
        sent none), never retryable from here."""
        return cls(message, kind=kind or "remote", retryable=False)


class ExtractionError(MemorydError):
    """The LLM's answer was not valid JSON or did not match the memory schema.

    Attributes:
        tokens_in: prompt tokens the refused answer cost (0 when unknown).
        tokens_out: completion tokens the refused answer cost (0 when unknown).
        reply_digest: SHA-256 (hex) of the refused answer's text, when there was one: two
            failures with the same digest got the same answer byte for byte.

    HTTP 502.
    """

    http_status = 502

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
    :mod:`opencode_memoryd.serve.control.peer`)."""


class RequestError(MemorydError):
    """Raised by a handler to reject its payload (missing or invalid fields): HTTP 400,
    exit 2 (a usage error)."""

    exit_code = 2
    http_status = 400


class NotFoundError(MemorydError):
    """What a use case was asked to act on does not exist: no memory with that id (or
    none that is active and visible to this user), no project for a folder, no dream run
    with that id. Nothing was changed. Exit 5; the control socket answers HTTP 404."""

    exit_code = 5
    http_status = 404


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

    @classmethod
    def from_envelope(cls, status: int, body: object) -> RemoteError | None:
        """The error a control-socket answer with ``status`` (not 200) and the decoded
        JSON ``body`` carries (see :func:`error_envelope`); ``None`` when the body is not
        an error envelope."""
        error = body.get("error") if isinstance(body, dict) else None
        if not isinstance(error, dict) or not isinstance(error.get("type"), str):
            return None
        kind = error.get("kind")
        return cls(str(error.get("message", "")), type=error["type"],
                   kind=kind if isinstance(kind, str) else None, status=status)

    def local(self) -> MemorydError:
        """The error the daemon raised, rebuilt here: the class named by ``type`` (its
        message, its ``kind``, hence its exit code), or a :class:`MemorydError` for a
        type that is not an error class of ours (``InternalError``, ``NotFound``...)."""
        cls = _BY_WIRE_TYPE.get(self.type, MemorydError)
        if cls is RemoteError:
            cls = MemorydError
        return cls.from_wire(self.message, self.kind)


class RefusedError(MemorydError):
    """The operation was refused and nothing was changed: it would overwrite a file, or
    undo or change something it must not (e.g. ``config init`` over an existing file).
    Exit 6, HTTP 409."""

    exit_code = 6
    http_status = 409


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

    @classmethod
    def from_wire(cls, message: str, kind: str | None) -> MemorydError:
        """See :meth:`MemorydError.from_wire` (the sizes are not known here: 0)."""
        return cls._rebuilt(message, directory="", needed_bytes=0, free_bytes=0)


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

    @classmethod
    def from_wire(cls, message: str, kind: str | None) -> MemorydError:
        """See :meth:`MemorydError.from_wire` (``path`` unknown, the message the reason)."""
        return cls._rebuilt(message, path="", reason=message)
