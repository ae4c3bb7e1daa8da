"""Tests of opencode_memoryd.install.service: rendering, install, uninstall, examples."""

from __future__ import annotations

import configparser
import os
import plistlib
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from opencode_memoryd.cli.examples import systemd_main
from opencode_memoryd.install.examples import render_examples
from opencode_memoryd.install.service import (
    LAUNCHD_LABEL,
    SYSTEMD_UNIT_NAME,
    default_executable,
    install,
    render_launchd_plist,
    render_systemd_unit,
    uninstall,
)

REPO_ROOT = Path(__file__).resolve().parent.parent
EXE = "/opt/memoryd/bin/opencode-memoryd"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """An environment whose HOME and XDG_CONFIG_HOME live in tmp_path."""
    home = tmp_path / "home"
    home.mkdir()
    return {"HOME": str(home), "XDG_CONFIG_HOME": str(home / "xdg-config"), "PATH": "/usr/bin"}


def parse_unit(text: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keys are case-sensitive
    parser.read_string(text)
    return parser


def all_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*"))


# --------------------------------------------------------------------------------------
# systemd unit
# --------------------------------------------------------------------------------------


def test_unit_has_the_supervision_contract(env: dict[str, str]) -> None:
    unit = parse_unit(render_systemd_unit(EXE, env=env))
    assert unit.sections() == ["Unit", "Service", "Install"]
    assert dict(unit["Unit"]) == {
        "Description": unit["Unit"]["Description"],
        "StartLimitIntervalSec": "300",
        "StartLimitBurst": "5",
    }
    service = unit["Service"]
    expected = {
        "Type": "notify",
        "NotifyAccess": "main",
        "ExecStart": f"{EXE} run",
        "Restart": "on-failure",
        "RestartSec": "5",
        "RestartPreventExitStatus": "78",
        "WatchdogSec": "60",
        "TimeoutStopSec": "20",
        "Nice": "10",
        "IOSchedulingClass": "idle",
        "NoNewPrivileges": "yes",
        "LockPersonality": "yes",
        "RestrictRealtime": "yes",
        "RestrictSUIDSGID": "yes",
        "SystemCallArchitectures": "native",
    }
    assert {k: service.get(k) for k in expected} == expected
    assert service["Environment"].split()[0] == "PYTHONUNBUFFERED=1"
    assert unit["Install"]["WantedBy"] == "default.target"


def test_unit_has_no_namespace_sandboxing(env: dict[str, str]) -> None:
    """These imply PrivateUsers= in a user unit and would hide ~/.local/share/opencode."""
    service = parse_unit(render_systemd_unit(EXE, env=env))["Service"]
    for key in ("ProtectHome", "PrivateTmp", "ProtectSystem", "PrivateUsers", "PrivateDevices",
                "ReadOnlyPaths", "InaccessiblePaths", "MemoryDenyWriteExecute"):
        assert key not in service


def test_unit_uses_no_duplicate_keys_and_comments_every_directive(env: dict[str, str]) -> None:
    lines = render_systemd_unit(EXE, env=env).splitlines()
    keys = []
    for i, line in enumerate(lines):
        if line and not line.startswith(("#", "[")):
            keys.append(line.split("=", 1)[0])
            assert lines[i - 1].startswith("#"), f"no comment above {line!r}"
    assert len(keys) == len(set(keys))


def test_unit_pins_locations_but_never_secrets(env: dict[str, str]) -> None:
    env = env | {
        "OPENCODE_MEMORYD_CONFIG": "/etc/memoryd dir/config.toml",
        "XDG_DATA_HOME": "relative/is/invalid",
        "OPENAI_API_KEY": "sk-secret-value",
    }
    text = render_systemd_unit(EXE, env=env)
    assert "sk-secret-value" not in text
    environment = parse_unit(text)["Service"]["Environment"]
    assert shlex.split(environment) == [
        "PYTHONUNBUFFERED=1",
        "OPENCODE_MEMORYD_CONFIG=/etc/memoryd dir/config.toml",
        f"XDG_CONFIG_HOME={env['XDG_CONFIG_HOME']}",
    ]


@pytest.mark.parametrize(
    ("exe", "exec_start"),
    [
        ("/usr/bin/python3 -m opencode_memoryd", "/usr/bin/python3 -m opencode_memoryd run"),
        ("'/opt/my tools/python' -m x", '"/opt/my tools/python" -m x run'),
        ("/opt/100%/$HOME/memoryd $HOME", "/opt/100%%/$HOME/memoryd $$HOME run"),
    ],
)
def test_exec_start_is_quoted_for_systemd(exe: str, exec_start: str) -> None:
    assert parse_unit(render_systemd_unit(exe, env={}))["Service"]["ExecStart"] == exec_start


@pytest.mark.parametrize("exe", ["", "   ", "opencode-memoryd", "bin/opencode-memoryd",
                                 "'/unterminated", "'/bin/x\tnew'", "'/bin/new\nline'"])
def test_bad_program_is_refused(exe: str) -> None:
    with pytest.raises(ValueError):
        render_systemd_unit(exe, env={})
    with pytest.raises(ValueError):
        render_launchd_plist(exe, home=Path("/home/u"))


def _verify(
    unit_text: str, tmp_path: Path, *, log_level: str = "warning"
) -> subprocess.CompletedProcess[str]:
    units = tmp_path / "units"
    units.mkdir(exist_ok=True)
    unit_file = units / SYSTEMD_UNIT_NAME
    unit_file.write_text(unit_text)
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700, exist_ok=True)
    home = tmp_path / "verify-home"
    home.mkdir(exist_ok=True)
    run_env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        # A user manager needs a runtime dir; without one verify cannot start at all.
        "XDG_RUNTIME_DIR": str(runtime),
        # Warnings (unknown keys, bad values) still show; info-level chatter does not.
        "SYSTEMD_LOG_LEVEL": log_level,
        "SYSTEMD_LOG_COLOR": "0",
    }
    result = subprocess.run(
        ["systemd-analyze", "--user", "verify", str(unit_file)],
        env=run_env, capture_output=True, text=True, timeout=60, check=False,
    )
    environmental = ("Failed to initialize manager", "Failed to lookup RuntimeDirectory",
                     "Failed to connect to bus")
    if result.returncode != 0 and SYSTEMD_UNIT_NAME not in result.stderr and any(
        e in result.stderr for e in environmental
    ):
        pytest.skip(f"systemd-analyze --user verify cannot run here: {result.stderr.strip()}")
    return result


