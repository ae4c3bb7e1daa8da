"""Tests of opencode_memoryd.config: loading, errors, paths, example file, init."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from pydantic import ValidationError

from opencode_memoryd.cli.examples import config_main as example_main
from opencode_memoryd.config.example import TUNING_KEYS, render_example, write_example
from opencode_memoryd.config.loader import apply_overrides, init_config, load_config, parse_config
from opencode_memoryd.config.paths import (
    config_path,
    configured_db_paths,
    default_config_path,
    opencode_data_dir,
    state_dir,
    store_dir,
)
from opencode_memoryd.config.schema import Config
from opencode_memoryd.errors import ConfigError

REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h


@pytest.fixture
def env(home: Path) -> dict[str, str]:
    """An environment with only HOME set (no XDG variables, no config variable)."""
    return {"HOME": str(home)}


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def problems_of(exc_info: pytest.ExceptionInfo[ConfigError]) -> list[str]:
    return exc_info.value.problems


# --- loading ------------------------------------------------------------------------------


def test_defaults_when_no_file(env: dict[str, str]) -> None:
    cfg = load_config(env=env)
    assert cfg == Config()
    assert cfg.llm.model == "gpt-4o-mini"
    assert cfg.opencode.db_paths == ()
    assert cfg.opencode.include_archived is True
    assert cfg.extraction.mode == "auto"
    assert cfg.extraction_mode == "rules"
    assert cfg.log.file_max_bytes == 10485760


def test_xdg_default_file_is_read(env: dict[str, str], home: Path) -> None:
    write(home / ".config/opencode-memoryd/config.toml", '[log]\nlevel = "debug"\n')
    assert load_config(env=env).log.level == "debug"


def test_env_var_overrides_xdg_file(env: dict[str, str], home: Path, tmp_path: Path) -> None:
    write(home / ".config/opencode-memoryd/config.toml", '[log]\nlevel = "debug"\n')
    other = write(tmp_path / "other.toml", '[log]\nlevel = "error"\n')
    env["OPENCODE_MEMORYD_CONFIG"] = str(other)
    assert config_path(env) == other
    assert load_config(env=env).log.level == "error"


def test_env_var_expands_tilde_with_env_home(env: dict[str, str], home: Path) -> None:
    write(home / "cfg/memoryd.toml", '[qdrant]\ncollection = "mine"\n')
    env["OPENCODE_MEMORYD_CONFIG"] = "~/cfg/memoryd.toml"
    assert config_path(env) == home / "cfg/memoryd.toml"
    assert load_config(env=env).qdrant.collection == "mine"


def test_empty_env_var_counts_as_unset(env: dict[str, str], home: Path) -> None:
    env["OPENCODE_MEMORYD_CONFIG"] = ""
    assert config_path(env) == home / ".config/opencode-memoryd/config.toml"
    assert load_config(env=env) == Config()


def test_explicit_path_beats_env_var(env: dict[str, str], tmp_path: Path) -> None:
    env["OPENCODE_MEMORYD_CONFIG"] = str(write(tmp_path / "env.toml", '[log]\nlevel = "error"\n'))
    explicit = write(tmp_path / "cli.toml", '[log]\nlevel = "warning"\n')
    assert load_config(explicit, env=env).log.level == "warning"


def test_file_values_layer_over_defaults(env: dict[str, str], tmp_path: Path) -> None:
    path = write(
        tmp_path / "c.toml",
        """
[opencode]
db_paths = ["/data/opencode.db", "~/other.db"]
settle_seconds = 5

