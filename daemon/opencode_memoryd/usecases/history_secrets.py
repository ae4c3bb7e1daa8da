"""The secrets of one session, learned by reading it whole, for history answers.

History hands session text to whoever asks (the CLI, the agent through MCP), so a value
the session revealed as a secret once (``export DEPLOY_TOKEN=…`` in one turn) must not be
handed out where the session shows it again bare (a tool output, the assistant's reply, a
later turn). :func:`session_secrets` reads every message of the session, renders it as
history does (tool outputs up to :data:`SCAN_TOOL_OUTPUT_CHARS`), redacts it and learns
each replaced value (:class:`~opencode_memoryd.redaction.known.SessionSecrets`, under a key
of its own: nothing is kept). Cost: one redaction pass over the session's rendered text
per answer, bounded by :data:`SCAN_MAX_MESSAGES` messages.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from opencode_memoryd.redaction.engine import scrub_found
from opencode_memoryd.redaction.known import SessionSecrets
from opencode_memoryd.source import history as queries

if TYPE_CHECKING:
    from opencode_memoryd.source.reader import OpenCodeDB

__all__ = ["SCAN_MAX_MESSAGES", "SCAN_TOOL_OUTPUT_CHARS", "session_secrets"]

#: Shell output read per tool call when learning, in characters (more than history shows,
#: so that a key word just past what is shown still teaches the value).
SCAN_TOOL_OUTPUT_CHARS = 2000
#: Most messages read when learning (the newest beyond are not).
SCAN_MAX_MESSAGES = 5000
_PAGE = 200


def session_secrets(source: OpenCodeDB, session_id: str, title: str = "") -> SessionSecrets:
    """Every secret value the session's text reveals (its title, then its messages in
    order, up to :data:`SCAN_MAX_MESSAGES`), learned under a fresh random key.

    Raises:
        SourceError: the database cannot be read.
    """
    secrets = SessionSecrets(os.urandom(32))
    if title:
        secrets.learn(scrub_found(title)[1])
    offset = 0
    while offset < SCAN_MAX_MESSAGES:
        page = queries.message_page(source, session_id, offset=offset,
                                    limit=min(_PAGE, SCAN_MAX_MESSAGES - offset))
        for m in page:
            text = queries.render(m, tool_output_chars=SCAN_TOOL_OUTPUT_CHARS).text
            if text:
                secrets.learn(scrub_found(text)[1])
        if len(page) < _PAGE:
            break
        offset += len(page)
    return secrets
