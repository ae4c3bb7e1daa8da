"""The memories opencode-memoryd writes about sessions and projects (never user statements).

Three kinds, each one point with a deterministic id (:func:`~opencode_memoryd.models.
note_id`) rewritten in place when its source changes, redacted and size-capped:

* **compaction summaries** (type ``session-summary``): each summary OpenCode writes when
  it compacts a top-level session becomes one memory of the project, condensed to one
  paragraph (:func:`~opencode_memoryd.extract.digest.condense_summary`); provenance: the
  session and the summary message. OpenCode's model writes it from tool output too, so
  each item passes the gate of generated text (:mod:`opencode_memoryd.extract.generated`)
  against the user's words and the files and commands of the session before it (read
  again from its start); a summary with no item left is not stored. Written as the turn
  holding it is read; a memory that already exists for that message (even one the user
  forgot) is left as it is.
* **session notes** (type ``session-summary``, one per session): when a top-level session
  is read to its end, has been idle for ``idle_ms`` and did not end with a compaction, the
  state it ended in (rules mode: files changed, commands still failing,
  :mod:`opencode_memoryd.conversation.activity`) or a short summary of what it did (LLM mode).
  ``basis`` is the last message it covers: written again only when the session went on.
  Not idle long enough yet: the report says when it will be (``summary_due_ms``).
* **project briefs** (type ``project-brief``, one per project): on first sight of a git
  project whose worktree exists on this machine, the facts its manifests state (rules:
  :mod:`opencode_memoryd.extract.brief`) or a short summary of its README and manifests
  held to those facts (LLM), read under the rules of
  :mod:`opencode_memoryd.source.worktree`; ``basis`` is a hash of the README's and the
  manifests' content hashes, so the brief is made again only when one of them changes.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Literal, NamedTuple, Protocol

import structlog

from opencode_memoryd.capture.report import NoteSettings, SessionReport
from opencode_memoryd.conversation.activity import (
    SessionActivity,
    compaction_summaries,
    render_state,
    session_activity,
    shown_command,
)
from opencode_memoryd.conversation.rows import MessageRow, SessionRow
from opencode_memoryd.conversation.transcript import estimate_tokens, human_text, transcript_lines
from opencode_memoryd.conversation.turns import drop_fork_copies, group_turns
from opencode_memoryd.extract.digest import cap, condense_summary
from opencode_memoryd.extract.generated import gate
from opencode_memoryd.extract.reply import own_words
from opencode_memoryd.extract.summarize import Summary
from opencode_memoryd.models import (
    Mark,
    Memory,
    TranscriptLine,
    content_hash,
    note_id,
    utc_from_ms,
)
from opencode_memoryd.redaction.engine import scrub
from opencode_memoryd.source.reader import MESSAGE_BATCH, OpenCodeDB
from opencode_memoryd.source.storages.registry import named
from opencode_memoryd.source.worktree import find_manifests, find_readme, shareable
from opencode_memoryd.state.batch import StateBatch
from opencode_memoryd.state.db import StateDB
from opencode_memoryd.store.api import MemoryStore

log = structlog.get_logger(__name__)

#: The ``retired_reason`` (and text) of the tombstone left for a session end or a
#: project's files the model had nothing to tell of (or whose every sentence the gate
#: refused): not asked again until the session goes on or the files change.
NOTHING_TO_TELL = "nothing to tell"


class Seen(NamedTuple):
    """A session read whole by its extraction just now: its newest row (``end``) and every
    message up to it, in order (fork copies included), so its note need not read it
    again."""

    end: Mark
    messages: list[MessageRow]


class Summarizer(Protocol):
    """Writes session summaries and project briefs (rules or LLM;
    :mod:`opencode_memoryd.extract.summarize`)."""

    name: str

    def session_summary(self, lines: Sequence[TranscriptLine], state: str, *,
                        max_chars: int) -> Summary:
        """A summary of a session from its transcript tail and its rendered state."""
        ...

    def project_brief(self, readme: str, manifests: Mapping[str, str], *,
                      max_chars: int, name: str = "") -> Summary:
        """A project's brief from its README and manifest files."""
        ...


