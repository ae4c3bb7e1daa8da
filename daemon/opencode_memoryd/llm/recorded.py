"""A chat model whose answers are recorded: the same request is never paid for twice.

Some work asks the model and acts on the answer later, or may ask the same thing again:
a dream asks for one plan per group and applies them all at the end (a dream killed while
planning used to lose the plans it had, and the next dream asked again); a session's
summary or a project's brief whose answer could not be used is asked for again on the next
pass. :class:`RecordedChat` records each answer, usable or not and redacted, in the state file
(:class:`~opencode_memoryd.state.replies.ReplyTable`, through the :class:`ReplyMemory`
protocol) as it arrives, under a hash of the exact request (model, prompts, schema, token
cap); the same request gets the recorded answer without a call, with zero tokens (they
were spent when it was asked). Answers are forgotten after :data:`KEEP_DAYS` days, or when
the caller says they are spent (:meth:`RecordedChat.forget_used`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import structlog

from opencode_memoryd.errors import MemorydError
from opencode_memoryd.llm.model import ChatModel, ChatReplyLike
from opencode_memoryd.models import iso_utc
from opencode_memoryd.redaction.engine import redact

log = structlog.get_logger(__name__)

#: How long a recorded answer is kept (days).
KEEP_DAYS = 7


class ReplyMemory(Protocol):
    """Where answers are recorded; implemented by
    :class:`~opencode_memoryd.state.replies.ReplyTable` (``StateDB.replies``)."""

    def recorded_reply(self, key: str) -> dict[str, Any] | None:
        """The answer recorded under ``key``, or ``None``."""
        ...

    def record_reply(self, key: str, reply: Mapping[str, Any], now: str) -> None:
        """Record an answer under ``key``."""
        ...

    def forget_replies(self, keys: Sequence[str] = (), *, before: str | None = None) -> int:
        """Forget the answers under ``keys`` and those recorded before ``before``."""
        ...


@dataclass(frozen=True)
class RecordedReply:
    """A recorded answer (the fields of
    :class:`~opencode_memoryd.llm.model.ChatReplyLike`)."""

    content: str
    tokens_in: int
    tokens_out: int
    model: str
    finish_reason: str | None


def request_key(model: str, system: str, user: str, schema: dict[str, Any],
                schema_name: str, max_tokens: int | None) -> str:
    """The key of a request: a SHA-256 over its model, prompts, schema and token cap
    (hex)."""
    blob = json.dumps([model, system, user, schema, schema_name, max_tokens], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


class RecordedChat:
    """A :class:`~opencode_memoryd.llm.model.ChatModel` whose answers are
    recorded (see the module docstring).

    Args:
        chat: the chat model (its ``model`` attribute, when it has one, is part of the key).
        memory: where answers are recorded. A failure to read or record is logged and
            the call goes on as if nothing were recorded.
        clock: the current aware UTC time.

    Attributes:
        used: the keys of the requests made since :meth:`begin` (asked or replayed).
    """

    def __init__(self, chat: ChatModel, memory: ReplyMemory, *,
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.chat = chat
        self.memory = memory
        self.clock = clock
        self.used: list[str] = []

    @property
    def model(self) -> str:
        """The wrapped model's name (``""`` when it has none)."""
        return str(getattr(self.chat, "model", ""))

    def begin(self) -> None:
        """Start a unit of work: :attr:`used` is emptied."""
        self.used = []

    def forget_used(self) -> None:
        """The answers used since :meth:`begin` are spent: forget them."""
        self._safely(lambda: self.memory.forget_replies(self.used))
        self.used = []

    def complete_json(self, *, system: str, user: str, schema: dict[str, Any],
                      schema_name: str, max_tokens: int | None = None) -> ChatReplyLike:
        """The recorded answer to this request (zero tokens), or the model's, recorded
        before it is returned.

        Raises:
            UpstreamError, ExtractionError: from the model (nothing is recorded).
        """
        key = request_key(self.model, system, user, schema, schema_name, max_tokens)
        self.used.append(key)
        got = self._safely(lambda: self.memory.recorded_reply(key))
        if isinstance(got, dict):
            log.info("llm.reply_replayed", key=key[:12])
            return RecordedReply(str(got["content"]), 0, 0, str(got["model"]),
                                 got.get("finish_reason"))
        reply = self.chat.complete_json(system=system, user=user, schema=schema,
                                        schema_name=schema_name, max_tokens=max_tokens)
        now = self.clock()
        # redacted like everything the state file holds: a model may name a secret
        record = {"content": redact(reply.content).text, "model": reply.model,
                  "finish_reason": reply.finish_reason}
        self._safely(lambda: self.memory.record_reply(key, record, iso_utc(now)))
        self._safely(lambda: self.memory.forget_replies(
            before=iso_utc(now - timedelta(days=KEEP_DAYS))))
        return reply

    @staticmethod
    def _safely(action: Callable[[], Any]) -> Any:
        try:
            return action()
        except MemorydError as exc:
            log.warning("llm.reply_record_failed", error=str(exc))
            return None
