"""Scripted models for the LLM corpus bench, as responders of :class:`fake_openai.FakeOpenAI`.

- :func:`perfect_responder`: answers every extraction prompt with the corpus labels of the
  user lines it holds (found by their text), citing those lines: the model the bench's
  numbers are measured against;
- :func:`silent_responder`: never proposes a memory, so whatever is stored comes from the
  rules floor;
- :func:`gullible_responder`: stores the assistant's and the tools' sentences as the user's
  (what the quality gate must refuse: wrong attribution).

Prompts that are not extraction prompts (summaries, briefs) get an empty answer.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from rules_scoring import Case

_LINE = re.compile(r"^\[(msg_\w+)\] (user|assistant|tool): ?(.*)$")
Responder = Callable[[dict[str, Any]], Any]


def _key(text: str) -> str:
    return " ".join(text.split())


def transcript_lines(body: dict[str, Any]) -> list[tuple[str, str, str]]:
    """``(message_id, role, text)`` of every transcript line of a chat request's user
    prompt; continuation lines (indented by four spaces) are joined back with newlines."""
    prompt = "\n".join(str(m.get("content")) for m in body.get("messages", [])
                       if m.get("role") == "user")
    inside = prompt.split("<transcript>", 1)[-1].split("</transcript>", 1)[0]
    out: list[tuple[str, str, str]] = []
    for raw in inside.splitlines():
        hit = _LINE.match(raw)
        if hit:
            out.append((hit.group(1), hit.group(2), hit.group(3)))
        elif out and raw.startswith("    "):
            mid, role, text = out[-1]
            out[-1] = (mid, role, f"{text}\n{raw[4:]}")
    return out


def perfect_responder(cases: Iterable[Case]) -> Responder:
    """A model that stores exactly the labelled facts of each user line it is shown
    (``type``/``section`` ``user`` for user scope, else ``project``/``conventions``)."""
    labels = {_key(c.text): c.expected for c in cases}

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        memories = []
        for mid, role, text in transcript_lines(body):
            if role != "user":
                continue
            for fact, scope in labels.get(_key(text), ()):
                user = scope == "user"
                memories.append({"content": fact, "type": "user" if user else "project",
                                 "scope": scope, "section": "user" if user else "conventions",
                                 "message_ids": [mid]})
        return {"memories": memories, "more": False}

    return answer


def silent_responder(body: dict[str, Any]) -> dict[str, Any]:
    """A model that never proposes a memory."""
    return {"memories": [], "more": False}


def gullible_responder(body: dict[str, Any]) -> dict[str, Any]:
    """A model that takes the assistant's and the tools' sentences for the user's: one
    memory per assistant or tool line, citing the user line before it."""
    memories = []
    user_id = None
    for mid, role, text in transcript_lines(body):
        if role == "user":
            user_id = mid
        elif user_id is not None and len(text.split()) >= 5:
            said = text.split(" -> ", 1)[-1] if role == "tool" else text
            memories.append({"content": said.strip(), "type": "project", "scope": "project",
                             "section": "conventions", "message_ids": [user_id]})
    return {"memories": memories, "more": False}