needs_systemd_analyze = pytest.mark.skipif(
    shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed"
)


@needs_systemd_analyze
@pytest.mark.slow
def test_systemd_analyze_verify_accepts_the_unit(tmp_path: Path) -> None:
    # verify checks that ExecStart's program exists, so point it at a real one.
    exe = shlex.join([sys.executable, "-m", "opencode_memoryd"])
    result = _verify(render_systemd_unit(exe, env={}), tmp_path)
    assert result.returncode == 0, result.stderr
    # Unknown keys and unparsable values are only warnings: any of them is a failure here.
    assert SYSTEMD_UNIT_NAME not in result.stderr, result.stderr


@needs_systemd_analyze
@pytest.mark.slow
def test_systemd_analyze_reads_back_a_quoted_program_path(tmp_path: Path) -> None:
    odd = tmp_path / "dir with space 100% $x"
    odd.mkdir()
    (odd / "python").symlink_to(sys.executable)
    result = _verify(render_systemd_unit(shlex.join([str(odd / "python")]), env={}), tmp_path)
    assert result.returncode == 0, result.stderr
    assert SYSTEMD_UNIT_NAME not in result.stderr, result.stderr


@needs_systemd_analyze
@pytest.mark.slow
def test_systemd_analyze_reads_back_the_environment(tmp_path: Path) -> None:
    """systemd, not shlex, is the judge of the quoting of Environment= (``%`` and quotes)."""
    env = {"OPENCODE_MEMORYD_CONFIG": '~/a "b" 100% $HOME', "XDG_STATE_HOME": "/s\\t"}
    unit = render_systemd_unit(shlex.join([sys.executable]), env=env)
    result = _verify(unit, tmp_path, log_level="debug")
    assert result.returncode == 0, result.stderr
    output = result.stdout + result.stderr
    if f"-> Unit {SYSTEMD_UNIT_NAME}:" not in output:
        pytest.skip("this systemd-analyze prints no unit dump at debug level")
    dumped = [line.strip().removeprefix("Environment: ")
              for line in output.splitlines() if line.strip().startswith("Environment: ")]
    assert dumped == [
        "PYTHONUNBUFFERED=1",
        'OPENCODE_MEMORYD_CONFIG=~/a "b" 100% $HOME',
        "XDG_STATE_HOME=/s\\t",
    ]


