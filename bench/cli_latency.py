"""Wall time of the commands a running daemon serves, against a bare interpreter.

In a throw-away HOME (rules mode, a copy of ``tests/fixtures/opencode-sample.db``) each
command runs ``--runs`` times in one of three forms (``--form``): ``c`` (the default),
``python -c`` with the console script's ``from opencode_memoryd.cli.main import main``;
``module``, ``python -m opencode_memoryd`` (adds the import of :mod:`runpy`); ``script``,
the installed ``opencode-memoryd`` console script itself (``--script PATH``, default the
one beside this interpreter; pip's script also imports :mod:`re`, which the command path
imports anyway, for :mod:`json`). A script of another environment (e.g. a non-editable
``pip install .`` into a scratch venv) runs its installed package, not this checkout
(``PYTHONPATH`` is left out), and ``python -c pass`` is timed with its interpreter. The
median wall time and CPU time (user + system) are printed with their ratios to ``python -c
pass`` on the same machine, with the load average (``/proc/loadavg``) before and after: ``--help``,
then ``search``, ``list``, ``status`` and ``context`` first with no daemon (goal: <= 1 s
each), then with ``opencode-memoryd run`` serving them (goal: <= 3x ``python -c pass``)
once the daemon is idle: its first pass done and the sessions that pass queued extracted
(else that extraction competes with the first command measured). The interpreter's own
start-up is in both. The package's bytecode is compiled first (``compileall``, into the
checkout's ``__pycache__`` folders), as an installed package has it: otherwise, under
``PYTHONDONTWRITEBYTECODE``, every run would compile the modules it imports again and
measure that instead.

Run: ``.venv/bin/python bench/cli_latency.py [--runs 15] [--form c|module|script]
[--script PATH]``. Asserts nothing about time.
"""

from __future__ import annotations

import argparse
import compileall
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _daemon_common import FIXTURE, ROOT, Sandbox, StateReader, poll

CONFIG = "[extraction]\nmode = \"rules\"\n"
COMMANDS: list[list[str]] = [["search", "pnpm"], ["list"], ["status"],
                             ["context", "--dir", "/nowhere/project"]]


def median_ms(argv: list[str], env: dict[str, str], runs: int) -> tuple[float, float, int]:
    """Median wall and CPU (user + system) milliseconds of running ``argv`` to completion,
    and the exit code of the last run that failed (0: none did). The CPU time depends
    less on what else the machine runs."""
    times, cpus, failed = [], [], 0
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        done = subprocess.run(argv, env=env, capture_output=True, check=False)
        times.append((time.perf_counter() - t) * 1000)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append((after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
                    * 1000)
        failed = done.returncode or failed
    return statistics.median(times), statistics.median(cpus), failed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--form", choices=("c", "module", "script"), default="c",
                    help="how each command is run (see the module's docstring)")
    ap.add_argument("--module", action="store_true", help="the same as --form module")
    ap.add_argument("--script", type=Path, default=None,
                    help="the console script of --form script (default: opencode-memoryd "
                         "beside this interpreter)")
    args = ap.parse_args(argv)
    form = "module" if args.module else args.form
    compileall.compile_dir(ROOT / "daemon" / "opencode_memoryd", quiet=1)
    root = Path(tempfile.mkdtemp(prefix="ocm-cli-"))
    try:
        box = Sandbox(root, CONFIG)
        shutil.copyfile(FIXTURE, box.opencode_db)
        env = box.full_env()
        python, cmd_env = sys.executable, env
        if form == "script":
            script = args.script or Path(sys.executable).with_name("opencode-memoryd")
            python = script.read_text().splitlines()[0].removeprefix("#!").strip()
            base = [str(script)]
            if Path(python).parent != Path(sys.executable).parent:  # another venv
                cmd_env = {k: v for k, v in env.items() if k != "PYTHONPATH"}
            print(f"measured: the console script {script} (its package, from "
                  f"{'this checkout' if cmd_env is env else 'its own environment'})")
        elif form == "module":
            base = [python, "-m", "opencode_memoryd"]
            print("measured: python -m opencode_memoryd (this checkout)")
        else:
            base = [python, "-c", "import sys; from opencode_memoryd.cli.main import main; "
                                  "sys.exit(main())"]
            print("measured: python -c 'from opencode_memoryd.cli.main import main' "
                  "(this checkout; the console script's import without its own `import re`)")
        base += ["--config", str(box.config)]
        print(f"load average {load_average()}")
        bare, bare_cpu, _ = median_ms([python, "-c", "pass"], env, args.runs)
        print(f"{python} -c pass: median {bare:.1f} ms, CPU {bare_cpu:.1f} ms "
              f"({args.runs} runs each; wall, its ratio, CPU, its ratio)")

        def row(label: str, cmd: list[str], goal: str) -> None:
            ms, cpu, failed = median_ms(base + cmd, cmd_env, args.runs)
            note = f"   FAILED (exit {failed}): not a measure" if failed else ""
            print(f"  {label:34} {ms:7.1f} ms {ms / bare:5.2f}x  CPU {cpu:6.1f} ms "
                  f"{cpu / bare_cpu:5.2f}x   ({goal}){note}")

        row("--help", ["--help"], "<= 3x")
        print("no daemon:")
        for cmd in COMMANDS:
            row(" ".join(cmd), cmd, "<= 1 s")
        daemon = box.start_daemon()
        try:
            daemon.wait_ready()
            reader = StateReader(box.state_db)
            try:
                poll(lambda: reader.queue_len() == 0, timeout=60, interval=0.1,
                     alive=daemon.check_alive)
            except TimeoutError:
                print("(the daemon's queue did not empty within 60 s: its extraction "
                      "runs while the commands are measured)")
            finally:
                reader.close()
            print("served by a running daemon:")
            for cmd in COMMANDS:
                row(" ".join(cmd), cmd, "<= 3x")
        finally:
            daemon.stop()
            daemon.kill()
        print(f"load average {load_average()}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


def load_average() -> str:
    """The 1-minute load average (``/proc/loadavg``)."""
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except OSError:
        return "?"


if __name__ == "__main__":
    raise SystemExit(main())
