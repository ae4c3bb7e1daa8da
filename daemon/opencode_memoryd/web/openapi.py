"""The OpenAPI 3.1 description of the REST API, served at :data:`OPENAPI_PATH`."""

from __future__ import annotations

from typing import Any

from opencode_memoryd import __version__

#: Where the description is served.
OPENAPI_PATH = "/api/openapi.json"

_ERRORS = {
    "400": "bad request (an unknown field, a bad value)",
    "401": "no token, a wrong one, or an ended page session",
    "403": "a state-changing request without the CSRF token, or from another site",
    "404": "no such memory, project or dream run",
    "409": "refused (the memory is retired, the run is already undone …)",
    "500": "the store or the state file failed",
    "502": "the LLM or embedding endpoint failed, or answered what cannot be used",
}


def _param(name: str, where: str, description: str, type_: str = "string",
           required: bool = False) -> dict[str, Any]:
    return {"name": name, "in": where, "required": required or where == "path",
            "description": description, "schema": {"type": type_}}


def _op(summary: str, params: list[dict[str, Any]] | None = None,
        body: dict[str, Any] | None = None, result: str = "object",
        unsafe: bool = False) -> dict[str, Any]:
    op: dict[str, Any] = {
        "summary": summary,
        "parameters": list(params or []),
        "responses": {"200": {"description": "`{\"result\": …}`",
                              "content": {"application/json": {"schema": {
                                  "$ref": "#/components/schemas/Success"}}}},
                      **{code: {"description": text, "content": {"application/json": {
                          "schema": {"$ref": "#/components/schemas/Error"}}}}
                         for code, text in _ERRORS.items()}},
        "x-result": result,
    }
    if unsafe:
        op["parameters"].append(_param("X-CSRF-Token", "header",
                                       "the CSRF token (GET /api/session)", required=True))
    if body is not None:
        op["requestBody"] = {"required": True, "content": {"application/json": {
            "schema": {"type": "object", "additionalProperties": False,
                       "properties": body}}}}
    return op


def _document_op() -> dict[str, Any]:
    """``GET /api/openapi.json``: the one answer that is not in the envelope (the document
    itself, as OpenAPI tools read it)."""
    op = _op("this document (the document itself, not in the envelope)")
    op["responses"]["200"] = {"description": "the OpenAPI document",
                              "content": {"application/json": {"schema": {"type": "object"}}}}
    del op["x-result"]
    return op


_MEMORY_ID = _param("memory_id", "path", "the memory's id (a UUID)")
_PAGE = [_param("offset", "query", "entries to skip (default 0)", "integer"),
         _param("limit", "query", "entries per page, 1 to 500 (default 50)", "integer")]
_STR = {"type": "string"}


def openapi_document() -> dict[str, Any]:
    """The OpenAPI document (a JSON-safe dict)."""
    paths: dict[str, dict[str, Any]] = {
        "/api/session": {
            "get": _op("the CSRF token of the request's token and the user id",
                       result="{csrf_token, user_id}"),
            "post": _op("log in with `Authorization: Bearer TOKEN` (the web-token file's), "
                        "or with a one-time code of `opencode-memoryd web` in "
                        "`X-Login-Code`: a page session, whose token is the bearer token "
                        "from then on (a rotated one comes back in the `X-Session-Token` "
                        "header; no cookie is ever set)",
                        result="{token, csrf_token, user_id, idle_seconds, max_seconds}"),
        },
        "/api/memories": {
            "get": _op("memories by filter, most recently changed first, a page at a time",
                       [_param("project", "query", "a project key"),
                        _param("scope", "query", "user or project"),
                        _param("type", "query", "a memory type"),
                        _param("status", "query", "active (default), retired or all"),
                        _param("text", "query", "content contains this (any case)"),
                        *_PAGE], result="{total, offset, limit, memories: [memory]}"),
            "post": _op("add a memory by hand (deduplicated, secrets redacted): 201",
                        body={"content": _STR, "type": _STR, "scope": _STR,
                              "project": _STR, "directory": _STR},
                        result="{memory, status: added|duplicate, redactions, superseded}",
                        unsafe=True),
        },
        "/api/memories/{memory_id}": {
            "get": _op("one memory with its lineage and history", [_MEMORY_ID],
                       result="{memory, lineage}"),
            "patch": _op("edit the content and/or the type: re-embedded, the old version "
                         "kept in `history`, journaled as a manual edit", [_MEMORY_ID],
                         body={"content": _STR, "type": _STR},
                         result="{memory, status: edited|unchanged, run_id, redactions}",
                         unsafe=True),
            "delete": _op("forget: a tombstone, never a hard delete", [_MEMORY_ID],
                          result="{memory, status: forgotten}", unsafe=True),
        },
        "/api/memories/{memory_id}/restore": {
            "post": _op("bring a forgotten memory back", [_MEMORY_ID],
                        result="{memory, status: restored}", unsafe=True),
        },
        "/api/memories/{memory_id}/confirm": {
            "post": _op("confirm the agent's pending user-scope note: it becomes yours and "
                        "reaches the context block", [_MEMORY_ID],
                        result="{memory, status: confirmed}", unsafe=True),
        },
        "/api/memories/{memory_id}/reject": {
            "post": _op("reject the agent's pending note (forgotten: a tombstone)",
                        [_MEMORY_ID], result="{memory, status: rejected}", unsafe=True),
        },
        "/api/search": {
            "get": _op("ranked search (BM25, plus dense vectors when configured)",
                       [_param("q", "query", "the words to search for", required=True),
                        _param("project", "query", "a project key (and the user scope)"),
                        _param("limit", "query", "1 to 100 (default 20)", "integer"),
                        _param("include_retired", "query", "tombstones too", "boolean")],
                       result="[memory with score]"),
        },
        "/api/projects": {"get": _op("every project with its root, name and counts; the "
                                     "user scope's counts",
                                     result="{projects: [{id, root, name, counts}], user}")},
        "/api/profile": {"get": _op("the user-scope memories by type")},
        "/api/stats": {"get": _op("counts of memories, projects and journal entries")},
        "/api/journal": {
            "get": _op("the dream journal, newest first, each entry with its operations",
                       [_param("project", "query", "a project key"),
                        _param("user", "query", "the user scope's entries", "boolean"),
                        *_PAGE], result="{total, offset, limit, entries}"),
        },
        "/api/journal/{run_id}/undo": {
            "post": _op("undo an applied dream: its memories as they were before",
                        [_param("run_id", "path", "the dream run id")],
                        result="the undo's journal entry", unsafe=True),
        },
        "/api/openapi.json": {"get": _document_op()},
    }
    return {
        "openapi": "3.1.0",
        "info": {"title": "opencode-memoryd", "version": __version__,
                 "description": "Browse, search, edit and forget memories; read the dream "
                                "journal. Served on a loopback port only; every /api/ "
                                "request needs a token (a page session's, or the "
                                "web-token file's)."},
        "servers": [{"url": "/"}],
        "security": [{"bearer": []}],
        "paths": paths,
        "components": {
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
            },
            "schemas": {
                "Success": {"type": "object", "required": ["result"],
                            "properties": {"result": {}}, "additionalProperties": False},
                "Error": {"type": "object", "required": ["error"],
                          "additionalProperties": False,
                          "properties": {"error": {
                              "type": "object", "required": ["type", "message", "kind"],
                              "properties": {"type": _STR, "message": _STR,
                                             "kind": {"type": ["string", "null"]}}}}},
            },
        },
    }
