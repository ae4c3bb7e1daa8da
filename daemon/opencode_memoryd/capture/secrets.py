"""A session's transcript redacted with what the session itself taught.

A secret recognised once in a session (a key word before it, in any role) is redacted
wherever the session shows it again bare: in a tool output, the assistant's reply, an
earlier or a later turn (:class:`~opencode_memoryd.redaction.known.SessionSecrets`). What a
run learns is kept in the state file as keyed digests
(:class:`~opencode_memoryd.state.secrets.SecretTable`), so a later run, which reads only the
turns after the mark, still knows it; every turn a run reads is scanned before the first of
its chunks is sent (:meth:`SessionRedactor.prepare`), so a value taught in the last turn
is hidden in the first; so are a fork's copies of its source session's messages, which are
never sent themselves (:meth:`SessionRedactor.learn_copies`).

While a session is processed (:func:`~opencode_memoryd.redaction.engine.redacting_also`),
every text redacted in that thread is cleared of those values too: the memories, the
session's summary, the model's recorded answers and the log, so a model that proposes
such a value bare never writes it anywhere, at any level.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from opencode_memoryd.capture.report import SessionReport
from opencode_memoryd.conversation.rows import MessageRow
from opencode_memoryd.conversation.transcript import transcript_lines
from opencode_memoryd.conversation.turns import group_turns
from opencode_memoryd.models import TranscriptLine
from opencode_memoryd.redaction.engine import Redacted, merge_counts, scrub_found
from opencode_memoryd.redaction.known import SessionSecrets
from opencode_memoryd.state.db import StateDB

__all__ = ["SessionRedactor"]


class SessionRedactor:
    """Redacts the transcript lines of one session of one source.

    Args:
        state: the state file (digest key, digests of earlier runs; new ones are written
            to it durably before the lines that taught them are used).
        source_id: the OpenCode database's identity.
        session_id: the session.
        now: the current time as ISO 8601 UTC text (for the rows written).
    """

    def __init__(self, state: StateDB, source_id: str, session_id: str,
                 now: Callable[[], str]) -> None:
        self.state = state
        self.source_id = source_id
        self.session_id = session_id
        self._now = now
        self.secrets = SessionSecrets(state.secrets.secret_key(),
                                      state.secrets.session_secrets(source_id, session_id))
        self._scrubbed: dict[tuple[str, str, str], Redacted] = {}

    def prepare(self, lines: Iterable[TranscriptLine], texts: Iterable[str] = ()) -> None:
        """Scrub ``lines`` (every line a read holds, before any is sent) and other
        ``texts`` of the read (its compaction summaries), learn the secrets they hold and
        keep the new ones in the state file. The lines of the run's previous read are
        forgotten (only their secrets are kept)."""
        self._scrubbed = {}
        for line in lines:
            self._scrub(line)
        for text in texts:
            self.secrets.scrub(text)
        self._keep()

    def learn_copies(self, messages: Sequence[MessageRow], kept: Sequence[MessageRow],
                     tool_output_chars: int) -> None:
        """Learn the secrets of the messages a fork copied from its source session (those
        of ``messages`` not ``kept``): they are never sent, but the fork's own turns may
        show their values again."""
        if len(kept) == len(messages):
            return
        ids = {m.id for m in kept}
        copies = [m for m in messages if m.id not in ids]
        for line in transcript_lines(group_turns(copies), tool_output_chars=tool_output_chars):
            self.secrets.learn(scrub_found(line.text)[1])
        self._keep()

    def _scrub(self, line: TranscriptLine) -> Redacted:
        key = (line.message_id, line.role, line.text)
        got = self._scrubbed.get(key)
        if got is None:
            got = self._scrubbed[key] = self.secrets.scrub(line.text)
        return got

    def _keep(self) -> None:
        new = self.secrets.new()
        if new:
            self.state.secrets.add_session_secrets(self.source_id, self.session_id, new,
                                                   self._now())

    def redacted(self, lines: Sequence[TranscriptLine],
                 report: SessionReport) -> list[TranscriptLine]:
        """``lines`` with every secret redacted: by the rules, and each value the session
        taught wherever it stands bare; the redactions are counted in ``report``."""
        scrubbed = [self._scrub(line) for line in lines]
        self._keep()
        out: list[TranscriptLine] = []
        for line, first in zip(lines, scrubbed, strict=True):
            again = self.secrets.redact_known(first.text)  # a value taught by a later line
            report.redactions.update(merge_counts(first.counts, again.counts))
            out.append(TranscriptLine(line.message_id, line.role, again.text))
        return out
