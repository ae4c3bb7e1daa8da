"""Session summaries and project briefs: by rules, or by a chat model.

Two writers with the same methods (the protocol :class:`~opencode_memoryd.capture.notes.
Summarizer`):

* :class:`RulesSummarizer` (no LLM): a session's summary is the state it ended in, as
  computed from its tool parts (files changed, commands still failing); a project's brief
  is made of the facts its manifests state (:mod:`opencode_memoryd.extract.brief`), never
  of prose from its README.
* :class:`LlmSummarizer`: asks the model for a short summary of what a session did (files
  changed, decisions, open problems), from the tail of its (redacted) transcript and the
  rules' state, and for a short brief of a project from its README and manifest files.
  The reply is JSON ``{"summary": "..."}``; a failed call or an unusable reply falls back
  to the rules' text, so a session or a project never goes without one because the
  endpoint is down.

Every input is data for the model, never instructions (the prompts say so; inputs are
redacted by the caller and every text is redacted again before it is stored). The model
obeys what it reads all the same, sometimes, so its reply goes through the gate of
:mod:`opencode_memoryd.extract.generated` sentence by sentence: a summary may say only
what the user's own lines and the recorded state support, a brief only what the
manifests' facts support; a reply none of whose sentences passes falls back to the
rules.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from string import Template
from typing import Any

import structlog

from opencode_memoryd.errors import ExtractionError, UpstreamError
from opencode_memoryd.extract.brief import project_facts, render_brief
from opencode_memoryd.extract.digest import cap
from opencode_memoryd.extract.generated import gate
from opencode_memoryd.extract.llm_extractor import render_transcript
from opencode_memoryd.extract.reply import junk_reason, own_words
from opencode_memoryd.llm.model import ChatModel
from opencode_memoryd.models import TranscriptLine

log = structlog.get_logger(__name__)

#: The schema name sent with ``json_schema`` mode.
SUMMARY_SCHEMA_NAME = "summary"
#: The reply's schema: one string (``""`` when there is nothing to say).
SUMMARY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"summary": {"type": "string"}},
    "required": ["summary"],
    "additionalProperties": False,
}
#: Most characters of a README, and of each manifest, shown to the model.
README_CHARS = 6000
MANIFEST_CHARS = 1500

_FENCE = re.compile(r"^\s*```[a-zA-Z]*\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)
_DELIMITER = re.compile(r"<(/?(?:readme|manifest|transcript|state))", re.IGNORECASE)


def summary_token_cap(max_chars: int) -> int:
    """The output token cap of a summary of at most ``max_chars`` characters: half its
    characters (room for a wordy model; dense text runs near 3-4 characters per token) plus
    32 tokens of JSON. A reply cut off at the cap falls back to the rules."""
    return 32 + max(max_chars // 2, 64)


@dataclass(frozen=True, slots=True)
class Summary:
    """A summary or brief, and what it cost.

    Attributes:
        text: the text (``""``: nothing to say).
        source: ``llm`` when the model wrote it, ``rules`` otherwise (also after a fallback).
        tokens_in, tokens_out: tokens the endpoint counted (0 for rules).
        llm_calls: model calls made (0 or 1).
    """

    text: str
    source: str = "rules"
    tokens_in: int = 0
    tokens_out: int = 0
    llm_calls: int = 0


class RulesSummarizer:
    """Summaries and briefs without an LLM (see the module docstring)."""

    name = "rules"

    def session_summary(self, lines: Sequence[TranscriptLine], state: str, *,
                        max_chars: int) -> Summary:
        """The session's state (``state``, already rendered) cut to ``max_chars``."""
        del lines
        return Summary(cap(state, max_chars))

    def project_brief(self, readme: str, manifests: Mapping[str, str], *,
                      max_chars: int, name: str = "") -> Summary:
        """The facts of ``manifests`` (:func:`~opencode_memoryd.extract.brief.
        render_brief`), cut to ``max_chars``; ``name``: the worktree folder's name, used
        when no manifest names the project. The README is not read."""
        del readme
        return Summary(cap(render_brief(project_facts(manifests, folder=name)), max_chars))


@functools.cache
def _prompt(name: str) -> str:
    return resources.files("opencode_memoryd.extract").joinpath("prompts", name).read_text("utf-8")


def _escape(text: str) -> str:
    return _DELIMITER.sub(r"&lt;\1", text)