def _tail(lines: list[TranscriptLine], max_tokens: int) -> list[TranscriptLine]:
    """The last lines of ``lines`` that fit ``max_tokens`` (estimated)."""
    out: list[TranscriptLine] = []
    used = 0
    for line in reversed(lines):
        cost = estimate_tokens(line.render()) + 1
        if used + cost > max_tokens:
            break
        out.append(line)
        used += cost
    return out[::-1]


def _grounds(messages: Sequence[MessageRow], until: str) -> str:
    """What a compaction summary may draw on: the user's own words
    (:func:`~opencode_memoryd.extract.reply.own_words`) in the user messages before the
    message ``until`` among ``messages``, and the files and (shown) commands of their tool
    calls."""
    before: list[MessageRow] = []
    for m in messages:
        if m.id == until:
            break
        before.append(m)
    act = session_activity(before)
    said = [own_words(human_text(m)) for m in before if m.role == "user" and not m.corrupt]
    return "\n".join([*said, *act.files, *(shown_command(f.command) for f in act.failing)])


class SessionNotes:
    """Writes the three kinds of note for one source database (see the module docstring).

    Args:
        source: the open OpenCode database.
        state: our state file, or the batch of writes in progress (for the session's
            mark as it will be).
        store: the memory store.
        summarizer: rules or LLM.
        settings: what to write.
        tool_output_chars: tool output kept per transcript line of an LLM summary.
    """

    def __init__(self, source: OpenCodeDB, state: StateDB | StateBatch, store: MemoryStore,
                 summarizer: Summarizer, settings: NoteSettings, *,
                 tool_output_chars: int = 160) -> None:
        self.source = source
        self.state = state
        self.store = store
        self.summarizer = summarizer
        self.settings = settings
        self.tool_output_chars = tool_output_chars
        self._briefs_checked: set[str] = set()

    def _count(self, report: SessionReport, s: Summary) -> None:
        report.llm_calls += s.llm_calls
        report.tokens_in += s.tokens_in
        report.tokens_out += s.tokens_out

    # -- compaction summaries ------------------------------------------------------------

    def compactions(self, session: SessionRow, messages: Sequence[MessageRow],
                    storage: str) -> int:
        """Store each compaction summary among ``messages`` of a top-level session (read
        from ``storage``); return how many were new."""
        if not self.settings.session_summaries or session.is_subagent:
            return 0
        added = 0
        whole: list[MessageRow] | None = None
        for m, text in compaction_summaries(messages):
            pid = note_id(session.project_key, "session-summary", f"compaction:{m.id}")
            if self.store.get([pid]):
                continue  # stored before (a re-read), or forgotten by the user: keep it so
            if whole is None:  # the turns it restates were read by earlier runs
                whole = self._read_to_end(session, storage)
            grounds = scrub(_grounds(whole, m.id)).text

            def keep(item: str, grounds: str = grounds) -> str:
                return gate(item, grounds)[0]

            content = condense_summary(scrub(text).text, keep=keep,
                                       max_chars=self.settings.summary_max_chars)
            if not content:
                continue
            self.store.upsert([self._memory(pid, session, content, [m.id], "rules", m.id,
                                            created_ms=m.time_created,
                                            updated_ms=m.time_updated)])
            added += 1
            log.info("compaction_summary_stored", session_id=session.id, message_id=m.id,
                     chars=len(content))
        return added

    def _memory(self, pid: str, session: SessionRow, content: str, message_ids: list[str],
                source: str, basis: str, *, created_ms: int, updated_ms: int) -> Memory:
        return Memory(
            id=pid, content=content, type="session-summary", scope="project",
            project_id=session.project_key, project_root=session.project_root,
            session_id=session.id, message_ids=message_ids,
            source="llm" if source == "llm" else "rules",
            created_at=utc_from_ms(created_ms), updated_at=utc_from_ms(updated_ms),
            session_ids=[session.id], content_hash=content_hash(content),
            section="progress", basis=basis)

    # -- the end of a session ------------------------------------------------------------

    def after_session(self, session: SessionRow, report: SessionReport, *,
                      now: datetime, seen: Seen | None = None,
                      end: Mark | Literal["unknown"] | None = "unknown") -> None:
        """The project brief, then the session's note (see the module docstring);
        ``seen``: the session as its extraction just read it whole, if it did; ``end``:
        its newest row as the extraction looked it up (``None``: none; ``"unknown"``:
        looked up here)."""
        if session.is_subagent:
            return
        if self.settings.project_briefs:
            report.briefs += self.brief(session, report, now=now)
        if self.settings.session_summaries:
            self.session_end(session, report, now=now, seen=seen, end=end)

    def _read_to_end(self, session: SessionRow, storage: str) -> list[MessageRow]:
        out: list[MessageRow] = []
        mark: tuple[int, str] | None = None
        while True:
            batch = self.source.messages_after(session.id, mark, limit=MESSAGE_BATCH,
                                               storage=storage)
            out += batch
            if len(batch) < MESSAGE_BATCH:
                return drop_fork_copies(out, session.time_created)
            mark = batch[-1].mark

    def session_end(self, session: SessionRow, report: SessionReport, *,
                    now: datetime, seen: Seen | None = None,
                    end: Mark | Literal["unknown"] | None = "unknown") -> None:
        """Write the session's note when it is read to its end and idle for good; else
        set ``report.summary_due_ms`` when it will be idle long enough. ``seen``: the
        session as its extraction just read it whole (not read again); ``end``: its newest
        row, when already looked up (``None``: it has none)."""
        end = self._read_end(session, seen.end if seen is not None else end)
        if end is None:
            return
        pid = note_id(session.project_key, "session-summary", f"session:{session.id}")
        messages: list[MessageRow] | None = None
        if seen is not None:  # in hand: a session the rules have nothing to tell of is
            # left before the store is asked
            messages = drop_fork_copies(seen.messages, session.time_created)
            if not self._worth_a_note(session_activity(messages)):
                return
        existing = self.store.get([pid])
        if existing and (existing[0].basis == end.position[1]
                         or (not existing[0].is_active
                             and existing[0].retired_reason != NOTHING_TO_TELL)):
            return  # written for this very end already, or forgotten by the user
        if messages is None:
            if (self.summarizer.name == "rules"
                    and not self.source.may_have_tool_parts(session.id, end.storage)):
                return  # no file changed, no command run: the rules have nothing to tell
            messages = self._read_to_end(session, end.storage)
        act = session_activity(messages)
        if self._worth_a_note(act):
            self._write_note(session, report, pid, act, messages, now)

    def _read_end(self, session: SessionRow,
                  end: Mark | Literal["unknown"] | None) -> Mark | None:
        """The session's newest row (``end``, looked up when ``"unknown"``) when the
        session's mark has read up to it in the same storage, else ``None`` (no row, no
        mark, or a turn still unread)."""
        if isinstance(end, str):
            end = self.source.last_messages([session.id]).get(session.id)
        mark = self.state.marks.get_mark(self.source.identity, session.id)
        if end is None or mark is None or mark.storage != end.storage:
            return None
        if not named(end.storage).read_up_to(end.position, mark.position):
            return None  # a turn is still unread
        return end

    def _write_note(self, session: SessionRow, report: SessionReport, pid: str,
                    act: SessionActivity, messages: list[MessageRow], now: datetime) -> None:
        """Write the session's note ``pid`` from its ``messages`` once it has been idle
        long enough (``act``: what it did), else set ``report.summary_due_ms``."""
        now_ms = int(now.timestamp() * 1000)
        due = act.last_activity_ms + self.settings.idle_ms
        if now_ms < due:
            report.summary_due_ms = due
            return
        state = scrub(render_state(act, title=session.title, root=session.project_root,
                                    max_chars=self.settings.summary_max_chars)).text
        lines: list[TranscriptLine] = []
        if self.summarizer.name != "rules":
            raw = transcript_lines(group_turns(messages),
                                   tool_output_chars=self.tool_output_chars)
            lines = _tail([TranscriptLine(x.message_id, x.role, scrub(x.text).text)
                           for x in raw], self.settings.transcript_tokens)
        s = self.summarizer.session_summary(lines, state,
                                            max_chars=self.settings.summary_max_chars)
        self._count(report, s)
        content = cap(scrub(s.text).text, self.settings.summary_max_chars)
        if content or s.llm_calls:
            self._store_note(pid, session, act, content, s.source)
            report.summaries += bool(content)

    def _store_note(self, pid: str, session: SessionRow, act: SessionActivity, content: str,
                    source: str) -> None:
        """Store a session's note; for ``content`` ``""`` a tombstone
        (:data:`NOTHING_TO_TELL`), so that the model is not asked again for this end."""
        memory = self._memory(pid, session, content or NOTHING_TO_TELL,
                              [act.last_message_id], source, act.last_message_id,
                              created_ms=session.time_created,
                              updated_ms=act.last_activity_ms)
        if not content:
            memory = replace(memory, status="retired", retired_reason=NOTHING_TO_TELL)
        self.store.upsert([memory])
        log.info("session_note_stored", session_id=session.id, source=source,
                 chars=len(content), files=len(act.files), failing=len(act.failing))

    def _worth_a_note(self, act: SessionActivity) -> bool:
        """Whether a session that ended so gets a note: it has a last message, did not end
        with a compaction, and (rules) changed files or left commands failing."""
        if not act.last_message_id or act.ended_with_compaction:
            return False
        # nothing changed, nothing failed: the rules have nothing to tell
        return self.summarizer.name != "rules" or act.has_state

    # -- project briefs ------------------------------------------------------------------

    def brief(self, session: SessionRow, report: SessionReport, *, now: datetime) -> int:
        """Write or refresh the project's brief (once per project per instance); return 1
        when it was written."""
        key = session.project_key
        if session.project_id == "global" or key in self._briefs_checked:
            return 0
        self._briefs_checked.add(key)
        root = session.project_root
        readme = find_readme(root)
        found = [f for f in [readme, *find_manifests(root)] if f is not None]
        if not found:
            return 0
        basis = hashlib.sha256(" ".join(f"{f.name}:{f.sha256}" for f in found)
                               .encode()).hexdigest()
        pid = note_id(key, "project-brief", "readme")
        existing = self.store.get([pid])
        if existing and existing[0].basis == basis:
            return 0  # no file changed (or the user forgot the brief of them)
        kept = [f for f in found if shareable(root, [f])]
        if not kept:
            log.info("project_brief_skipped", project=key, reason="not in git or ignored")
            return 0
        manifests = {f.name: scrub(f.text).text for f in kept if f is not readme}
        text = scrub(readme.text).text if readme in kept and readme is not None else ""
        s = self.summarizer.project_brief(text, manifests,
                                          max_chars=self.settings.brief_max_chars,
                                          name=os.path.basename(root.rstrip("/")))
        self._count(report, s)
        content = cap(scrub(s.text).text, self.settings.brief_max_chars)
        if not content and not s.llm_calls:
            return 0
        created = existing[0].created_at if existing else now
        brief = Memory(
            id=pid, content=content or NOTHING_TO_TELL, type="project-brief", scope="project",
            project_id=key, project_root=session.project_root, session_id=session.id,
            message_ids=[], source="llm" if s.source == "llm" else "rules",
            created_at=created, updated_at=now, session_ids=[session.id],
            content_hash=content_hash(content or NOTHING_TO_TELL), section="brief",
            basis=basis)
        if not content:  # a tombstone for these files: the model is not asked again
            brief = replace(brief, status="retired", retired_reason=NOTHING_TO_TELL)
        self.store.upsert([brief])
        log.info("project_brief_stored", project=key, source=s.source, chars=len(content),
                 files=[f.name for f in kept])
        return 1 if content else 0
