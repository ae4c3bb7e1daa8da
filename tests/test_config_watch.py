"""The daemon's watch on its config file: a valid edit asks for a restart in place, an
invalid one is refused once with its reason, and editing the file back clears it (a real
file, the real loader)."""

from __future__ import annotations

from pathlib import Path

from opencode_memoryd.config.loader import load_config
from opencode_memoryd.serve.runtime.reload import CHECK_INTERVAL_SECONDS, ConfigWatch, store_change

GOOD = '[extraction]\nmode = "rules"\n'


def test_a_valid_edit_asks_for_a_restart_and_an_invalid_one_is_refused(
        tmp_path: Path) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text(GOOD)
    watch = ConfigWatch(cfg, {"HOME": str(tmp_path)})
    assert not watch.changed and not watch.check() and watch.error is None
    cfg.write_text(GOOD + "[web]\nport = 70000\n")
    assert watch.changed
    assert not watch.check()
    assert watch.error is not None and "web.port" in watch.error
    assert not watch.check()  # the same bad version is not looked at again
    cfg.write_text(GOOD)  # edited back: nothing to take up, nothing wrong
    assert not watch.check() and watch.error is None and not watch.changed
    cfg.write_text(GOOD + "[web]\nenabled = true\n")
    assert watch.check() and watch.error is None


def test_a_removed_file_is_refused(tmp_path: Path) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text(GOOD)
    watch = ConfigWatch(cfg, {"HOME": str(tmp_path)})
    cfg.unlink()
    assert not watch.check()
    assert watch.error is not None and "gone" in watch.error


def test_the_main_loop_looks_every_check_interval() -> None:
    now = [100.0]
    watch = ConfigWatch(None, {}, monotonic=lambda: now[0])
    assert watch.due() and not watch.due()
    now[0] += CHECK_INTERVAL_SECONDS
    assert watch.due()


def test_a_change_of_embedder_or_store_is_not_taken_up_by_itself(tmp_path: Path) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text(GOOD)
    env = {"HOME": str(tmp_path)}
    watch = ConfigWatch(cfg, env, refuse=store_change(load_config(cfg, env)))
    cfg.write_text(GOOD + '[embedding]\nprovider = "none"\n[web]\nenabled = true\n')
    assert not watch.check()
    assert watch.error is not None and "[embedding]" in watch.error and "reembed" in watch.error
    cfg.write_text(GOOD + "[web]\nenabled = true\n")  # the same store: taken up
    assert watch.check() and watch.error is None
