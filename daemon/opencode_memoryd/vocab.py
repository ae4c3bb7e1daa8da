"""The memory vocabulary: types, scopes and context-block sections, as plain tuples.

Imports nothing, so the command line can offer them as ``choices`` without loading
:mod:`opencode_memoryd.models` (which re-exports them).
"""

from __future__ import annotations

#: Every memory type: the four kinds of fact an extractor or a person states, then the two
#: kinds opencode-memoryd writes itself: a project's brief (from its README) and a session's
#: summary (OpenCode's compaction summary, or the state a session ended in).
MEMORY_TYPES: tuple[str, ...] = ("user", "feedback", "project", "reference", "project-brief",
                                 "session-summary")
#: The memory types of facts: what extractors propose and ``add`` accepts.
FACT_TYPES: tuple[str, ...] = ("user", "feedback", "project", "reference")
#: The memory types opencode-memoryd writes itself, one per source (a README, a compaction
#: message, a session): never proposed by an extractor, never consolidated by a dream.
NOTE_TYPES: tuple[str, ...] = ("project-brief", "session-summary")
SCOPES: tuple[str, ...] = ("user", "project")
#: The section of the context block a memory belongs in: the project's brief, its
#: architecture and tech, conventions and feedback, progress (what was done, where the last
#: session stopped), the user's preferences, and references (where things are).
SECTIONS: tuple[str, ...] = ("brief", "architecture", "conventions", "progress", "user",
                             "reference")
