"""The remote side of the service contract: :class:`~opencode_memoryd.usecases.contract.
UseCases` over any ``send(route, payload)``, the control socket's (a route is a method's
name, its payload the method's keyword arguments).

This module imports nothing at run time (not even :mod:`typing`): a command the daemon
serves goes through it.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not `typing`'s: the thin client path does not import it
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from opencode_memoryd.usecases.contract import UseCases

    #: Sends one request: ``(route, payload) -> result``, raising what the use case raised.
    Send = Callable[[str, dict[str, Any]], Any]


class _Routed:
    """Each attribute a use case: ``routed.search(query="x")`` is ``send("search",
    {"query": "x"})``; the payload holds exactly the keyword arguments given."""

    __slots__ = ("_send",)

    def __init__(self, send: Send) -> None:
        self._send = send

    def __getattr__(self, route: str) -> Callable[..., Any]:
        if route.startswith("_"):
            raise AttributeError(route)
        send = self._send

        def use_case(**payload: Any) -> Any:
            return send(route, payload)

        use_case.__name__ = route
        return use_case


def routed(send: Send) -> UseCases:
    """The use cases as requests through ``send(route, payload)``: what mypy checks the
    calls against is :class:`~opencode_memoryd.usecases.contract.UseCases`.

    Raises (from each method): what ``send`` raises.
    """
    proxy: Any = _Routed(send)
    use_cases: UseCases = proxy
    return use_cases
