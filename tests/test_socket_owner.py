"""Socket squatting: another user who makes the socket's folder first (a shared
``$XDG_RUNTIME_DIR``, the ``$TMPDIR`` folder of a shortened path), a folder that is a
symbolic link, or one open to others. The daemon refuses to serve there (and never
chmods a link's target); the clients (the control client, the CLI, the MCP relay) and the
OpenCode plugin (run by the real OpenCode binary's Bun) send the squatter nothing.

Another user's folder is made with ``chown`` to an unused uid, so those cases need root;
they are skipped otherwise (the symlink and open-folder cases run everywhere)."""

from __future__ import annotations

import json
import os
import socket
import socketserver
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import cli, write_config
from opencode_memoryd.errors import ControlError, SocketOwnerError
from opencode_memoryd.install.opencode import render_plugin
from opencode_memoryd.serve.control import client as control_client
from opencode_memoryd.serve.control.client import ControlClient
from opencode_memoryd.serve.control.protocol import socket_path
from opencode_memoryd.serve.control.server import ControlServer
from opencode_memoryd.usecases.fence import seal

#: A uid no account uses: "another user".
OTHER_UID = 54321
ROOT = os.getuid() == 0
OPENCODE = Path(__file__).parent.parent / ".cache" / "opencode-ai" / "bin" / "opencode"
#: A whole block (sealed as the daemon seals one), which the plugin takes from our own socket.
BLOCK = seal(["## Memories", '- "served by a squatter"'])
HOWS = ["another-user", "symlink", "open-folder"]
#: What each refusal says about the folder.
SAYS = {"another-user": f"uid {OTHER_UID}, another user", "symlink": "symbolic link",
        "open-folder": "open to other users"}


class Recorder(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    """A squatter's server: answers every HTTP request with a block (and a ping's pid),
    and records every byte it is sent."""

    daemon_threads = True

    def __init__(self, path: Path) -> None:
        self.received: list[bytes] = []
        self.connections = 0
        super().__init__(str(path), _Handler)


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        server = self.server
        assert isinstance(server, Recorder)
        server.connections += 1
        data = b""
        while b"\r\n\r\n" not in data:
            got = self.request.recv(65536)
            if not got:
                break
            data += got
        server.received.append(data)
        if not data:
            return
        body = json.dumps({"result": {"pid": 4242, "text": BLOCK}}).encode()
        self.request.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body)
                             + body)


def _serve(path: Path) -> Recorder:
    server = Recorder(path)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture
def squatted(request: pytest.FixtureRequest, tmp_path: Path
             ) -> Iterator[tuple[Path, Recorder, str]]:
    """``(the control socket path clients are given, the squatter's server on it, what a
    refusal says)``; the folder is another user's, a link to a folder with the socket, or
    open to all."""
    how = request.param
    if how == "another-user" and not ROOT:
        pytest.skip("making a folder of another uid needs root")
    folder = tmp_path / "run" / "opencode-memoryd"
    folder.parent.mkdir()
    if how == "symlink":
        real = tmp_path / "elsewhere"
        real.mkdir(mode=0o700)
        folder.symlink_to(real)
    else:
        folder.mkdir(mode=0o700)
    server = _serve(folder / "control.sock")
    mcp = _serve(folder / "mcp.sock")
    if how == "another-user":
        for p in (folder, folder / "control.sock", folder / "mcp.sock"):
            os.chown(p, OTHER_UID, OTHER_UID)
    elif how == "open-folder":
        folder.chmod(0o777)
    try:
        yield folder / "control.sock", server, SAYS[how]
    finally:
        for s in (server, mcp):
            s.shutdown()
            s.server_close()
        assert mcp.received == [], "the MCP squatter was sent something"


@pytest.mark.parametrize("squatted", HOWS, indirect=True)
def test_the_clients_send_nothing(squatted: tuple[Path, Recorder, str]) -> None:
    path, server, says = squatted
    for attempt in (lambda: control_client.ping(path),
                    lambda: control_client.call(path, "status", {}),
                    lambda: ControlClient(path).ping(),
                    lambda: ControlClient(path).call("status", {})):
        with pytest.raises(SocketOwnerError) as caught:
            attempt()
        message = str(caught.value)
        assert str(path.parent) in message and "not connecting" in message
        assert says in message, message
    assert server.connections == 0 and server.received == []


@pytest.mark.parametrize("squatted", HOWS, indirect=True)
def test_a_command_says_why_and_sends_nothing(
        squatted: tuple[Path, Recorder, str], tmp_path: Path, isolated_env: dict[str, str],
        capsys: pytest.CaptureFixture[str]) -> None:
    path, server, says = squatted
    cfg = write_config(tmp_path / "c.toml")
    state = Path(isolated_env["XDG_STATE_HOME"]) / "opencode-memoryd"
    state.mkdir(parents=True, mode=0o700)
    (state / "daemon.json").write_text(json.dumps({"socket": str(path),
                                                   "mcp_socket": str(path.parent / "mcp.sock"),
                                                   "pid": os.getpid()}))
    code, out = cli("--config", str(cfg), "list")
    err = capsys.readouterr().err
    assert code != 0 and out == ""
    assert str(path.parent) in err and "not connecting" in err and says in err
    assert server.connections == 0


