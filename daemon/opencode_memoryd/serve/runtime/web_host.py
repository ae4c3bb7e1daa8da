"""The daemon's side of the web page: start it when ``[web] enabled`` is true, importing
the web framework (Starlette, uvicorn) only then."""

from __future__ import annotations

from typing import Protocol

from opencode_memoryd.compose import App
from opencode_memoryd.usecases.service import Service


class WebPage(Protocol):
    """A running web page server (:class:`opencode_memoryd.web.server.WebServer`)."""

    url: str | None

    def stop(self) -> None:
        """Stop serving."""
        ...


def start_web_page(service: Service, app: App) -> WebPage | None:
    """The web page's server, started, or ``None``: ``[web]`` is off, or it could not
    start (logged; the daemon's other work goes on)."""
    if not app.config.web.enabled:
        return None
    from opencode_memoryd.web.server import start_web

    return start_web(service, app.config.web, app.state_dir)
