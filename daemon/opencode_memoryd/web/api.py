"""The REST API: one Starlette route per use case of
:class:`~opencode_memoryd.usecases.service.Service`, in the envelope
of the control socket: ``{"result": …}`` / ``{"error": {"type": …, "message": …, "kind":
…}}`` (:func:`~opencode_memoryd.errors.result_body`, :func:`~opencode_memoryd.errors.error_body`).

Errors have the status their class carries (``http_status``, the control socket's too): a
bad request 400 (:class:`~opencode_memoryd.errors.RequestError`), nothing there 404
(:class:`~opencode_memoryd.errors.NotFoundError`), refused 409
(:class:`~opencode_memoryd.errors.RefusedError`, e.g. undoing a run already undone), the
LLM or embedding endpoint failed 502, anything else 500 (a
:class:`~opencode_memoryd.errors.MemorydError` says what failed; a bug says only that the
log has it).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import structlog
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from opencode_memoryd.errors import (
    MemorydError,
    NotFoundError,
    RequestError,
    error_body,
    error_envelope,
    result_body,
    status_type,
)
from opencode_memoryd.usecases.service import Service
from opencode_memoryd.web.openapi import OPENAPI_PATH, openapi_document
from opencode_memoryd.web.sessions import Sessions

log = structlog.get_logger(__name__)

#: The largest request body accepted, in bytes.
MAX_BODY_BYTES = 64 * 1024


def ok(data: Any, status: int = 200) -> JSONResponse:
    """A success envelope, the control socket's: ``{"result": data}``."""
    return JSONResponse(result_body(data), status_code=status)


def fail(status: int, message: str, type_name: str | None = None) -> JSONResponse:
    """An error envelope, the control socket's: ``{"error": {"type", "message", "kind"}}``;
    ``type_name`` defaults to the status's (:func:`~opencode_memoryd.errors.status_type`)."""
    return JSONResponse(error_body(type_name or status_type(status), message),
                        status_code=status)


def error_response(exc: BaseException) -> JSONResponse:
    """The envelope and status of an exception raised by a use case, as the control socket
    answers it (:func:`~opencode_memoryd.errors.error_envelope`); a bug says only that the
    log has it."""
    status, envelope = error_envelope(exc)
    return JSONResponse(envelope, status_code=status)


async def call(request: Request, use: Callable[[], Any], code: int = 200) -> JSONResponse:
    """Run ``use()``, a (blocking) call of one use case, in a worker thread; its result
    (status ``code``) or error as an envelope. A bug is logged with the request's path."""
    try:
        data = await run_in_threadpool(use)
    except Exception as exc:
        if not isinstance(exc, MemorydError):
            log.exception("web.handler_crashed", path=request.url.path)
        return error_response(exc)
    return ok(data, code)


def query_int(q: Mapping[str, str], name: str, default: int) -> int:
    """An integer query parameter.

    Raises:
        RequestError: not an integer.
    """
    raw = q.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise RequestError(f"`{name}` must be an integer, not {raw!r}") from None


def query_str(q: Mapping[str, str], name: str) -> str | None:
    """A query parameter, ``None`` when absent or empty."""
    return q.get(name) or None


def query_bool(q: Mapping[str, str], name: str) -> bool:
    """A boolean query parameter: ``true``/``1`` or ``false``/``0`` (absent: false).

    Raises:
        RequestError: another value.
    """
    raw = (q.get(name) or "false").lower()
    if raw not in ("true", "1", "false", "0"):
        raise RequestError(f"`{name}` must be true or false, not {raw!r}")
    return raw in ("true", "1")


async def body(request: Request, allowed: tuple[str, ...]) -> dict[str, Any]:
    """The JSON object a request carries, with only ``allowed`` keys.

    Raises:
        RequestError: too large, not JSON, not an object, or an unknown key.
    """
    too_big = RequestError(f"the request body is over {MAX_BODY_BYTES} bytes")
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise too_big
    raw = b""
    async for chunk in request.stream():  # never more than the limit in memory
        raw += chunk
        if len(raw) > MAX_BODY_BYTES:
            raise too_big
    try:
        data = json.loads(raw or b"{}")
    except (UnicodeDecodeError, ValueError):
        raise RequestError("the request body is not valid JSON") from None
    if not isinstance(data, dict):
        raise RequestError("the request body must be a JSON object")
    unknown = sorted(set(data) - set(allowed))
    if unknown:
        raise RequestError(f"unknown field(s): {', '.join(unknown)}; allowed: "
                           f"{', '.join(allowed)}")
    return data


