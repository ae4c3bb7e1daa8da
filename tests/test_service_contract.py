"""The service contract: the use cases declared once (``usecases/contract.py``), the local
service and the remote one agree with it, the route table is generated from it, and no
caller outside the wire dispatch names a route by a string."""

from __future__ import annotations

import ast
import inspect
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from opencode_memoryd.errors import NotFoundError
from opencode_memoryd.serve.control import client as control_client
from opencode_memoryd.serve.control.server import ControlServer
from opencode_memoryd.usecases import contract
from opencode_memoryd.usecases.action import ActionRecall
from opencode_memoryd.usecases.contract import ROUTES, UseCases
from opencode_memoryd.usecases.routed import routed
from opencode_memoryd.usecases.service import Service

PACKAGE = Path(contract.__file__).resolve().parents[1]
#: The wire dispatch: the only modules that may turn a route name into a call.
WIRE = {"cli/connect.py", "usecases/service.py", "usecases/contract.py", "usecases/routed.py",
        "serve/runtime/commands.py", "serve/mcp/host.py",
        "serve/control/client.py", "serve/mcp/server.py"}
#: Functions that take a route name.
ROUTE_TAKERS = {"run_use_case", "via_daemon", "call", "send"}


def _callee(node: ast.Call) -> str:
    func = node.func
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def test_no_use_case_is_called_by_a_route_string_outside_the_wire() -> None:
    """The CLI, the MCP tool and the web API call the contract's methods: a call such as
    ``run_use_case(app, "search", ...)`` or ``call("search", ...)`` hides the use case from
    mypy and from "find usages"."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel in WIRE:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call) or _callee(node) not in ROUTE_TAKERS:
                continue
            by_string = any(isinstance(a, ast.Constant) and a.value in ROUTES
                            for a in node.args)
            if by_string or _callee(node) in {"run_use_case", "via_daemon"}:
                found.append(f"{rel}:{node.lineno} {ast.unparse(node)[:80]}")
    assert found == []


def test_the_route_table_is_the_protocol() -> None:
    methods = [name for name, value in vars(UseCases).items()
               if inspect.isfunction(value) and not name.startswith("_")]
    assert tuple(methods) == ROUTES
    assert len(set(ROUTES)) == len(ROUTES)


@pytest.mark.parametrize("route", ROUTES)
def test_the_local_service_takes_what_the_contract_declares(route: str) -> None:
    """Same keyword arguments, kinds and defaults (what the wire's payload is checked
    against, :func:`opencode_memoryd.usecases.service.call`)."""
    declared = inspect.signature(getattr(UseCases, route)).parameters
    # `action` and `action_given` are the instance's ActionRecall.action and .confirm (set
    # in Service.__init__)
    on_actions = {"action_given": "confirm"}.get(route, route)
    local = inspect.signature(getattr(Service, route, None) or getattr(ActionRecall, on_actions)
                              ).parameters
    as_tuples = [(p.name, p.kind, p.default) for p in declared.values()]
    assert [(p.name, p.kind, p.default) for p in local.values()] == as_tuples


@pytest.fixture
def sock() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="mds-", dir="/tmp"))
    yield d / "run" / "control.sock"
    shutil.rmtree(d, ignore_errors=True)


def test_the_remote_service_sends_each_method_as_its_route(sock: Path) -> None:
    """Over a real control socket: each method is one request to its route, the keyword
    arguments given (and no others) its payload, the answer its result, an error the
    daemon's class."""
    def handler(route: str) -> Any:
        def run(payload: dict[str, Any]) -> Any:
            if route == "show":
                raise NotFoundError(f"no memory with id {payload['memory_id']}")
            return {"route": route, "payload": payload}
        return run

    server = ControlServer(sock, {r: handler(r) for r in ROUTES})
    server.start()
    try:
        service = routed(lambda route, payload: control_client.call(sock, route, payload))
        assert service.search(query="pnpm", limit=3) == {
            "route": "search", "payload": {"query": "pnpm", "limit": 3}}
        assert service.status() == {"route": "status", "payload": {}}
        assert service.add(content="use uv", type="project", scope="project",
                           directory="/p", caller="agent") == {
            "route": "add", "payload": {"content": "use uv", "type": "project",
                                        "scope": "project", "directory": "/p",
                                        "caller": "agent"}}
        with pytest.raises(Exception) as info:
            service.show(memory_id="abcd")
        error = info.value
        assert (type(error).__name__, getattr(error, "status", None)) == ("RemoteError", 404)
        assert type(error.local()).__name__ == "NotFoundError"  # type: ignore[attr-defined]
    finally:
        server.close(wait_seconds=2)
    with pytest.raises(AttributeError):
        routed(lambda route, payload: None)._private  # type: ignore[attr-defined]  # noqa: B018


def test_the_wire_policies_name_routes_of_the_contract() -> None:
    """The route sets the daemon keys its policies on (served on GET, run as the agent over
    MCP, waiting for the capture code) name methods of the contract: a renamed method
    cannot leave a policy naming nothing."""
    from opencode_memoryd.serve.mcp.host import AGENT_ROUTES
    from opencode_memoryd.serve.runtime.commands import CAPTURE_ROUTES
    from opencode_memoryd.usecases.contract import GET_ROUTES

    for policy in (GET_ROUTES, AGENT_ROUTES, CAPTURE_ROUTES):
        assert policy and policy <= set(ROUTES)