@needs_systemd_analyze
@pytest.mark.slow
def test_systemd_analyze_catches_unit_errors(tmp_path: Path) -> None:
    """The checks above would fail on a real unit error."""
    missing = _verify(render_systemd_unit(str(tmp_path / "missing"), env={}), tmp_path)
    assert missing.returncode != 0
    unit = render_systemd_unit(shlex.join([sys.executable]), env={})
    bogus = _verify(unit.replace("Nice=10", "Nice=10\nNoSuchKey=1"), tmp_path)
    assert SYSTEMD_UNIT_NAME in bogus.stderr


# --------------------------------------------------------------------------------------
# launchd plist
# --------------------------------------------------------------------------------------


def test_plist_has_the_supervision_contract() -> None:
    home = Path("/home/some user")
    exe = "'/opt/a & b/python' -m opencode_memoryd"
    plist = plistlib.loads(render_launchd_plist(exe, home=home).encode())
    logs = "/home/some user/Library/Logs/opencode-memoryd"
    assert plist == {
        "Label": LAUNCHD_LABEL,
        "ProgramArguments": ["/opt/a & b/python", "-m", "opencode_memoryd", "run"],
        "RunAtLoad": True,
        "KeepAlive": {"SuccessfulExit": False},
        "ThrottleInterval": 30,
        "ExitTimeOut": 20,
        "ProcessType": "Background",
        "LowPriorityIO": True,
        "Nice": 10,
        "StandardOutPath": f"{logs}/stdout.log",
        "StandardErrorPath": f"{logs}/stderr.log",
        "EnvironmentVariables": {
            "PATH": "/opt/a & b:/usr/bin:/bin:/usr/sbin:/sbin",
            "PYTHONUNBUFFERED": "1",
        },
    }


def test_plist_pins_locations_but_never_secrets() -> None:
    env = {"XDG_STATE_HOME": "/data/state", "OPENCODE_DB": "work.db", "OPENAI_API_KEY": "sk-x"}
    text = render_launchd_plist(EXE, home=Path("/h"), env=env)
    assert "sk-x" not in text
    assert plistlib.loads(text.encode())["EnvironmentVariables"] == {
        "PATH": "/opt/memoryd/bin:/usr/bin:/bin:/usr/sbin:/sbin",
        "PYTHONUNBUFFERED": "1",
        "OPENCODE_DB": "work.db",
        "XDG_STATE_HOME": "/data/state",
    }


# --------------------------------------------------------------------------------------
# default_executable
# --------------------------------------------------------------------------------------


def test_default_executable_prefers_the_console_script(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bindir = tmp_path / "venv dir" / "bin"
    bindir.mkdir(parents=True)
    python = bindir / "python"
    python.touch()
    monkeypatch.setattr(sys, "executable", str(python))
    assert shlex.split(default_executable()) == [str(python), "-m", "opencode_memoryd"]
    script = bindir / "opencode-memoryd"
    script.touch(mode=0o755)
    assert shlex.split(default_executable()) == [str(script)]


def test_default_executable_is_absolute_and_renders() -> None:
    argv = shlex.split(default_executable())
    assert os.path.isabs(argv[0])
    plist = plistlib.loads(render_launchd_plist(default_executable(), home=Path("/h")).encode())
    assert plist["ProgramArguments"] == [*argv, "run"]


# --------------------------------------------------------------------------------------
# install / uninstall
# --------------------------------------------------------------------------------------


def test_dry_run_writes_nothing(env: dict[str, str], tmp_path: Path) -> None:
    before = all_files(tmp_path)
    for system in ("linux", "darwin"):
        result = install(system=system, dry_run=True, env=env, exe=EXE)
        assert not result.written
        assert not result.path.exists()
        assert f"{EXE} run" in result.content or f"<string>{EXE}</string>" in result.content
    assert all_files(tmp_path) == before


def test_install_linux_writes_the_unit_under_xdg_config(env: dict[str, str]) -> None:
    result = install(system="linux", env=env, exe=EXE)
    assert result.path == Path(env["XDG_CONFIG_HOME"]) / "systemd/user/opencode-memoryd.service"
    assert result.written
    assert result.path.read_text() == result.content == render_systemd_unit(EXE, env=env)
    assert result.path.stat().st_mode & 0o777 == 0o644
    assert result.enable_command == (
        "systemctl --user daemon-reload && systemctl --user enable --now opencode-memoryd.service"
    )


def test_install_linux_defaults_to_home_config(env: dict[str, str]) -> None:
    del env["XDG_CONFIG_HOME"]
    result = install(system="linux", env=env, exe=EXE)
    assert result.path == Path(env["HOME"]) / ".config/systemd/user/opencode-memoryd.service"
    assert result.path.is_file()


def test_install_darwin_writes_the_agent_and_the_log_folder(env: dict[str, str]) -> None:
    home = Path(env["HOME"])
    result = install(system="darwin", env=env, exe=EXE)
    assert result.path == home / "Library/LaunchAgents" / f"{LAUNCHD_LABEL}.plist"
    assert plistlib.loads(result.path.read_bytes())["Label"] == LAUNCHD_LABEL
    assert (home / "Library/Logs/opencode-memoryd").is_dir()
    assert result.enable_command == f"launchctl bootstrap gui/{os.getuid()} {result.path}"


def test_install_quotes_the_plist_path_in_the_command(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path / "my home")}
    result = install(system="darwin", env=env, exe=EXE, dry_run=True)
    assert shlex.split(result.enable_command)[-1] == str(result.path)


