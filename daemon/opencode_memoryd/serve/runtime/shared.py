"""What the daemon's collaborators share (:mod:`opencode_memoryd.serve.runtime.daemon`).

The daemon is a few collaborators with constructors of their own, each given this one
small state object: the command host (:mod:`.commands`), the source tracker
(:mod:`.sources`), the worker (:mod:`.jobs`) and the timed work (:mod:`.timed`). It holds
what more than one of them reads or writes: the stop signal, the main loop's wake-up, the
open databases, the state file, the store and the service once the start opened them, the
last error, and the way background work lets a command go first.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from opencode_memoryd.serve.runtime.own_writes import OwnWrites

if TYPE_CHECKING:
    from opencode_memoryd.compose import App
    from opencode_memoryd.config.daemon import DaemonConfig
    from opencode_memoryd.serve.runtime.priority import Foreground
    from opencode_memoryd.serve.runtime.sources import TrackedSource
    from opencode_memoryd.state.db import StateDB
    from opencode_memoryd.store.api import MemoryStore
    from opencode_memoryd.usecases.service import Service


@dataclass(eq=False)
class DaemonState:
    """The state the daemon's collaborators share.

    ``state``, ``store`` and ``service`` exist once the start has opened them.

    Args:
        app: the configured application (paths, adapters).
        clock: the current aware UTC time.
    """

    app: App
    clock: Callable[[], datetime]
    #: set by SIGTERM/SIGINT: every loop ends
    stop_event: threading.Event = field(default_factory=threading.Event)
    #: wakes the main loop (a file event, a requested sweep, the stop)
    poke: threading.Event = field(default_factory=threading.Event)
    #: set by the start once the capture code is loaded (see ``CAPTURE_ROUTES``)
    capture_loaded: threading.Event = field(default_factory=threading.Event)
    #: the OpenCode databases followed, by source id
    sources: dict[str, TrackedSource] = field(default_factory=dict)
    #: the sessions a command waits for (see :mod:`opencode_memoryd.serve.runtime.own_writes`)
    own_writes: OwnWrites = field(default_factory=OwnWrites)
    #: the open connections of the control socket, once it is served
    foreground: Foreground | None = None
    #: the last failure, shown by ``status``
    last_error: str | None = None
    #: the first full pass over the databases (start-up catch-up) is done
    caught_up: bool = False
    state: StateDB = field(init=False)
    store: MemoryStore = field(init=False)
    service: Service = field(init=False)

    @property
    def cfg(self) -> DaemonConfig:
        """The ``[daemon]`` settings."""
        return self.app.config.daemon

    def now_ms(self) -> int:
        """The clock's time in wall milliseconds."""
        return int(self.clock().timestamp() * 1000)

    def step_aside(self) -> None:
        """Let the commands being served go first: called by the background work (start-up
        after the socket, the first pass, the worker) between small steps
        (:meth:`~opencode_memoryd.serve.runtime.priority.Foreground.step_aside`, bounded)."""
        if self.foreground is not None:
            self.foreground.step_aside()
