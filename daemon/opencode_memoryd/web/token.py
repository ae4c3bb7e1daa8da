"""The web page's access token: a random secret in a ``0600`` file under the state dir,
created on first use, and what is derived from it (the CSRF token, one-time login codes,
the page's URL, the ``0600`` login page a browser is started with).

This module imports no web framework: the CLI's ``web`` command reads the token too.
"""

from __future__ import annotations

import hashlib
import hmac
import html
import json
import os
import secrets
import stat
from pathlib import Path
from typing import Any

from opencode_memoryd.errors import StateError

#: The token file in the state dir.
TOKEN_FILE = "web-token"
#: The login page ``opencode-memoryd web`` starts the browser with, in the state dir.
LOGIN_PAGE_FILE = "web-login.html"
#: What the daemon writes in the state dir while it serves the page: ``{"url", "host",
#: "port", "pid"}`` (the port actually bound: ``port = 0`` picks one).
WEB_INFO_FILE = "web.json"


def load_or_create_token(state_dir: Path) -> str:
    """The token in ``state_dir/web-token``, created (32 random bytes, URL-safe base64,
    mode ``0600``) when there is none; a file of another mode is made ``0600``.

    Raises:
        StateError: the file cannot be read or written, it is empty, or it is a symbolic
            link, not a regular file or another user's (never followed nor chmod-ed).
    """
    path = Path(state_dir) / TOKEN_FILE
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        except FileExistsError:
            token = _read_private(path)
        else:
            token = secrets.token_urlsafe(32)
            try:
                os.fchmod(fd, 0o600)
                os.write(fd, (token + "\n").encode("ascii"))
                os.fsync(fd)
            finally:
                os.close(fd)
    except (OSError, UnicodeDecodeError) as exc:
        raise StateError(f"cannot read or create the web token {path}: {exc}") from exc
    if not token:
        raise StateError(f"the web token file {path} is empty; delete it and start the "
                         "daemon again")
    return token


def _read_private(path: Path) -> str:
    """The text of ``path``, a regular file of this user's opened without following a
    link, made ``0600`` through its descriptor first if it was open to others.

    Raises:
        OSError: it cannot be read, or it is a link (``ELOOP``).
        UnicodeDecodeError: it is not ASCII.
        StateError: not a regular file, or another user's.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
            raise StateError(f"the web token {path} is not a file of this user's; delete "
                             "it and start the daemon again")
        if stat.S_IMODE(st.st_mode) & 0o077:
            os.fchmod(fd, 0o600)
        with os.fdopen(os.dup(fd), "rb") as f:
            return f.read().decode("ascii").strip()
    finally:
        os.close(fd)


def csrf_token(token: str) -> str:
    """The CSRF token of an access token (an HMAC-SHA256 of a fixed label, hex)."""
    return hmac.new(token.encode(), b"opencode-memoryd csrf", hashlib.sha256).hexdigest()


#: How long a login code (:func:`login_code`) is good for, in seconds.
LOGIN_CODE_SECONDS = 120


def login_code(token: str, now: float) -> str:
    """A one-time code that logs the page in instead of the token, good for
    :data:`LOGIN_CODE_SECONDS` from ``now`` (Unix seconds): ``"<seconds>.<HMAC-SHA256 of
    them under the token, hex>"``. ``opencode-memoryd web`` puts it in a ``0600`` file
    (:func:`write_login_page`), never on a command line: other users of the machine can
    read a browser's.
    """
    stamp = str(int(now))
    mac = hmac.new(token.encode(), b"opencode-memoryd login " + stamp.encode(),
                   hashlib.sha256).hexdigest()
    return f"{stamp}.{mac}"


def login_code_ok(token: str, code: str, now: float) -> bool:
    """Whether ``code`` is a :func:`login_code` of ``token`` made at most
    :data:`LOGIN_CODE_SECONDS` before ``now`` (and not after it; one-time use is the
    server's to enforce)."""
    stamp, _, _mac = code.partition(".")
    if not stamp.isdigit() or not 0 <= now - int(stamp) <= LOGIN_CODE_SECONDS:
        return False
    return hmac.compare_digest(code.encode(), login_code(token, int(stamp)).encode())


def page_url(host: str, port: int, token: str | None = None, *, code: str | None = None
             ) -> str:
    """``http://HOST:PORT/``, with ``#token=…`` when a token is given, or ``#code=…`` when a
    login code is (a fragment never reaches a server or a log)."""
    shown = f"[{host}]" if ":" in host else host
    base = f"http://{shown}:{port}/"
    if token:
        return f"{base}#token={token}"
    return f"{base}#code={code}" if code else base


def write_login_page(state_dir: Path, url: str) -> Path:
    """Write ``state_dir/web-login.html``, mode ``0600``: a page that sends the browser on
    to ``url`` (the page's address with its ``#code=…``), and return its path. Only its
    path goes on the browser's command line; the file is replaced atomically (a symlink
    in its place is replaced, never followed).

    Raises:
        StateError: the file cannot be written.
    """
    target = json.dumps(url)
    shown = html.escape(url, quote=True)
    page = ("<!doctype html>\n<html><head><meta charset=\"utf-8\">"
            "<meta name=\"referrer\" content=\"no-referrer\">"
            f"<meta http-equiv=\"refresh\" content=\"0;url={shown}\">"
            "<title>opencode-memoryd</title></head>\n"
            f"<body><script>location.replace({target})</script>"
            f"<p><a href=\"{shown}\">Open the opencode-memoryd page</a></p></body></html>\n")
    path = Path(state_dir) / LOGIN_PAGE_FILE
    tmp = path.with_name(f".{LOGIN_PAGE_FILE}.{secrets.token_hex(8)}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o600)
        try:
            os.fchmod(fd, 0o600)
            os.write(fd, page.encode("utf-8"))
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise StateError(f"cannot write the login page {path}: {exc}") from exc
    return path


def read_web_info(state_dir: Path) -> dict[str, Any] | None:
    """What the running daemon wrote in ``web.json``, or ``None`` (no file, unreadable)."""
    try:
        info = json.loads((Path(state_dir) / WEB_INFO_FILE).read_text())
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) else None