def body_str(b: Mapping[str, Any], name: str) -> str | None:
    """A request body's optional string field (``None`` when absent, null or empty).

    Raises:
        RequestError: present but not a string.
    """
    value = b.get(name)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise RequestError(f"`{name}` must be a string, not {type(value).__name__}")
    return value


class Api:
    """The API's handlers over ``service``; ``sessions``: the page's sessions, which a
    login opens."""

    def __init__(self, service: Service, sessions: Sessions) -> None:
        # the local implementation of the contract (usecases/contract.py): mypy checks
        # each call below against its methods
        self.service = service
        self.sessions = sessions

    async def session_get(self, request: Request) -> Response:
        """``GET /api/session``: the CSRF token of the request's credential and the user
        id."""
        return ok({"csrf_token": request.state.csrf, "user_id": self.service.app.user_id})

    async def session_post(self, request: Request) -> Response:
        """``POST /api/session``: the login (a one-time code or the access token, which
        the guard checked): a new page session, ``{token, csrf_token, user_id,
        idle_seconds, max_seconds}``. No cookie: see :mod:`opencode_memoryd.web.auth`."""
        token, session = self.sessions.login()
        return ok({"token": token, "csrf_token": session.csrf,
                   "user_id": self.service.app.user_id,
                   "idle_seconds": self.sessions.idle_seconds,
                   "max_seconds": self.sessions.max_seconds})

    async def memories_list(self, request: Request) -> Response:
        """``GET /api/memories``: see :meth:`Service.browse`."""
        q = request.query_params
        try:
            offset, limit = query_int(q, "offset", 0), query_int(q, "limit", 50)
        except RequestError as exc:
            return error_response(exc)
        return await call(request, lambda: self.service.browse(
            project=query_str(q, "project"), scope=query_str(q, "scope"),
            type=query_str(q, "type"), status=q.get("status") or "active",
            text=query_str(q, "text"), offset=offset, limit=limit))

    async def memories_create(self, request: Request) -> Response:
        """``POST /api/memories``: see :meth:`Service.add` (201)."""
        try:
            b = await body(request, ("content", "type", "scope", "project", "directory"))
            scope = body_str(b, "scope") or "project"
            type_ = body_str(b, "type") or ("user" if scope == "user" else "project")
            project, directory = body_str(b, "project"), body_str(b, "directory")
            if directory is not None and not directory.startswith("/"):
                raise RequestError(f"`directory` must be an absolute path, not {directory!r}"
                                   " (the daemon has no folder of yours to start from)")
        except RequestError as exc:
            return error_response(exc)
        content: Any = b.get("content")  # checked by the use case (a RequestError)
        return await call(request, lambda: self.service.add(
            content=content, type=type_, scope=scope, project=project,
            directory=directory), 201)

    async def memory_get(self, request: Request) -> Response:
        """``GET /api/memories/{id}``: see :meth:`Service.show`."""
        memory_id = request.path_params["memory_id"]
        try:
            shown = await run_in_threadpool(lambda: self.service.show(memory_id=memory_id))
        except Exception as exc:
            return error_response(exc)
        if shown is None:
            return fail(404, f"no memory with id {memory_id}", NotFoundError.wire_type)
        return ok(shown)

    async def memory_update(self, request: Request) -> Response:
        """``PATCH /api/memories/{id}``: see :meth:`Service.edit`."""
        try:
            b = await body(request, ("content", "type"))
        except RequestError as exc:
            return error_response(exc)
        return await call(request, lambda: self.service.edit(
            memory_id=request.path_params["memory_id"], content=b.get("content"),
            type=b.get("type")))

    async def memory_forget(self, request: Request) -> Response:
        """``DELETE /api/memories/{id}``: see :meth:`Service.forget`."""
        return await call(request, lambda: self.service.forget(
            memory_id=request.path_params["memory_id"]))

    async def memory_restore(self, request: Request) -> Response:
        """``POST /api/memories/{id}/restore``: see :meth:`Service.restore`."""
        return await call(request, lambda: self.service.restore(
            memory_id=request.path_params["memory_id"]))

    async def memory_confirm(self, request: Request) -> Response:
        """``POST /api/memories/{id}/confirm``: see :meth:`Service.confirm`."""
        return await call(request, lambda: self.service.confirm(
            memory_id=request.path_params["memory_id"]))

    async def memory_reject(self, request: Request) -> Response:
        """``POST /api/memories/{id}/reject``: see :meth:`Service.confirm` (``reject``)."""
        return await call(request, lambda: self.service.confirm(
            memory_id=request.path_params["memory_id"], reject=True))

    async def search(self, request: Request) -> Response:
        """``GET /api/search?q=``: see :meth:`Service.search`."""
        q = request.query_params
        try:
            query = query_str(q, "q")
            if query is None:
                raise RequestError("`q` is required: the words to search for")
            limit = query_int(q, "limit", 20)
            if not 1 <= limit <= 100:
                raise RequestError("`limit` must be from 1 to 100")
            include_retired = query_bool(q, "include_retired")
        except RequestError as exc:
            return error_response(exc)
        return await call(request, lambda: self.service.search(
            query=query, project=query_str(q, "project"), limit=limit,
            include_retired=include_retired))

    async def projects(self, request: Request) -> Response:
        """``GET /api/projects``: see :meth:`Service.projects`."""
        return await call(request, self.service.projects)

    async def profile(self, request: Request) -> Response:
        """``GET /api/profile``: see :meth:`Service.profile`."""
        return await call(request, self.service.profile)

    async def stats(self, request: Request) -> Response:
        """``GET /api/stats``: see :meth:`Service.stats`."""
        return await call(request, self.service.stats)

    async def journal(self, request: Request) -> Response:
        """``GET /api/journal``: see :meth:`Service.journal_page`."""
        q = request.query_params
        try:
            user = query_bool(q, "user")
            offset, limit = query_int(q, "offset", 0), query_int(q, "limit", 50)
        except RequestError as exc:
            return error_response(exc)
        return await call(request, lambda: self.service.journal_page(
            project=query_str(q, "project"), user=user, offset=offset, limit=limit))

    async def undo(self, request: Request) -> Response:
        """``POST /api/journal/{run_id}/undo``: see :meth:`Service.undo`."""
        return await call(request, lambda: self.service.undo(
            run_id=request.path_params["run_id"]))

    async def openapi(self, request: Request) -> Response:
        """``GET /api/openapi.json``: the OpenAPI description."""
        return JSONResponse(openapi_document())

    def routes(self) -> list[Route]:
        """Every route of the API."""
        return [
            Route("/api/session", self.session_get, methods=["GET"]),
            Route("/api/session", self.session_post, methods=["POST"]),
            Route("/api/memories", self.memories_list, methods=["GET"]),
            Route("/api/memories", self.memories_create, methods=["POST"]),
            Route("/api/memories/{memory_id}", self.memory_get, methods=["GET"]),
            Route("/api/memories/{memory_id}", self.memory_update, methods=["PATCH"]),
            Route("/api/memories/{memory_id}", self.memory_forget, methods=["DELETE"]),
            Route("/api/memories/{memory_id}/restore", self.memory_restore,
                  methods=["POST"]),
            Route("/api/memories/{memory_id}/confirm", self.memory_confirm,
                  methods=["POST"]),
            Route("/api/memories/{memory_id}/reject", self.memory_reject, methods=["POST"]),
            Route("/api/search", self.search, methods=["GET"]),
            Route("/api/projects", self.projects, methods=["GET"]),
            Route("/api/profile", self.profile, methods=["GET"]),
            Route("/api/stats", self.stats, methods=["GET"]),
            Route("/api/journal", self.journal, methods=["GET"]),
            Route("/api/journal/{run_id}/undo", self.undo, methods=["POST"]),
            Route(OPENAPI_PATH, self.openapi, methods=["GET"]),
        ]
