"""The Starlette application: the page (one HTML, one script, one style sheet, no build
step, nothing from elsewhere), the REST API (:mod:`opencode_memoryd.web.api`), and the
guard in front of both (:mod:`opencode_memoryd.web.auth`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from opencode_memoryd.config.web import WebConfig
from opencode_memoryd.usecases.service import Service
from opencode_memoryd.web.api import Api, fail
from opencode_memoryd.web.auth import Guard
from opencode_memoryd.web.sessions import Sessions

#: The page's files.
STATIC_DIR = Path(__file__).parent / "static"


async def _index(request: Request) -> Response:
    return FileResponse(STATIC_DIR / "index.html", media_type="text/html")


async def _http_error(request: Request, exc: Exception) -> Response:
    """404 and 405 in the envelope under ``/api/``, as plain text elsewhere."""
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    detail = exc.detail if isinstance(exc, HTTPException) else "internal error"
    if request.url.path.startswith("/api/"):
        message = (f"no such route: {request.method} {request.url.path}" if status in (404, 405)
                   else str(detail))
        return fail(status, message)
    return PlainTextResponse(str(detail), status_code=status)


def build_app(service: Service, token: str, cfg: WebConfig | None = None, *,
              clock: Callable[[], float] = time.monotonic) -> Starlette:
    """The web application over ``service``, guarded by ``token`` (the access token) and
    the page sessions a login opens, timed by ``cfg`` (the ``[web]`` section; its defaults
    when ``None``) on ``clock`` (monotonic seconds)."""
    cfg = cfg or WebConfig()
    sessions = Sessions(idle_seconds=cfg.session_idle_seconds,
                        max_seconds=cfg.session_max_seconds,
                        rotate_seconds=cfg.session_rotate_seconds, clock=clock)
    return Starlette(
        routes=[Route("/", _index, methods=["GET"]), *Api(service, sessions).routes(),
                Mount("/static", StaticFiles(directory=STATIC_DIR), name="static")],
        middleware=[Middleware(Guard, token=token, sessions=sessions, started=time.time())],
        exception_handlers={HTTPException: _http_error},
    )
