"""Every numeric config key has bounds: an absurd value is exit 78 naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from conftest import cli
from opencode_memoryd.config.schema import Config


def _numeric_keys() -> list[tuple[str, str, type]]:
    """(section, key, int|float) of every number in the schema, found by introspection."""
    keys = []
    for section, field in Config.model_fields.items():
        model = field.annotation
        assert isinstance(model, type) and issubclass(model, BaseModel)
        for key, f in model.model_fields.items():
            if f.annotation in (int, float):
                keys.append((section, key, f.annotation))
    return keys


NUMERIC = _numeric_keys()


def test_the_schema_has_numbers_to_check() -> None:
    assert len(NUMERIC) >= 30
    assert ("daemon", "sweep_interval_seconds", float) in NUMERIC


@pytest.mark.parametrize(("section", "key", "kind"), NUMERIC,
                         ids=[f"{s}.{k}" for s, k, _ in NUMERIC])
def test_an_absurd_value_is_a_config_error(section: str, key: str, kind: type,
                                           tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    absurd = "1e308" if kind is float else str(2**63 - 1)  # the largest TOML integer
    cfg = tmp_path / "absurd.toml"
    cfg.write_text(f"[{section}]\n{key} = {absurd}\n")
    assert cli("--config", str(cfg), "config", "show")[0] == 78
    assert f"`{section}.{key}`" in capsys.readouterr().err
    # and its negative too (every number has a lower bound)
    cfg.write_text(f"[{section}]\n{key} = -{absurd}\n")
    assert cli("--config", str(cfg), "config", "show")[0] == 78
    assert f"`{section}.{key}`" in capsys.readouterr().err


def test_the_defaults_are_within_the_bounds(tmp_path: Path) -> None:
    cfg = tmp_path / "defaults.toml"
    defaults = Config()
    lines: dict[str, list[str]] = {}
    for s, k, _ in NUMERIC:
        lines.setdefault(s, []).append(f"{k} = {getattr(getattr(defaults, s), k)!r}")
    cfg.write_text("".join(f"[{s}]\n" + "\n".join(v) + "\n" for s, v in lines.items()))
    assert cli("--config", str(cfg), "config", "show")[0] == 0
