"""OpenCode's v2 ``session_message`` rows as conversation messages
(:class:`~opencode_memoryd.conversation.rows.MessageRow`).

A v2 row keeps its kind in the ``type`` column and everything else in ``data`` (observed
with OpenCode 1.18.33; 2.x is reported to keep the shape):

* ``user``: ``data.text`` is the human text, one string; it becomes one ``text`` part;
* ``assistant``: one row per model step, answering the latest ``user`` row before it in
  ``seq`` order (there is no ``parentID``); ``data.content[]`` holds ``text``,
  ``reasoning`` and ``tool`` items, a tool item with its result inside it
  (``state{status, input, content[], structured{exit}, error{type, message}}``). Each item
  becomes a part in the 1.x shape (``tool``/``callID``/``state.output``/
  ``state.metadata.exit``), so the transcript condenses tool calls the same way for both;
* every other kind (``synthetic``, ``system``, ``shell``, ``compaction``,
  ``agent-switched``, ``model-switched``, ``location-switched``, ``idle``) is a *note*
  (:attr:`~opencode_memoryd.conversation.rows.MessageRow.is_note`): no parts, never human text.

Pure mapping, no database access.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opencode_memoryd.conversation.rows import MessageRow, PartRow, decode_object, sub_object

#: The kinds that are a question or an answer; every other kind is a note.
TURN_KINDS = ("user", "assistant")


def _text_of(items: object) -> str:
    """The text items of a tool result's ``content[]``, joined by newlines."""
    if not isinstance(items, list):
        return ""
    return "\n".join(str(i.get("text") or "") for i in items
                     if isinstance(i, dict) and i.get("type") == "text" and i.get("text"))


def _tool_part(item: Mapping[str, Any]) -> dict[str, Any]:
    state = sub_object(item, "state")
    status = state.get("status")
    out: dict[str, Any] = {"status": status, "input": state.get("input")}
    output = _text_of(state.get("content"))
    if output:
        out["output"] = output
    structured = sub_object(state, "structured")
    if "exit" in structured:
        out["metadata"] = {"exit": structured.get("exit")}
    error = state.get("error")
    if status == "error" or error:
        out["error"] = (str(error.get("message") or error.get("type") or "")
                        if isinstance(error, dict) else str(error or ""))
    return {"type": "tool", "tool": str(item.get("name") or "tool"),
            "callID": str(item.get("id") or ""), "state": out}


def content_part(item: Mapping[str, Any]) -> dict[str, Any]:
    """One ``content[]`` item of an assistant row as a part in the 1.x shape.

    ``text`` and ``reasoning`` keep their ``text``; a ``tool`` item becomes
    ``{type: "tool", tool, callID, state{status, input, output?, metadata{exit}?, error?}}``
    with ``output`` the text items of its result; other items keep only their ``type``.
    """
    kind = item.get("type")
    if kind in ("text", "reasoning"):
        return {"type": kind, "text": str(item.get("text") or "")}
    if kind == "tool":
        return _tool_part(item)
    return {"type": str(kind or "")}


def message_from_v2(row_id: str, session_id: str, kind: str, seq: int, time_created: int,
                    time_updated: int, raw: object) -> MessageRow:
    """Map one ``session_message`` row (its columns in table order) to a message.

    Args:
        row_id, session_id, kind, seq, time_created, time_updated: the columns.
        raw: the ``data`` column (JSON text); a row that does not decode is kept with
            ``{}`` and ``corrupt`` set, so a high-water mark can move past it.

    Returns:
        A :class:`MessageRow` with ``kind`` and ``seq`` set; parts as described in the
        module docstring (part ids are ``<row id>:<index>``).
    """
    data, corrupt = decode_object(raw)
    parts: list[PartRow] = []
    if kind == "user":
        text = data.get("text")
        if isinstance(text, str):
            parts.append(PartRow(f"{row_id}:0", {"type": "text", "text": text}))
    elif kind == "assistant":
        content = data.get("content")
        for i, item in enumerate(content if isinstance(content, list) else []):
            if isinstance(item, dict):
                parts.append(PartRow(f"{row_id}:{i}", content_part(item)))
    return MessageRow(row_id, session_id, int(time_created), int(time_updated), data,
                      parts, corrupt=corrupt, kind=str(kind), seq=int(seq))
