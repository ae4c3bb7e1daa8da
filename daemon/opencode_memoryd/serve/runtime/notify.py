"""systemd's readiness protocol (``sd_notify(3)``), for the daemon's ``READY=1``,
``WATCHDOG=1`` and ``STOPPING=1``."""

from __future__ import annotations

import os
import socket

__all__ = ["sd_notify"]


def sd_notify(message: str) -> bool:
    """Send a systemd notification (``READY=1``, ``WATCHDOG=1``, ``STATUS=…``).

    Implements the documented datagram protocol of ``sd_notify(3)`` on ``$NOTIFY_SOCKET``
    (a path, or an abstract socket when it starts with ``@``). Returns ``False`` when not
    run by systemd.
    """
    addr = os.environ.get("NOTIFY_SOCKET")
    if not addr:
        return False
    target = "\0" + addr[1:] if addr.startswith("@") else addr
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
            s.connect(target)
            s.sendall(message.encode())
    except OSError:
        return False
    return True
