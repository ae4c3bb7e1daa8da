"""The daemon's local control endpoint: JSON over HTTP on a Unix-domain socket.

While ``opencode-memoryd run`` is up it owns the embedded memory store, so commands started
from another process (``maintain``, ``search``, ``list``, ``status``) ask the daemon to do
the work through this endpoint instead of opening the store themselves.

Where the socket lives (:func:`socket_path`)::

    $XDG_RUNTIME_DIR/opencode-memoryd/control.sock   when XDG_RUNTIME_DIR is set
    <state_dir>/control.sock                         otherwise

The socket file is mode 0600 and its folder 0700, so only the owning user can connect
(Linux checks write permission on the socket file at ``connect``). Clients check the
other way round before they send anything: the folder and the socket are theirs, and so
is the process serving it (:mod:`opencode_memoryd.serve.control.peer`). A lock file
``control.sock.lock`` next to it, held with ``flock`` for the server's lifetime, keeps two
daemons that start at the same moment from replacing each other's socket.

Protocol (every body is JSON, UTF-8; each connection carries one request)::

    GET  /v1/ping        -> 200 {"result": {"pid": <daemon pid>}}
    POST /v1/<name>      body: a JSON object (an empty body counts as {})
                         -> 200 {"result": <whatever the handler returned>}
    GET  /v1/<name>?k=v  the same, for the routes served on GET (``context``, ``recall``): the
                         query string is the payload (empty values count as absent)
    any failure          -> 4xx/5xx {"error": {"type": str, "message": str,
                                                "kind": str | null}}

Status codes:

======  ==========================================================================
400     ``BadRequest`` (body is not a JSON object, bad Content-Length),
        :class:`RequestError` raised by a handler, or :class:`~.errors.ConfigError`
404     ``NotFound``: no such route, or :class:`~.errors.NotFoundError` raised by a
        handler (the session, memory or run asked for does not exist)
405     ``MethodNotAllowed``: e.g. ``GET`` on a handler route
409     :class:`~.errors.EmbedderMismatchError`, :class:`~.errors.RefusedError`
411     ``LengthRequired``: chunked bodies are not accepted
413     ``RequestTooLarge``: the body exceeds ``max_body_bytes`` (1 MiB by default)
500     any other :class:`~.errors.MemorydError` (its own type and message), or
        ``InternalError`` for any other exception: a fixed generic message, while the
        traceback goes to the log only
501     ``NotImplemented``: an HTTP method other than GET/POST
502     :class:`~.errors.UpstreamError` and :class:`~.errors.ExtractionError`
503     ``ServiceUnavailable``: the server is shutting down
======  ==========================================================================

For a :class:`~.errors.MemorydError` the status is its class's ``http_status``, the
``type`` its ``wire_type`` (the class name) and ``kind`` its ``kind`` attribute (e.g.
``UpstreamError.kind``), else ``null`` (:func:`~.errors.error_envelope`); a client rebuilds
the error with :meth:`~.errors.RemoteError.local`.

The server is the standard library's :class:`http.server.BaseHTTPRequestHandler` on
:class:`socketserver.ThreadingUnixStreamServer`: the endpoint serves a handful of requests
from the same user, so a maintained, dependency-free server is enough; it is hardened here
with a body size cap, a per-connection socket timeout, JSON-only error bodies and no
keep-alive. The client (:mod:`~opencode_memoryd.serve.control.client`) writes one HTTP/1.1
request per connection by hand.
"""

from __future__ import annotations

import re

from opencode_memoryd.config.paths import (  # the path rules, in one place
    MCP_SOCKET_NAME,
    RUNTIME_SUBDIR,
    SOCKET_NAME,
    mcp_socket_path,
    socket_path,
)
from opencode_memoryd.errors import GENERIC_MESSAGE, describe

BASE_URL = "http://opencode-memoryd"
MAX_BODY_BYTES = 1024 * 1024
CONNECTION_TIMEOUT_SECONDS = 30.0

# Linux's sun_path holds 108 bytes including the terminating NUL.
MAX_SOCKET_PATH_BYTES = 107
# After a 413 the server reads and discards up to this much of the rejected body, so the
# client finishes sending and sees the 413 instead of a broken pipe.
DRAIN_LIMIT_BYTES = 16 * 1024 * 1024
ROUTE_NAME_RE = re.compile(r"[a-z][a-z0-9_-]{0,63}")


def error_status(exc: BaseException) -> int:
    """The HTTP status the server answers with when a handler raises ``exc``: its class's
    ``http_status`` (:mod:`opencode_memoryd.errors`), 500 for any other exception."""
    return describe(exc)[0]


__all__ = ["GENERIC_MESSAGE", "MCP_SOCKET_NAME", "RUNTIME_SUBDIR", "SOCKET_NAME",
           "error_status", "mcp_socket_path", "socket_path"]