def parse_summary(content: str, *, max_chars: int) -> str:
    """The ``summary`` string of a model's JSON reply (a ```json fence tolerated),
    whitespace collapsed.

    Raises:
        ExtractionError: not JSON, not ``{"summary": string}``, longer than twice
            ``max_chars`` (a rambling reply), or junk (a path, a hash, a stack trace).
    """
    text = content.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1).strip()
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ExtractionError(f"the summary is not JSON ({len(content)} chars)") from exc
    value = data.get("summary") if isinstance(data, dict) else None
    if not isinstance(value, str):
        raise ExtractionError('the summary is not an object with a "summary" string')
    out = " ".join(value.split())
    if not out:
        return ""
    if len(out) > 2 * max_chars:
        raise ExtractionError(f"the summary is too long ({len(out)} chars)")
    reason = junk_reason(out)
    if reason:
        raise ExtractionError(f"the summary is junk: {reason}")
    return cap(out, max_chars)


class LlmSummarizer:
    """Summaries and briefs written by a chat model, with the rules as fallback.

    Args:
        chat: the chat endpoint (``ChatClient`` or any :class:`ChatModel`).
    """

    name = "llm"

    def __init__(self, chat: ChatModel) -> None:
        self.chat = chat
        self.rules = RulesSummarizer()

    def _ask(self, what: str, system: str, user: str, max_chars: int,
             fallback: Summary, grounds: str) -> Summary:
        try:
            reply = self.chat.complete_json(system=system, user=user, schema=SUMMARY_SCHEMA,
                                            schema_name=SUMMARY_SCHEMA_NAME,
                                            max_tokens=summary_token_cap(max_chars))
        except (UpstreamError, ExtractionError) as exc:
            log.warning(f"{what}_fallback", reason=str(exc)[:200])
            return Summary(fallback.text, "rules", llm_calls=1)
        try:
            text = parse_summary(reply.content, max_chars=max_chars)
        except ExtractionError as exc:
            log.warning(f"{what}_fallback", reason=str(exc)[:200],
                        finish_reason=reply.finish_reason)
            return Summary(fallback.text, "rules", reply.tokens_in, reply.tokens_out, 1)
        kept, refused = gate(text, grounds)
        if refused:
            log.info(f"{what}_sentences_refused", reasons=refused)
        if text and not kept:
            return Summary(fallback.text, "rules", reply.tokens_in, reply.tokens_out, 1)
        return Summary(cap(kept, max_chars), "llm", reply.tokens_in, reply.tokens_out, 1)

    def session_summary(self, lines: Sequence[TranscriptLine], state: str, *,
                        max_chars: int) -> Summary:
        """A short summary of what the session did, from ``lines`` (the tail of its
        redacted transcript) and ``state`` (the rules' state, may be ``""``).

        Never raises for the endpoint: a failure gives the rules' summary.
        """
        fallback = self.rules.session_summary(lines, state, max_chars=max_chars)
        if not lines and not state:
            return fallback
        user = Template(_prompt("summary_user.md")).substitute(
            max_chars=max_chars, state=_escape(state or "(nothing recorded)"),
            transcript=render_transcript(lines))
        said = "\n".join(own_words(x.text) for x in lines if x.role == "user")
        return self._ask("session_summary", _prompt("summary_system.md").strip(),
                         user.strip(), max_chars, fallback, f"{said}\n{state}")

    def project_brief(self, readme: str, manifests: Mapping[str, str], *,
                      max_chars: int, name: str = "") -> Summary:
        """A short brief of the project from its README and manifest files (already
        redacted), kept only as far as the manifests' facts support it. Never raises for
        the endpoint: a failure gives the rules' brief."""
        fallback = self.rules.project_brief(readme, manifests, max_chars=max_chars,
                                            name=name)
        facts = project_facts(manifests, folder=name)
        grounds = " ".join([render_brief(facts), facts.name, *facts.dependencies])
        blocks = "\n".join(f'<manifest name="{name}">\n{_escape(text[:MANIFEST_CHARS])}\n'
                           "</manifest>" for name, text in sorted(manifests.items()))
        user = Template(_prompt("brief_user.md")).substitute(
            max_chars=max_chars, readme=_escape(readme[:README_CHARS]),
            manifests=blocks or "(none)")
        return self._ask("project_brief", _prompt("brief_system.md").strip(), user.strip(),
                         max_chars, fallback, grounds)
