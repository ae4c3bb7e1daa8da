"""What the agent may do to memories, and what it may not.

A memory is the user's unless the agent added it. The agent (an OpenCode session calling the
MCP ``memory`` tool, or running this CLI from its shell, where OpenCode sets ``OPENCODE=1``)
may:

* add project memories of its session's project only; they are marked as its own
  (``provenance`` ``agent``) and shown apart in the context block;
* add a user-scope memory only as a *pending* note: in no block until the user confirms it
  (:mod:`opencode_memoryd.usecases.confirm`);
* forget, edit or restore only the memories it added itself, of its session's project, and
  forget at most :data:`AGENT_FORGETS_PER_HOUR` in any hour;
* dream only as a dry run, and never undo a dream.

Everything else is refused with a message telling the agent to ask the user. The agent's
text is untrusted on its way to the prompt: text that reads as an attempt to steer the agent
or to break out of the block (:func:`instruction_like`) is refused when the agent writes it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import datetime, timedelta

from opencode_memoryd.errors import RefusedError, RequestError
from opencode_memoryd.models import Memory, iso_utc
from opencode_memoryd.usecases.instructions import instruction_like as instruction_like

#: The callers a write use case accepts: the user (CLI, page) or the agent.
USER = "user"
AGENT = "agent"
CALLERS: tuple[str, ...] = (USER, AGENT)
#: The most memories the agent may forget in :data:`FORGET_WINDOW`.
AGENT_FORGETS_PER_HOUR = 10
#: The window of the agent's forget limit (a sliding window).
FORGET_WINDOW = timedelta(hours=1)

ASK_USER = ("it is the user's: ask the user to change it (`opencode-memoryd edit` / "
            "`forget`, or the memory page)")

def check_caller(caller: object, verb: str) -> bool:
    """Whether ``caller`` is the agent.

    Raises:
        RequestError: not one of :data:`CALLERS`.
    """
    if caller not in CALLERS:
        raise RequestError(f"{verb}: `caller` must be one of {', '.join(CALLERS)}, not "
                           f"{caller!r}")
    return caller == AGENT


def refuse_agent_dream(caller: object, verb: str) -> None:
    """Refuse the agent a dream that changes memories, or an undo of one: both rewrite the
    user's memories (an undo brings back the facts a dream retired), which only the user
    may do.

    Raises:
        RequestError: ``caller`` is not one of :data:`CALLERS`.
        RefusedError: the agent asked; nothing was changed.
    """
    if check_caller(caller, verb):
        raise RefusedError(f"{verb}: the agent may not dream or undo a dream: both change "
                           "the user's memories; ask the user to run it (`opencode-memoryd "
                           "dream`), or use `--dry-run` to see the plan")


def refuse_agent_text(text: str, verb: str) -> None:
    """Refuse text the agent writes when it reads as an instruction or a block escape.

    Raises:
        RefusedError: :func:`instruction_like` found a reason; nothing was written.
    """
    why = instruction_like(text)
    if why is not None:
        raise RefusedError(f"{verb}: refused: the text {why}, which a memory written by the "
                           "agent may not do; if the user wants this remembered, ask them to "
                           "add it (`opencode-memoryd add`)")


@dataclass(frozen=True)
class AgentCall:
    """A write the agent asked for, with what it is allowed to touch.

    Attributes:
        project_keys: the projects of the agent's session folder (empty: none known).
        directory: that folder, for messages.
        spend_forget: counts one forget of a memory id against the rate limit; raises
            :class:`RefusedError` when the limit is reached (:func:`forget_budget`).
    """

    project_keys: frozenset[str]
    directory: str
    spend_forget: Callable[[str], None]

    def check_may_change(self, m: Memory, verb: str) -> None:
        """Refuse unless ``m`` is the agent's own memory of its session's project.

        Raises:
            RefusedError: ``m`` is the user's (any other provenance), user scope, or of
                another project; nothing was changed.
        """
        if m.provenance != "agent":
            raise RefusedError(f"{verb}: memory {m.id} was not added by the agent; {ASK_USER}")
        if m.scope != "project" or m.project_id not in self.project_keys:
            raise RefusedError(f"{verb}: memory {m.id} is not a memory of this session's "
                               f"project ({self.directory}); the agent may change only "
                               f"the notes it added to its own project. {ASK_USER}")


def forget_budget(spend: Callable[..., int | None], clock: Callable[[], datetime],
                  limit: int = AGENT_FORGETS_PER_HOUR) -> Callable[[str], None]:
    """A ``spend_forget`` for :class:`AgentCall` over the state file's counter
    (:meth:`~opencode_memoryd.state.agent.AgentTable.spend_agent_forget`).

    Raises (from the returned function):
        RefusedError: ``limit`` agent forgets in the last :data:`FORGET_WINDOW` already.
    """
    def spend_forget(memory_id: str) -> None:
        now = clock()
        if spend(memory_id, now=iso_utc(now), since=iso_utc(now - FORGET_WINDOW),
                 limit=limit) is None:
            raise RefusedError(f"forget: the agent may forget at most {limit} memories an "
                               "hour and reached that; ask the user to forget the rest")

    return spend_forget


def agent_project_keys(keys: Collection[str], directory: str | None, verb: str
                       ) -> frozenset[str]:
    """The agent's projects, checked: the agent always says where its session runs.

    Raises:
        RequestError: no ``directory``.
    """
    if not directory:
        raise RequestError(f"{verb}: the agent's session folder (`directory`) is required")
    return frozenset(keys)