@pytest.mark.parametrize("squatted", HOWS, indirect=True)
def test_the_mcp_relay_sends_nothing_and_says_why(
        squatted: tuple[Path, Recorder, str], isolated_env: dict[str, str]) -> None:
    path, _, says = squatted
    lines = [{"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "test", "version": "1"}}},
             {"jsonrpc": "2.0", "method": "notifications/initialized"},
             {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
              "params": {"name": "memory", "arguments": {"mode": "search", "query": "x"}}}]
    done = subprocess.run(
        [sys.executable, "-m", "opencode_memoryd", "mcp"],
        input="".join(json.dumps(x) + "\n" for x in lines), capture_output=True, text=True,
        env={**isolated_env, "OPENCODE_MEMORYD_SOCKET": str(path)}, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    answers = {a["id"]: a for a in map(json.loads, done.stdout.splitlines())}
    text = answers[2]["result"]["content"][0]["text"]
    assert answers[2]["result"]["isError"] is True
    assert str(path.parent) in text and "not connecting" in text and says in text
    # (the fixture asserts the MCP socket's squatter got nothing)


# -- the plugin, in OpenCode's own Bun ----------------------------------------------------

HARNESS = r"""
const plugin = (await import(process.argv[2])).default
const hooks = await plugin.server({ project: { id: "p1" }, directory: "/w", worktree: "/w" })
await hooks["chat.message"]({ sessionID: "s1" }, { message: {}, parts: [
  { type: "text", text: "my first message" }] })
const output = { system: ["You are OpenCode."] }
await hooks["experimental.chat.system.transform"]({ sessionID: "s1", model: {} }, output)
process.stdout.write(JSON.stringify(output.system))
"""


def _plugin_system(tmp_path: Path, path: Path) -> list[str]:
    """The system prompt the plugin makes for a session, with ``path`` as its socket."""
    if not OPENCODE.exists():
        if os.environ.get("CI"):
            pytest.fail(f"{OPENCODE} is missing")
        pytest.skip("the OpenCode binary is not installed (tests/e2e/install-opencode.sh)")
    module = tmp_path / "plugin.mjs"
    module.write_text(render_plugin())
    harness = tmp_path / "harness.mjs"
    harness.write_text(HARNESS)
    done = subprocess.run([str(OPENCODE.resolve()), str(harness), module.as_uri()],
                          env={"PATH": os.environ["PATH"], "BUN_BE_BUN": "1",
                               "HOME": str(tmp_path), "OPENCODE_MEMORYD_SOCKET": str(path)},
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    system: list[str] = json.loads(done.stdout)
    return system


@pytest.mark.parametrize("squatted", HOWS, indirect=True)
def test_the_plugin_sends_nothing_to_a_socket_not_ours(
        squatted: tuple[Path, Recorder, str], tmp_path: Path) -> None:
    path, server, _ = squatted
    # the same harness against a folder of ours: the block comes
    ours = tmp_path / "ours"
    ours.mkdir(mode=0o700)
    own = _serve(ours / "control.sock")
    try:
        assert _plugin_system(tmp_path, ours / "control.sock") == ["You are OpenCode.",
                                                                    BLOCK]
        assert len(own.received) == 1 and b"my+first+message" in own.received[0]
    finally:
        own.shutdown()
        own.server_close()
    # the squatter's: nothing asked, nothing added to the prompt
    assert _plugin_system(tmp_path, path) == ["You are OpenCode."]
    assert server.connections == 0 and server.received == []


# -- the daemon -------------------------------------------------------------------------

def test_the_daemon_never_follows_a_symlinked_folder(tmp_path: Path) -> None:
    target = tmp_path / "someone-elses"
    target.mkdir(mode=0o755)
    target.chmod(0o755)
    link = tmp_path / "opencode-memoryd"
    link.symlink_to(target)
    with pytest.raises(ControlError, match="symbolic link") as caught:
        ControlServer(link / "control.sock", {}).start()
    assert str(link) in str(caught.value)
    assert stat.S_IMODE(target.stat().st_mode) == 0o755  # its target is not chmod-ed
    assert list(target.iterdir()) == []
    # a real folder of ours, too open: made 0700, and served
    link.unlink()
    link.mkdir(mode=0o755)
    link.chmod(0o755)
    with ControlServer(link / "control.sock", {}):
        assert stat.S_IMODE(link.stat().st_mode) == 0o700
        assert control_client.ping(link / "control.sock") == os.getpid()


def test_the_daemon_process_stops_with_the_message(tmp_path: Path,
                                                   isolated_env: dict[str, str]) -> None:
    import shutil
    import tempfile

    run = Path(tempfile.mkdtemp(prefix="r", dir="/tmp"))  # short: no $TMPDIR fallback
    try:
        target = run / "target"
        target.mkdir(mode=0o755)
        target.chmod(0o755)
        (run / "opencode-memoryd").symlink_to(target)
        (tmp_path / "none").mkdir()
        cfg = write_config(tmp_path / "c.toml", f'[opencode]\nsettle_seconds = 0\n'
                           f'data_dir = "{tmp_path / "none"}"\n[extraction]\nmode = "rules"\n')
        proc = subprocess.Popen(
            [sys.executable, "-m", "opencode_memoryd", "--config", str(cfg), "run"],
            env={**isolated_env, "XDG_RUNTIME_DIR": str(run)}, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            _, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode == 1
        assert f"{run / 'opencode-memoryd'} is a symbolic link" in err
        assert stat.S_IMODE(target.stat().st_mode) == 0o755 and list(target.iterdir()) == []
    finally:
        shutil.rmtree(run)


def test_doctor_fails_on_a_socket_folder_not_ours(tmp_path: Path,
                                                 isolated_env: dict[str, str]) -> None:
    import shutil
    import tempfile

    run = Path(tempfile.mkdtemp(prefix="r", dir="/tmp"))  # short: no $TMPDIR fallback
    try:
        (run / "elsewhere").mkdir(mode=0o700)
        (run / "opencode-memoryd").symlink_to(run / "elsewhere")
        (tmp_path / "none").mkdir()
        cfg = write_config(tmp_path / "c.toml", f'[opencode]\ndata_dir = "{tmp_path / "none"}"'
                           '\n[extraction]\nmode = "rules"\n')
        code, out = cli("--config", str(cfg), "doctor", "--json",
                        env={**isolated_env, "XDG_RUNTIME_DIR": str(run)})
        daemon = {c["name"]: c for c in json.loads(out)["checks"]}["daemon"]
        assert code == 1 and daemon["status"] == "fail"
        assert f"{run / 'opencode-memoryd'} is a symbolic link" in daemon["detail"]
        assert "XDG_RUNTIME_DIR" in daemon["fix"]
    finally:
        shutil.rmtree(run)


@pytest.mark.skipif(not ROOT, reason="making a folder of another uid needs root")
def test_the_daemon_refuses_a_tmp_folder_another_user_made_first(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil
    import tempfile

    # a state dir so deep that the socket goes to $TMPDIR/opencode-memoryd-<uid>/
    tmp = Path(tempfile.mkdtemp(prefix="t", dir="/tmp"))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    try:
        path = socket_path(tmp_path / ("deep" * 30), {})
        assert path.parent == tmp / f"opencode-memoryd-{os.getuid()}"
        path.parent.mkdir(mode=0o700)
        os.chown(path.parent, OTHER_UID, OTHER_UID)
        with pytest.raises(ControlError) as caught:
            ControlServer(path, {}).start()
        message = str(caught.value)
        assert str(path.parent) in message and f"uid {OTHER_UID}" in message
        assert "XDG_RUNTIME_DIR" in message
        assert list(path.parent.iterdir()) == []
    finally:
        shutil.rmtree(tmp)


# -- the server's own user, from the kernel -----------------------------------------------

SQUATTER = r"""
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(sys.argv[1])
s.listen(4)
print("ready", flush=True)
while True:
    conn, _ = s.accept()
    got = b""
    while True:
        chunk = conn.recv(65536)
        if not chunk:
            break
        got += chunk
    print(len(got), flush=True)
    conn.close()
"""


@pytest.mark.skipif(not ROOT or not hasattr(socket, "SO_PEERCRED"),
                    reason="a process of another uid needs root; SO_PEERCRED is Linux's")
def test_a_socket_served_by_another_user_is_refused_even_in_our_folder(
        tmp_path: Path) -> None:
    """The folder and the file look ours (a swap between the check and the connection):
    the kernel still tells who listens."""
    import tempfile

    theirs = Path(tempfile.mkdtemp(prefix="squatter-", dir="/tmp"))
    os.chown(theirs, OTHER_UID, OTHER_UID)
    proc = subprocess.Popen(["/usr/bin/python3", "-c", SQUATTER, str(theirs / "s.sock")],
                            user=OTHER_UID, group=OTHER_UID, stdout=subprocess.PIPE,
                            text=True, cwd="/")
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        ours = tmp_path / "run"
        ours.mkdir(mode=0o700)
        os.rename(theirs / "s.sock", ours / "control.sock")
        os.chown(ours / "control.sock", os.getuid(), os.getgid())
        for attempt in (lambda: control_client.ping(ours / "control.sock"),
                        lambda: ControlClient(ours / "control.sock").call("status", {})):
            with pytest.raises(SocketOwnerError, match=f"served by uid {OTHER_UID}"):
                attempt()
            assert proc.stdout.readline().strip() == "0"  # connected, and sent nothing
    finally:
        proc.kill()
        proc.wait()
        theirs.rmdir()