[llm]
base_url = "http://127.0.0.1:11434/v1"
timeout_seconds = 90
""",
    )
    cfg = load_config(path, env=env)
    assert cfg.opencode.db_paths == ("/data/opencode.db", "~/other.db")
    assert cfg.opencode.settle_seconds == 5.0 and isinstance(cfg.opencode.settle_seconds, float)
    assert cfg.llm.timeout_seconds == 90.0
    assert cfg.llm.model == "gpt-4o-mini"  # untouched key keeps its default
    assert cfg.extraction_mode == "llm"


def test_missing_explicit_path_is_an_error(env: dict[str, str], tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    with pytest.raises(ConfigError) as ei:
        load_config(missing, env=env)
    assert ei.value.path == str(missing)
    assert problems_of(ei) == ["file not found"]


def test_missing_env_var_path_is_an_error(env: dict[str, str], tmp_path: Path) -> None:
    env["OPENCODE_MEMORYD_CONFIG"] = str(tmp_path / "nope.toml")
    with pytest.raises(ConfigError) as ei:
        load_config(env=env)
    assert "OPENCODE_MEMORYD_CONFIG" in problems_of(ei)[0]


def test_directory_instead_of_file(env: dict[str, str], tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as ei:
        load_config(tmp_path, env=env)
    assert "directory" in problems_of(ei)[0]


def test_empty_file_gives_defaults(env: dict[str, str], tmp_path: Path) -> None:
    assert load_config(write(tmp_path / "c.toml", ""), env=env) == Config()


def test_config_is_frozen_and_hashable() -> None:
    cfg = Config()
    with pytest.raises(ValidationError):
        cfg.llm.model = "other"
    assert hash(cfg) == hash(Config())


# --- errors -------------------------------------------------------------------------------


def test_unknown_key_reported_with_path(env: dict[str, str], tmp_path: Path) -> None:
    path = write(tmp_path / "c.toml", '[llm]\nmodle = "x"\n')
    with pytest.raises(ConfigError) as ei:
        load_config(path, env=env)
    [line] = problems_of(ei)
    assert line.startswith("at `llm.modle`: unknown key")
    assert "`model`" in line  # suggestion
    assert str(path) in str(ei.value)


def test_unknown_section_reported(env: dict[str, str], tmp_path: Path) -> None:
    path = write(tmp_path / "c.toml", "[deamon]\nx = 1\n")
    with pytest.raises(ConfigError) as ei:
        load_config(path, env=env)
    assert problems_of(ei) == ["at `deamon`: unknown section; did you mean `daemon`?"]


def test_type_error_reported_with_path(env: dict[str, str], tmp_path: Path) -> None:
    path = write(tmp_path / "c.toml", '[llm]\ntimeout_seconds = "fast"\n')
    with pytest.raises(ConfigError) as ei:
        load_config(path, env=env)
    assert problems_of(ei) == ["at `llm.timeout_seconds`: Input should be a valid number"]


def test_no_lax_coercion_of_toml_types(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as ei:
        parse_config({"opencode": {"include_archived": "yes", "busy_timeout_ms": True}})
    assert problems_of(ei) == [
        "at `opencode.include_archived`: Input should be a valid boolean",
        "at `opencode.busy_timeout_ms`: Input should be a valid integer",
    ]


def test_range_error_message() -> None:
    with pytest.raises(ConfigError) as ei:
        parse_config({"llm": {"timeout_seconds": 0}})
    assert problems_of(ei) == ["at `llm.timeout_seconds`: Input should be greater than 0"]


def test_several_errors_reported_at_once(env: dict[str, str], tmp_path: Path) -> None:
    path = write(
        tmp_path / "c.toml",
        """
[opencode]
db_paths = ["relative.db", 3]
abandoned_turn_seconds = 0

[extraction]
mode = "magic"
max_memories_per_chunk = 101

[llm]
modle = "x"
api_key_env = "sk-abc123"

[dedup]
near_duplicate_similarity = 1.5

