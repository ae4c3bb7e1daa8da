"""A config file edited under the running daemon: checked, then taken up by a restart in place.

The daemon reads its config once. :class:`ConfigWatch` notices when the file's bytes
change (every :data:`CHECK_INTERVAL_SECONDS` from the main loop, and at once on SIGHUP)
and validates the new file exactly as a start would (:func:`~opencode_memoryd.config.
loader.load_config`). A valid file asks the daemon to restart in place: it stops as on
SIGTERM (work in flight is crash-safe and resumes) and :func:`restart_in_place` replaces
the process image with the same command line (``execv``: the same pid, so systemd and
launchd keep tracking it; systemd is told ``RELOADING=1`` and gets ``READY=1`` from the
new image; SIGHUP stays blocked until the new image serves it). An invalid file, or one
that changes the embedder or the store (:func:`store_change`), changes nothing: the daemon
keeps running with the config it has, logs the problem once per version of the file, and
``status`` / ``doctor`` show it. Restarting rather than patching live objects is what
makes every other key take effect, the sockets and the web page included (the same choice
as a service manager's ``restart``).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import structlog

from opencode_memoryd.config.loader import config_digest, load_config
from opencode_memoryd.config.schema import Config
from opencode_memoryd.errors import MemorydError

log = structlog.get_logger(__name__)

#: Seconds between two looks at the config file from the main loop.
CHECK_INTERVAL_SECONDS = 2.0


class ConfigWatch:
    """Whether the config file changed since the daemon read it, and whether the change
    is one to restart for.

    Args:
        path: the config file the daemon read (it may not exist: the defaults).
        env: the environment the config was read with.
        monotonic: seconds of a monotonic clock; injectable for tests.
        refuse: why a valid new config cannot be taken up by a restart in place (``None``:
            it can), e.g. :func:`store_change`.
    """

    def __init__(self, path: Path | None, env: Mapping[str, str], *,
                 monotonic: Callable[[], float] = time.monotonic,
                 refuse: Callable[[Config], str | None] | None = None) -> None:
        self.path = path
        self.env = env
        self._refuse = refuse
        self._monotonic = monotonic
        self._read = config_digest(path)
        self._seen = self._read
        self._next = 0.0
        #: why the edited file was not taken up (``None``: no problem)
        self.error: str | None = None

    @property
    def changed(self) -> bool:
        """Whether the file differs from the one the daemon runs with."""
        return config_digest(self.path) != self._read

    def due(self) -> bool:
        """Whether the main loop should look now (every :data:`CHECK_INTERVAL_SECONDS`)."""
        now = self._monotonic()
        if now < self._next:
            return False
        self._next = now + CHECK_INTERVAL_SECONDS
        return True

    def check(self) -> bool:
        """Look at the file; whether the daemon should restart to take it up (it changed,
        and it validates). A file that fails validation sets :attr:`error` and is logged
        once; a file edited back to what the daemon runs with clears it."""
        digest = config_digest(self.path)
        if digest == self._read:
            self._seen, self.error = digest, None
            return False
        if digest == self._seen:
            return False  # this version was looked at already (and found wanting)
        self._seen = digest
        if digest is None or self.path is None or not self.path.is_file():
            self.error = (f"the config file {self.path} is gone or unreadable: the daemon "
                          "keeps the config it started with")
        else:
            try:
                new = load_config(self.path, self.env)
            except (MemorydError, OSError, ValueError) as exc:
                self.error = f"the edited config file is not valid, so it is not used: {exc}"
            else:
                self.error = self._refuse(new) if self._refuse is not None else None
                if self.error is None:
                    log.info("config_changed_restarting", path=str(self.path))
                    return True
        log.error("config_change_refused", path=str(self.path), error=self.error)
        return False


def block_hangup() -> None:
    """Block SIGHUP until the next image serves it: a SIGHUP sent while the daemon restarts
    in place stays pending (a blocked signal and the signal mask survive ``execve``) instead
    of killing it with the default action; :class:`~opencode_memoryd.serve.runtime.signals.
    StopSignals` unblocks it, and the daemon restarts once more."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGHUP})


def restart_in_place() -> None:
    """Replace this process by a fresh run of the same command line (same pid, same
    environment: a variable added to the service's environment needs a real restart).
    Does not return. SIGHUP is blocked already (:func:`block_hangup`, when the daemon
    stopped to restart).

    Raises:
        OSError: the interpreter could not be executed (the caller exits instead).
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:]])


def store_change(running: Config) -> Callable[[Config], str | None]:
    """A ``refuse`` for :class:`ConfigWatch`: a new config that changes the embedder or
    where the store is (``[embedding]``, ``[qdrant]``) is not taken up by itself, since
    a store built for another embedder must be re-embedded first (``reembed``, exit 78 at
    start otherwise) and a moved store is another store."""
    def refuse(new: Config) -> str | None:
        changed = [name for name in ("embedding", "qdrant")
                   if getattr(new, name) != getattr(running, name)]
        if not changed:
            return None
        return (f"the edited config file changes [{'], ['.join(changed)}], which a restart in "
                "place does not take up: stop the daemon, run `opencode-memoryd reembed` if "
                "the embedder changed, and start it again")
    return refuse
