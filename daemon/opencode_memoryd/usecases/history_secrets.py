"""The secrets of one session, learned by reading it whole, for history answers.

History hands session text to whoever asks (the CLI, the agent through MCP), so a value
the session revealed as a secret once (``export DEPLOY_TOKEN=…`` in one turn) must not be
handed out where the session shows it again bare (a tool output, the assistant's reply, a
later turn). :func:`session_secrets` reads every message of the session, renders it as
history does (tool outputs up to :data:`SCAN_TOOL_OUTPUT_CHARS`), redacts it and learns
each replaced value (:class:`~opencode_memoryd.redaction.known.SessionSecrets`, under a key
of its own: nothing is written anywhere). Cost: one redaction pass over the session's
rendered text (about 0.6 s for 1,000 messages with 3 KB tool outputs), bounded by
:data:`SCAN_MAX_MESSAGES` messages; the process keeps what it learned of the last
:data:`CACHED_SESSIONS` sessions in memory, so the next page of a session (the daemon
answering an agent that pages through it) reads only the messages added since.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING

from opencode_memoryd.redaction.engine import scrub_found
from opencode_memoryd.redaction.known import Known, SessionSecrets

if TYPE_CHECKING:
    from opencode_memoryd.source.reader import OpenCodeDB

__all__ = ["CACHED_SESSIONS", "SCAN_MAX_MESSAGES", "SCAN_TOOL_OUTPUT_CHARS", "session_secrets"]

#: Shell output read per tool call when learning, in characters (more than history shows,
#: so that a key word just past what is shown still teaches the value).
SCAN_TOOL_OUTPUT_CHARS = 2000
#: Most messages read when learning (the newest beyond are not).
SCAN_MAX_MESSAGES = 5000
_PAGE = 200


#: Sessions whose learned secrets the process keeps (least recently used dropped first).
CACHED_SESSIONS = 32

#: ``(database path, session id) -> (messages read, digest key, what they taught)``
_CACHE: OrderedDict[tuple[str, str], tuple[int, bytes, tuple[Known, ...]]] = OrderedDict()
_LOCK = threading.Lock()


def session_secrets(source: OpenCodeDB, session_id: str, title: str = "") -> SessionSecrets:
    """Every secret value the session's text reveals (its title, then its messages in
    order, up to :data:`SCAN_MAX_MESSAGES`), learned under a fresh random key; messages
    already read for an earlier answer of this process are not read again.

    Raises:
        SourceError: the database cannot be read.
    """
    key = (str(source.path), session_id)
    with _LOCK:
        cached = _CACHE.get(key)
    storage = source.storage_for(session_id)
    total = min(storage.message_count(source, session_id), SCAN_MAX_MESSAGES)
    if cached is None or cached[0] > total:  # new, or messages were taken away: read all
        cached = (0, os.urandom(32), ())
    offset, digest_key, known = cached
    secrets = SessionSecrets(digest_key, known)  # this answer's own: not shared by threads
    if title:
        secrets.learn(scrub_found(title)[1])
    while offset < total:
        page = storage.message_page(source, session_id, offset=offset,
                                    limit=min(_PAGE, total - offset))
        for m in page:
            text = storage.render(m, tool_output_chars=SCAN_TOOL_OUTPUT_CHARS).text
            if text:
                secrets.learn(scrub_found(text)[1])
        if not page:
            break
        offset += len(page)
    with _LOCK:
        _CACHE[key] = (offset, digest_key, (*known, *secrets.new()))
        _CACHE.move_to_end(key)
        while len(_CACHE) > CACHED_SESSIONS:
            _CACHE.popitem(last=False)
    return secrets
