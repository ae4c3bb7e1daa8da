"""Memory ids as people type them: the full UUID, or a unique prefix of it (like git's
abbreviated commit ids), at least :data:`MIN_PREFIX` characters."""

from __future__ import annotations

import uuid

from opencode_memoryd.errors import NotFoundError, RequestError
from opencode_memoryd.store.api import MemoryFilter, MemoryStore

#: The fewest characters of an id accepted as a prefix.
MIN_PREFIX = 4
#: How many candidates an ambiguous prefix's error names.
SHOWN_CANDIDATES = 5
_HEX = frozenset("0123456789abcdef-")


def resolve_id(store: MemoryStore, memory_id: str, user_id: str | None = None) -> str:
    """The full id of the memory ``memory_id`` names: itself when it is a whole UUID, else
    the one stored memory (tombstones too; a user-scope memory of another identity than
    ``user_id`` is not considered) whose id starts with it, dashes included
    (``8f3a`` and ``8f3a2b1c-77`` are prefixes of ``8f3a2b1c-77d4-...``).

    Raises:
        RequestError: a prefix shorter than :data:`MIN_PREFIX`, or one that several
            memories share (the message lists up to :data:`SHOWN_CANDIDATES` of them with
            their text).
        NotFoundError: no memory id starts with it.
    """
    try:
        return str(uuid.UUID(memory_id))
    except ValueError:
        pass
    prefix = memory_id.strip().lower()
    if not prefix or set(prefix) - _HEX:
        raise NotFoundError(f"no memory with id {memory_id}; `list` or `search` shows the ids")
    if len(prefix) < MIN_PREFIX:
        raise RequestError(f"memory id prefix {memory_id!r} is too short: give at least "
                           f"{MIN_PREFIX} characters of the id `list` shows")
    found = [m for m in store.scroll(MemoryFilter(include_retired=True))
             if m.id.startswith(prefix)
             and not (m.scope == "user" and user_id is not None
                      and m.user_id not in (None, user_id))]
    if not found:
        raise NotFoundError(f"no memory id starts with {memory_id}; `list` or `search` "
                            "shows the ids")
    if len(found) > 1:
        shown = "; ".join(f"{m.id} {m.content[:60]!r}" for m in found[:SHOWN_CANDIDATES])
        more = (f" and {len(found) - SHOWN_CANDIDATES} more"
                if len(found) > SHOWN_CANDIDATES else "")
        raise RequestError(f"memory id prefix {memory_id} is ambiguous: {len(found)} "
                           f"memories start with it ({shown}{more}); give more characters")
    return found[0].id