[log]
level = "verbose"
""",
    )
    with pytest.raises(ConfigError) as ei:
        load_config(path, env=env)
    problems = problems_of(ei)
    keys = [p.split("`")[1] for p in problems]
    assert keys == [
        "opencode.db_paths[0]",
        "opencode.db_paths[1]",
        "opencode.abandoned_turn_seconds",
        "extraction.mode",
        "extraction.max_memories_per_chunk",
        "llm.api_key_env",
        "llm.modle",
        "dedup.near_duplicate_similarity",
        "log.level",
    ]
    assert all(p.startswith("at `") for p in problems)
    assert "must be an absolute path or start with ~" in problems[0]
    assert "Input should be 'auto', 'llm' or 'rules'" in problems[3]
    assert "not the secret itself" in problems[5]
    # every problem is in the exception message, one per line
    assert all(p in str(ei.value) for p in problems)


def test_section_that_is_not_a_table() -> None:
    with pytest.raises(ConfigError) as ei:
        parse_config({"llm": 5})
    assert problems_of(ei) == ["at `llm`: expected a table"]


def test_toml_syntax_error_has_line_and_column(env: dict[str, str], tmp_path: Path) -> None:
    path = write(tmp_path / "c.toml", '[llm]\nmodel = "x"\ntimeout_seconds 5\n')
    with pytest.raises(ConfigError) as ei:
        load_config(path, env=env)
    [line] = problems_of(ei)
    assert line.startswith("at line 3, column 17: TOML syntax error")
    assert ei.value.path == str(path)


def test_non_utf8_file(env: dict[str, str], tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_bytes(b'[llm]\nmodel = "\xff"\n')
    with pytest.raises(ConfigError) as ei:
        load_config(path, env=env)
    assert "UTF-8" in problems_of(ei)[0]


def test_cross_field_embedding_errors_have_paths(env: dict[str, str], tmp_path: Path) -> None:
    path = write(tmp_path / "c.toml", '[embedding]\nprovider = "openai"\n')
    with pytest.raises(ConfigError) as ei:
        load_config(path, env=env)
    assert problems_of(ei) == [
        'at `embedding.base_url`: required when provider is "openai"',
        'at `embedding.model`: required when provider is "openai"',
    ]


def test_cross_field_errors_reported_with_other_errors() -> None:
    with pytest.raises(ConfigError) as ei:
        parse_config(
            {
                "embedding": {"provider": "openai", "model": "nomic-embed-text"},
                "log": {"file_backups": -1},
            }
        )
    assert problems_of(ei) == [
        'at `embedding.base_url`: required when provider is "openai"',
        "at `log.file_backups`: Input should be greater than or equal to 0",
    ]


def test_cross_section_error_has_path() -> None:
    with pytest.raises(ConfigError) as ei:
        parse_config({"extraction": {"mode": "llm"}})
    assert problems_of(ei) == ['at `llm.base_url`: required when extraction.mode is "llm"']


def test_valid_openai_embedding() -> None:
    cfg = parse_config(
        {
            "embedding": {
                "provider": "openai",
                "base_url": "http://127.0.0.1:11434/v1",
                "model": "nomic-embed-text",
            }
        }
    )
    assert cfg.embedding.provider == "openai"


def test_bad_url() -> None:
    with pytest.raises(ConfigError) as ei:
        parse_config({"llm": {"base_url": "127.0.0.1:11434"}, "qdrant": {"url": "ftp://x"}})
    assert problems_of(ei) == [
        "at `llm.base_url`: must be an http:// or https:// URL",
        "at `qdrant.url`: must be an http:// or https:// URL",
    ]


# --- overrides ----------------------------------------------------------------------------


def test_apply_overrides() -> None:
    cfg = apply_overrides(Config(), {"log.level": "debug", "opencode.db_paths": ["/x.db"]})
    assert cfg.log.level == "debug"
    assert cfg.opencode.db_paths == ("/x.db",)
    assert Config().log.level == "info"


def test_apply_overrides_errors() -> None:
    with pytest.raises(ConfigError) as ei:
        apply_overrides(Config(), {"log.levle": "debug"})
    assert problems_of(ei) == ["at `log.levle`: unknown key"]
    with pytest.raises(ConfigError) as ei:
        apply_overrides(Config(), {"log.level": "loud"})
    assert problems_of(ei)[0].startswith("at `log.level`: ")


# --- example file -------------------------------------------------------------------------


def test_example_file_is_up_to_date() -> None:
    text = (REPO_ROOT / "config.example.toml").read_text(encoding="utf-8")
    assert text == render_example(), (
        "config.example.toml is stale: "
        "python -m opencode_memoryd.cli.examples config config.example.toml"
    )


def test_example_round_trips_to_defaults(env: dict[str, str], tmp_path: Path) -> None:
    text = render_example()
    parsed = tomllib.loads(text)
    defaults = Config().model_dump(mode="json")
    shown = {section: {k: v for k, v in keys.items() if f"{section}.{k}" not in TUNING_KEYS}
             for section, keys in defaults.items()}
    # json.dumps keeps 60 and 60.0 apart, so value types must match too.
    assert json.dumps(parsed, sort_keys=True) == json.dumps(shown, sort_keys=True)
    assert load_config(write(tmp_path / "c.toml", text), env=env) == Config()


def test_example_documents_every_key_within_90_columns() -> None:
    text = render_example()
    lines = text.splitlines()
    assert all(len(line) <= 90 for line in lines)
    for section, sfield in Config.model_fields.items():
        assert sfield.description, section
        assert f"[{section}]" in lines
        start = lines.index(f"[{section}]")
        end = next((n for n in range(start + 1, len(lines)) if lines[n].startswith("[")),
                   len(lines))
        named = " ".join(x for x in lines[start:end] if x.startswith("# "))
        for key, kfield in sfield.annotation.model_fields.items():  # type: ignore[union-attr]
            assert kfield.description, f"{section}.{key}"
            if f"{section}.{key}" in TUNING_KEYS:  # named at the end of its section
                assert "# Tuning: " in named and key in named.split("# Tuning: ")[-1]
                continue
            i = next(n for n in range(start, end) if lines[n].startswith(f"{key} = "))
            assert lines[i - 1].startswith("# "), f"{section}.{key} has no comment"


def test_every_tuning_key_is_a_key() -> None:
    keys = {f"{s}.{k}" for s, f in Config.model_fields.items()
            for k in f.annotation.model_fields}  # type: ignore[union-attr]
    assert keys >= TUNING_KEYS


def test_write_example_and_main(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "example.toml"
    write_example(target)
    assert target.read_text(encoding="utf-8") == render_example()
    assert example_main(["--check", str(target)]) == 0
    target.write_text("stale\n", encoding="utf-8")
    assert example_main(["--check", str(target)]) == 1
    assert example_main([str(target)]) == 0
    assert target.read_text(encoding="utf-8") == render_example()
    capsys.readouterr()
    assert example_main([]) == 0
    assert capsys.readouterr().out == render_example()


# --- init ---------------------------------------------------------------------------------


def test_init_writes_0600_and_creates_parents(tmp_path: Path, env: dict[str, str]) -> None:
    target = tmp_path / "a" / "b" / "config.toml"
    assert init_config(target) == target
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert target.read_text(encoding="utf-8") == render_example()
    assert load_config(target, env=env) == Config()


def test_init_refuses_to_overwrite(tmp_path: Path) -> None:
    target = write(tmp_path / "config.toml", '[log]\nlevel = "debug"\n')
    target.chmod(0o644)
    with pytest.raises(FileExistsError, match="already exists"):
        init_config(target)
    assert target.read_text(encoding="utf-8") == '[log]\nlevel = "debug"\n'
    assert stat.S_IMODE(target.stat().st_mode) == 0o644


def test_init_refuses_dangling_symlink(tmp_path: Path) -> None:
    link = tmp_path / "config.toml"
    link.symlink_to(tmp_path / "elsewhere.toml")
    with pytest.raises(FileExistsError):
        init_config(link)
    assert not (tmp_path / "elsewhere.toml").exists()


# --- paths --------------------------------------------------------------------------------


def test_xdg_paths_without_env_vars(env: dict[str, str], home: Path) -> None:
    cfg = Config()
    assert default_config_path(env) == home / ".config/opencode-memoryd/config.toml"
    assert config_path(env) == home / ".config/opencode-memoryd/config.toml"
    assert state_dir(cfg, env) == home / ".local/state/opencode-memoryd"
    assert store_dir(cfg, env) == home / ".local/share/opencode-memoryd/qdrant"
    assert opencode_data_dir(cfg, env) == home / ".local/share/opencode"


def test_xdg_paths_with_env_vars(env: dict[str, str], tmp_path: Path) -> None:
    env.update(
        XDG_CONFIG_HOME=str(tmp_path / "cfg"),
        XDG_DATA_HOME=str(tmp_path / "data"),
        XDG_STATE_HOME=str(tmp_path / "state"),
    )
    cfg = Config()
    assert config_path(env) == tmp_path / "cfg/opencode-memoryd/config.toml"
    assert state_dir(cfg, env) == tmp_path / "state/opencode-memoryd"
    assert store_dir(cfg, env) == tmp_path / "data/opencode-memoryd/qdrant"
    assert opencode_data_dir(cfg, env) == tmp_path / "data/opencode"


def test_xdg_empty_or_relative_values_count_as_unset(env: dict[str, str], home: Path) -> None:
    env.update(XDG_CONFIG_HOME="", XDG_DATA_HOME="relative/data", XDG_STATE_HOME="")
    cfg = Config()
    assert config_path(env) == home / ".config/opencode-memoryd/config.toml"
    assert store_dir(cfg, env) == home / ".local/share/opencode-memoryd/qdrant"
    assert state_dir(cfg, env) == home / ".local/state/opencode-memoryd"


def test_configured_paths_win_and_expand_tilde(env: dict[str, str], home: Path) -> None:
    env["XDG_DATA_HOME"] = "/ignored/data"
    cfg = parse_config(
        {
            "opencode": {"data_dir": "~/oc", "db_paths": ["~/a.db", "/b.db"]},
            "qdrant": {"path": "/srv/qdrant"},
            "state": {"dir": "~"},
        }
    )
    assert opencode_data_dir(cfg, env) == home / "oc"
    assert configured_db_paths(cfg, env) == [home / "a.db", Path("/b.db")]
    assert configured_db_paths(Config(), env) == []
    assert store_dir(cfg, env) == Path("/srv/qdrant")
    assert state_dir(cfg, env) == home


def test_paths_module_loads_no_schema(isolated_env: dict[str, str]) -> None:
    """A thin client finds its paths without importing pydantic or the schema."""
    probe = ("import sys, opencode_memoryd.config.paths; "
             "print(sorted(m for m in sys.modules if m.split('.')[0] == 'pydantic' "
             "or m == 'opencode_memoryd.config.schema'))")
    env = {**isolated_env, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, "-c", probe], env=env, check=True,
                         capture_output=True, text=True).stdout
    assert out.strip() == "[]"


def test_qdrant_url_and_path_conflict() -> None:
    with pytest.raises(ConfigError) as ei:
        parse_config({"qdrant": {"url": "http://localhost:6333", "path": "/srv/q"}})
    assert problems_of(ei)[0].startswith("at `qdrant.path`: ")