@pytest.mark.parametrize("system", ["linux", "darwin"])
def test_install_twice_is_idempotent(env: dict[str, str], system: str) -> None:
    first = install(system=system, env=env, exe=EXE)
    first.path.write_text("edited by hand\n")
    second = install(system=system, env=env, exe=EXE)
    assert second == first
    assert second.path.read_text() == first.content
    assert [p.name for p in second.path.parent.iterdir()] == [second.path.name]  # no temp files


@pytest.mark.parametrize("system", ["linux", "darwin"])
def test_uninstall_removes_the_file(env: dict[str, str], system: str) -> None:
    installed = install(system=system, env=env, exe=EXE)
    result = uninstall(system=system, env=env)
    assert result.path == installed.path
    assert result.removed
    assert not installed.path.exists()
    assert installed.path.parent.is_dir()  # only the file goes
    assert not uninstall(system=system, env=env).removed


def test_disable_commands(env: dict[str, str]) -> None:
    assert uninstall(system="linux", env=env).disable_command == (
        "systemctl --user disable --now opencode-memoryd.service; systemctl --user daemon-reload"
    )
    assert uninstall(system="darwin", env=env).disable_command == (
        f"launchctl bootout gui/{os.getuid()}/{LAUNCHD_LABEL}"
    )


def test_default_system_follows_the_platform(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "platform", "darwin")
    assert install(env=env, exe=EXE, dry_run=True).path.suffix == ".plist"
    monkeypatch.setattr(sys, "platform", "linux")
    assert install(env=env, exe=EXE, dry_run=True).path.suffix == ".service"
    monkeypatch.setattr(sys, "platform", "win32")
    with pytest.raises(ValueError, match="win32"):
        install(env=env, exe=EXE, dry_run=True)
    with pytest.raises(ValueError, match="freebsd"):
        uninstall(system="freebsd", env=env)


# --------------------------------------------------------------------------------------
# Examples in the repository
# --------------------------------------------------------------------------------------


def test_examples_on_disk_are_up_to_date() -> None:
    examples = render_examples()
    assert set(examples) == {SYSTEMD_UNIT_NAME, f"{LAUNCHD_LABEL}.plist"}
    for name, text in examples.items():
        assert (REPO_ROOT / "systemd" / name).read_text() == text, (
            f"systemd/{name} is out of date; regenerate it with "
            "python -m opencode_memoryd.cli.examples systemd systemd"
        )
    assert systemd_main(["--check", str(REPO_ROOT / "systemd")]) == 0


def test_examples_have_no_machine_specific_paths() -> None:
    examples = render_examples()
    unit = parse_unit(examples[SYSTEMD_UNIT_NAME])
    assert unit["Service"]["ExecStart"] == "%h/.local/bin/opencode-memoryd run"
    plist = plistlib.loads(examples[f"{LAUNCHD_LABEL}.plist"].encode())
    assert plist["ProgramArguments"][0].startswith("/var/empty/example-home/")
    for text in examples.values():
        assert "/Users/" not in text
        assert "/home/" not in text


def test_example_check_reports_a_stale_file(tmp_path: Path) -> None:
    assert systemd_main([str(tmp_path)]) == 0
    (tmp_path / SYSTEMD_UNIT_NAME).write_text("stale\n")
    assert systemd_main(["--check", str(tmp_path)]) == 1
