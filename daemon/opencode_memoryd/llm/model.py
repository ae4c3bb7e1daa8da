"""What a chat model is to its callers (extraction, summaries, briefs, dream plans)."""

from __future__ import annotations

from typing import Any, Protocol


class ChatReplyLike(Protocol):
    """What the callers of a :class:`ChatModel` read from its answer.

    ``content`` is the answer's text, ``tokens_in``/``tokens_out`` the prompt and completion
    tokens the endpoint counted, ``model`` the model that answered and ``finish_reason`` why
    it stopped (``"stop"``, ``"length"`` when cut off, ``None`` when not reported).
    """

    @property
    def content(self) -> str: ...
    @property
    def tokens_in(self) -> int: ...
    @property
    def tokens_out(self) -> int: ...
    @property
    def model(self) -> str: ...
    @property
    def finish_reason(self) -> str | None: ...


class ChatModel(Protocol):
    """A chat endpoint that answers JSON.

    Implemented by :class:`~opencode_memoryd.llm.chat.ChatClient` and
    :class:`~opencode_memoryd.llm.recorded.RecordedChat`.
    """

    def complete_json(
        self, *, system: str, user: str, schema: dict[str, Any], schema_name: str,
        max_tokens: int | None = None,
    ) -> ChatReplyLike: ...
