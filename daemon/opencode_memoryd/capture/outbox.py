"""The outbox item of a chunk: its id, and the recorded form of its candidates."""

from __future__ import annotations

import hashlib
from typing import Any

from opencode_memoryd.conversation.transcript import Chunk
from opencode_memoryd.extract.sections import section_for, valid_section
from opencode_memoryd.extract.supersede import replaced_terms
from opencode_memoryd.models import MemoryCandidate
from opencode_memoryd.redaction.engine import scrub
from opencode_memoryd.source.storages.registry import named

#: Bumped when the transcript or prompt format changes, so old cached items are not reused.
ITEM_FORMAT = "1"


def item_id_of(source_id: str, session_id: str, chunk: Chunk, storage: str) -> str:
    """The outbox id of a chunk, from what its storage keeps stable across reads (see
    :meth:`~opencode_memoryd.source.storages.base.Storage.chunk_key`)."""
    stable = named(storage).chunk_key(source_id, session_id, chunk.first, chunk.last)
    key = f"{ITEM_FORMAT}|{stable}"
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def recorded_candidate(c: MemoryCandidate) -> dict[str, Any]:
    """The recorded form of a candidate: redacted, with the extractor's section or the
    rules' choice (so both extractors' memories get one), and what it replaces:
    ``replaces`` (terms) and ``cue`` (the user's words saying so), the model's grounded
    ones or, for the rules (whose memory is the user's words), those its text names.
    ``only_if_supersedes`` is kept: the writer stores such a candidate only when it
    retires a memory."""
    content = scrub(c.content).text
    out: dict[str, Any] = {
        "content": content, "type": c.type, "scope": c.scope,
        "message_ids": list(c.message_ids), "source": c.source,
        "section": valid_section(c.section) or section_for(c.type, c.scope, content)}
    replaces = list(c.replaces) if c.source != "rules" else list(replaced_terms(content))
    if replaces:
        out["replaces"] = replaces
        out["cue"] = scrub(c.cue).text if c.cue else content
    elif c.cue:  # a value change the user's words make ("the staging URL is now …")
        out["cue"] = scrub(c.cue).text
    if c.only_if_supersedes:
        out["only_if_supersedes"] = True
    return out
