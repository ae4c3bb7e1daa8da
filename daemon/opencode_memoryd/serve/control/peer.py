"""Who serves a Unix socket: what a client checks before it sends the daemon anything.

Another user of the machine who creates the socket's folder first (a shared
``$XDG_RUNTIME_DIR``, the ``$TMPDIR`` folder of a shortened socket path) could serve the
socket instead of the daemon and read what clients send it. So a client checks, before it
connects, that the folder is a real folder (not a symbolic link), owned by this user and
closed to others (no group or other permission bits: the daemon makes it ``0700``), and
that the socket file in it is a socket owned by this user (:func:`check_path`); and, once
connected, that the process at the other end runs as this user (:func:`check_peer`:
``SO_PEERCRED`` on Linux, ``LOCAL_PEERCRED`` on macOS and the BSDs, where the kernel
reports the listening process's credentials). An owner's folder cannot be filled by
anyone else, so the first check alone stops a squatter; the second also covers a folder
swapped between the check and the connection.

Imports only :mod:`os`, :mod:`sys` and :mod:`_socket` (the thin client path; see
:mod:`opencode_memoryd.serve.control.client`).
"""

from __future__ import annotations

import _socket
import os
import stat
import sys

from opencode_memoryd.errors import SocketOwnerError

TYPE_CHECKING = False  # not `typing`'s: the thin client path does not import it
if TYPE_CHECKING:
    from os import PathLike

#: The size of a ``struct xucred`` (``LOCAL_PEERCRED``): version, uid, ngroups, 16 gids.
_XUCRED_BYTES = 76


def _owner(uid: int) -> str:
    return "this user" if uid == os.getuid() else f"uid {uid}, another user"


def check_path(path: str | PathLike[str]) -> None:
    """Refuse a socket whose folder or file another user could have made.

    Args:
        path: the socket file. A missing file passes (the connection then fails as
            usual); a missing folder too.

    Raises:
        SocketOwnerError: the folder is a symbolic link, not a folder, not owned by
            this user, or open to the group or others; or the socket file is a link,
            not a socket, or not owned by this user. The message names the path and
            what to do.
    """
    path = os.fspath(path)
    folder = os.path.dirname(path) or "."
    me = os.getuid()
    try:
        st = os.lstat(folder)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise SocketOwnerError(f"cannot check the socket folder {folder}: {exc}") from exc
    if stat.S_ISLNK(st.st_mode):
        raise SocketOwnerError(
            f"the socket folder {folder} is a symbolic link: not connecting (only a real "
            "folder of this user's, mode 0700, is trusted); remove the link and restart "
            "the daemon")
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != me:
        raise SocketOwnerError(
            f"the socket folder {folder} belongs to {_owner(st.st_uid)}: not connecting "
            "(another user may serve it); remove it, or set XDG_RUNTIME_DIR to a folder "
            "of your own, and restart the daemon")
    if stat.S_IMODE(st.st_mode) & 0o077:
        raise SocketOwnerError(
            f"the socket folder {folder} is open to other users (mode "
            f"{stat.S_IMODE(st.st_mode):04o}): not connecting; restart the daemon, which "
            "makes it 0700")
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise SocketOwnerError(f"cannot check the socket {path}: {exc}") from exc
    if not stat.S_ISSOCK(st.st_mode) or st.st_uid != me:
        what = "is not a socket" if not stat.S_ISSOCK(st.st_mode) else (
            f"belongs to {_owner(st.st_uid)}")
        raise SocketOwnerError(f"{path} {what}: not connecting; remove it and restart the "
                               "daemon")


def peer_uid(sock: _socket.socket) -> int | None:
    """The user id of the process serving the other end of the connected Unix socket
    ``sock``, or ``None`` where the system cannot tell (no ``SO_PEERCRED`` or
    ``LOCAL_PEERCRED``)."""
    if hasattr(_socket, "SO_PEERCRED"):  # Linux: struct ucred {pid, uid, gid}
        raw = sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)
        return int.from_bytes(raw[4:8], sys.byteorder)
    local_peercred = getattr(_socket, "LOCAL_PEERCRED", None)
    if local_peercred is not None:  # macOS, BSD: struct xucred {version, uid, ...}
        raw = sock.getsockopt(0, local_peercred, _XUCRED_BYTES)  # level SOL_LOCAL = 0
        return int.from_bytes(raw[4:8], sys.byteorder)
    return None


def check_peer(sock: _socket.socket, path: str | PathLike[str]) -> None:
    """Refuse a connection (``sock``, to ``path``) whose server runs as another user.

    Raises:
        SocketOwnerError: the server's user id is not this process's.
    """
    try:
        uid = peer_uid(sock)
    except OSError as exc:
        raise SocketOwnerError(f"cannot tell who serves {os.fspath(path)}: {exc}") from exc
    if uid is not None and uid != os.getuid():
        raise SocketOwnerError(
            f"{os.fspath(path)} is served by {_owner(uid)}: nothing sent; stop that "
            "process, or set XDG_RUNTIME_DIR to a folder of your own, and restart the daemon")
