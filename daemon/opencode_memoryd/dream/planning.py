"""Plans: what a dream proposes to do with one candidate group.

In LLM mode a chat model answers, per group, a plan of ``merge`` (one new memory holding
the facts of several), ``supersede`` (a newer memory replaces older ones on the same
subject) and ``keep`` operations (:data:`PLAN_SCHEMA`), from the prompts in ``prompts/``.
In rules mode (no LLM) :func:`rules_plan` collapses duplicates. Either plan is only a
proposal: :mod:`opencode_memoryd.dream.checks` decides whether it is applied.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from string import Template
from typing import Any, Protocol

import structlog

from opencode_memoryd.errors import ExtractionError, ReplyCutOff
from opencode_memoryd.extract.facts import restates
from opencode_memoryd.extract.reply import load_json_list
from opencode_memoryd.extract.supersede import corrects
from opencode_memoryd.llm.model import ChatReplyLike
from opencode_memoryd.models import Memory, iso_utc
from opencode_memoryd.redaction.engine import scrub

log = structlog.get_logger(__name__)

#: The schema name sent with ``json_schema`` mode.
SCHEMA_NAME = "dream_plan"

#: Strict-mode compatible JSON schema of a plan.
PLAN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "operations": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "op": {"type": "string", "enum": ["merge", "supersede", "keep"]},
                    "memory_ids": {"type": "array", "items": {"type": "string"}},
                    "new_content": {"type": ["string", "null"]},
                    "superseded_ids": {"type": "array", "items": {"type": "string"}},
                    "reason": {"type": "string"},
                },
                "required": ["op", "memory_ids", "new_content", "superseded_ids", "reason"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["operations"],
    "additionalProperties": False,
}

_REASON_CHARS = 200
_DELIMITER = re.compile(r"<(/?memories)", re.IGNORECASE)


class Planner(Protocol):
    """A chat endpoint that answers JSON (:class:`~opencode_memoryd.llm.chat.ChatClient`)."""

    def complete_json(
        self, *, system: str, user: str, schema: dict[str, Any], schema_name: str,
        max_tokens: int | None = None,
    ) -> ChatReplyLike: ...


def plan_token_cap(group_size: int, max_chars: int) -> int:
    """The output token cap that fits the plan of a group of ``group_size`` memories: per
    member a merged text of ``max_chars`` characters (a third as many tokens) plus 60
    tokens of operation JSON (ids, reason), plus 64 for the object. A group of 8 with the
    default 300 characters: 1,344 tokens."""
    return 64 + group_size * (math.ceil(max_chars / 3) + 60)


@dataclass
class Operation:
    """One operation of a plan.

    Attributes:
        op: ``merge``, ``supersede`` or ``keep``.
        memory_ids: the memories involved (for ``supersede``: the superseding one, and
            possibly the superseded ones too).
        new_content: the merged text (``merge`` in LLM mode), else ``None``.
        superseded_ids: the memories a ``supersede`` retires.
        reason: the planner's reason, whitespace folded, at most 200 characters.
        survivor: rules mode: the duplicate that survives as it is (``merge`` only).
    """

    op: str
    memory_ids: list[str]
    new_content: str | None
    superseded_ids: list[str]
    reason: str
    survivor: str | None = None


@functools.cache
def _prompt_file(name: str) -> str:
    return resources.files("opencode_memoryd.dream").joinpath("prompts", name).read_text("utf-8")


def render_memories(memories: Sequence[Memory]) -> str:
    """The memory block of the prompt: ``[id] (type, created_at) content`` per line.

    Each text is scrubbed (:func:`~opencode_memoryd.redaction.engine.scrub`: invisible
    Unicode stripped, secrets redacted, for memories stored before either rule existed),
    line breaks are folded to spaces and ``<memories>`` tags are escaped
    (``&lt;memories>``), so a text can neither pose as another memory nor close the block.
    """
    out = []
    for m in memories:
        text = _DELIMITER.sub(r"&lt;\1", " ".join(scrub(m.content).text.split()))
        out.append(f"[{m.id}] ({m.type}, {iso_utc(m.created_at)}) {text}")
    return "\n".join(out)


def build_prompt(group: Sequence[Memory], *, project_root: str | None,
                 max_chars: int) -> tuple[str, str]:
    """Return ``(system, user)`` prompts for one group (``prompts/dream_system.md`` and
    ``prompts/dream_user.md``)."""
    system = _prompt_file("dream_system.md").strip()
    first = group[0]
    user = Template(_prompt_file("dream_user.md")).substitute(
        scope=first.scope,
        type=first.type,
        project_root=project_root or first.project_root or "none",
        max_chars=max_chars,
        memories=render_memories(group),
    )
    return system, user.strip()


def _id_list(value: object) -> list[str] | None:
    """``value`` as a list of stripped ids, or ``None`` when it is not a list of strings."""
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
        return None
    return [x.strip() for x in value]


def parse_plan(content: str) -> list[Operation]:
    """Parse the model's answer (JSON, optionally in a Markdown fence) into operations.

    Raises:
        ExtractionError: not JSON, or not of the shape of :data:`PLAN_SCHEMA`.
    """
    items = load_json_list(content, "operations", "the plan")
    ops = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise ExtractionError(f"operation {i} is not an object")
        op = item.get("op")
        if op not in ("merge", "supersede", "keep"):
            raise ExtractionError(f"operation {i}: unknown op {str(op)[:20]!r}")
        ids = _id_list(item.get("memory_ids"))
        sup = _id_list(item.get("superseded_ids") or [])
        new = item.get("new_content")
        reason = item.get("reason") or ""
        if ids is None:
            raise ExtractionError(f"operation {i}: memory_ids is not a list of strings")
        if sup is None:
            raise ExtractionError(f"operation {i}: superseded_ids is not a list of strings")
        if new is not None and not isinstance(new, str):
            raise ExtractionError(f"operation {i}: new_content is not a string or null")
        ops.append(Operation(op=op, memory_ids=ids,
                             new_content=new if new and new.strip() else None,
                             superseded_ids=sup,
                             reason=" ".join(scrub(str(reason)).text.split())[:_REASON_CHARS]))
    return ops


def request_plan(planner: Planner, group: Sequence[Memory], *, project_root: str | None,
                 max_chars: int, max_tokens: int | None = None) -> ChatReplyLike:
    """Ask ``planner`` for the plan of one group (:func:`build_prompt`, :data:`PLAN_SCHEMA`),
    the answer capped at ``max_tokens`` (``None``: no cap sent).

    Raises:
        UpstreamError: the chat endpoint failed.
    """
    system, user = build_prompt(group, project_root=project_root, max_chars=max_chars)
    return planner.complete_json(system=system, user=user, schema=PLAN_SCHEMA,
                                 schema_name=SCHEMA_NAME, max_tokens=max_tokens)


def plan_of(reply: ChatReplyLike) -> list[Operation]:
    """The operations of a planner's reply (:func:`parse_plan`).

    Raises:
        ReplyCutOff: the reply stopped at the token cap (``finish_reason`` ``length``)
            before it was a complete plan.
        ExtractionError: the reply is not a plan.
    """
    try:
        return parse_plan(reply.content)
    except ExtractionError as exc:
        if reply.finish_reason == "length":
            raise ReplyCutOff(f"{exc}; the answer was cut off (finish_reason=length)",
                              tokens_in=reply.tokens_in, tokens_out=reply.tokens_out
                              ) from exc
        raise


def ask_plan(planner: Planner, group: Sequence[Memory], *, project_root: str | None,
             max_chars: int, max_tokens: int,
             on_reply: Callable[[ChatReplyLike], None]) -> list[Operation]:
    """The plan of one group, asked with the cap ``max_tokens`` (0:
    :func:`plan_token_cap`); a plan cut off at the cap is asked once more with twice the
    cap. ``on_reply`` sees every reply (to count its tokens).

    Raises:
        ReplyCutOff: the plan was cut off at both caps (the caller may plan a smaller
            group).
        ExtractionError: a reply is not a plan.
        UpstreamError: the chat endpoint failed.
    """
    cap = max_tokens or plan_token_cap(len(group), max_chars)
    for attempt in (cap, 2 * cap):
        reply = request_plan(planner, group, project_root=project_root, max_chars=max_chars,
                             max_tokens=attempt)
        on_reply(reply)
        try:
            return plan_of(reply)
        except ReplyCutOff:
            log.info("dream_plan_cut_off", members=len(group), max_tokens=attempt)
            if attempt != cap:
                raise
    raise AssertionError("unreachable")


def corrections_plan(group: Sequence[Memory]) -> tuple[list[Operation], list[Memory]]:
    """The ``supersede`` operations of a group's corrections, and the members no
    operation holds: each member that says it replaces a term (newest first) supersedes
    the older members still left that state that term as their choice
    (:func:`~opencode_memoryd.extract.supersede.corrects`)."""
    ops: list[Operation] = []
    left = sorted(group, key=lambda m: (m.created_at, m.id))
    for c in sorted(group, key=lambda m: (m.created_at, m.id), reverse=True):
        if c not in left:
            continue
        olds = [m.id for m in left if m.id != c.id and m.created_at < c.created_at
                and corrects(c.content, m.content)]
        if olds:
            ops.append(Operation(op="supersede", memory_ids=[c.id, *olds], new_content=None,
                                 superseded_ids=olds, reason="corrected"))
            left = [m for m in left if m.id not in olds and m.id != c.id]
    return ops, left


def rules_plan(group: Sequence[Memory]) -> list[Operation]:
    """The rules-mode plan of a group: first its corrections (:func:`corrections_plan`),
    then collapse the members one member restates (every content word and identifier,
    :func:`~opencode_memoryd.extract.facts.restates`) into it: the member that restates
    the most others, the oldest on a tie. The rest are kept; a group where no member
    restates another is kept whole."""
    ops, group = corrections_plan(group)
    if len(group) < 2:
        return ops + ([Operation(op="keep", memory_ids=[group[0].id], new_content=None,
                                 superseded_ids=[], reason="not corrected")] if group else [])
    best: tuple[Memory, list[str]] | None = None
    for cand in sorted(group, key=lambda m: (m.created_at, m.id)):
        covered = [m.id for m in group
                   if m.id != cand.id and restates(m.content, cand.content)]
        if best is None or len(covered) > len(best[1]):
            best = (cand, covered)
    assert best is not None
    survivor, covered = best
    rest = [m.id for m in group if m.id != survivor.id and m.id not in covered]
    if covered:
        ops.append(Operation(op="merge", memory_ids=[survivor.id, *covered], new_content=None,
                             superseded_ids=[], reason="duplicate", survivor=survivor.id))
    else:
        rest.insert(0, survivor.id)
    if rest:
        ops.append(Operation(op="keep", memory_ids=rest, new_content=None, superseded_ids=[],
                             reason="says more than the others"))
    return ops
