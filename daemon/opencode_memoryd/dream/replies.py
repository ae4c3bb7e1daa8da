"""The dream's planner with its answers recorded: a plan is never paid for twice.

A dream asks for one plan per candidate group and applies them all at the end. A dream
killed (or stopped) while planning used to lose the plans it had; the next dream asked for
them again. :class:`RecordedPlanner` records each answer in the state file
(:class:`~opencode_memoryd.state.replies.ReplyTable`) as it arrives, under a hash of the
exact request (model, prompts, schema, token cap): the same request, while the group and
its memories are unchanged, gets the recorded answer without a call. The answers a dream
used are forgotten once it applied them; any answer is forgotten after :data:`KEEP_DAYS`
days.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import structlog

from opencode_memoryd.dream.planning import Planner
from opencode_memoryd.extract.llm_extractor import ChatReplyLike
from opencode_memoryd.models import iso_utc
from opencode_memoryd.state.db import StateDB

log = structlog.get_logger(__name__)

#: How long an answer no dream applied is kept (days).
KEEP_DAYS = 7


@dataclass(frozen=True)
class RecordedReply:
    """A recorded answer (see :class:`~opencode_memoryd.extract.llm_extractor.ChatReplyLike`
    for the fields)."""

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


class RecordedPlanner:
    """A :class:`~opencode_memoryd.dream.planning.Planner` whose answers are recorded.

    Args:
        planner: the chat model (its ``model`` attribute, when it has one, is part of the
            key).
        state: the state file.
        clock: the current aware UTC time.

    Attributes:
        used: the keys of the requests made since :meth:`begin` (asked or replayed).
    """

    def __init__(self, planner: Planner, state: StateDB,
                 clock: Callable[[], datetime]) -> None:
        self.planner = planner
        self.state = state
        self.clock = clock
        self.used: list[str] = []

    def begin(self) -> None:
        """Start a dream: forget answers older than :data:`KEEP_DAYS` days."""
        self.used = []
        self.state.forget_replies(before=iso_utc(self.clock() - timedelta(days=KEEP_DAYS)))

    def applied(self) -> None:
        """The dream applied its plans: forget the answers it used."""
        self.state.forget_replies(self.used)
        self.used = []

    def complete_json(self, *, system: str, user: str, schema: dict[str, Any],
                      schema_name: str, max_tokens: int | None = None) -> ChatReplyLike:
        """The recorded answer to this request, or the planner's, recorded before it is
        returned.

        Raises:
            UpstreamError, ExtractionError: from the planner (nothing is recorded).
            StateError: the answer cannot be recorded.
        """
        key = request_key(str(getattr(self.planner, "model", "")), system, user, schema,
                          schema_name, max_tokens)
        self.used.append(key)
        got = self.state.recorded_reply(key)
        if got is not None:
            log.info("dream_plan_replayed", key=key[:12])
            return RecordedReply(str(got["content"]), int(got["tokens_in"]),
                                 int(got["tokens_out"]), str(got["model"]),
                                 got.get("finish_reason"))
        reply = self.planner.complete_json(system=system, user=user, schema=schema,
                                           schema_name=schema_name, max_tokens=max_tokens)
        self.state.record_reply(key, {
            "content": reply.content, "tokens_in": reply.tokens_in,
            "tokens_out": reply.tokens_out, "model": reply.model,
            "finish_reason": reply.finish_reason}, iso_utc(self.clock()))
        return reply
