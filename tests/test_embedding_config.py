"""``[embedding]``: model_path and the query and document prefixes reach the embedder."""

from __future__ import annotations

from pathlib import Path

import pytest

from opencode_memoryd.compose import App
from opencode_memoryd.config.loader import load_config
from opencode_memoryd.errors import ConfigError, UpstreamError
from opencode_memoryd.store.embedders import OpenAIEmbedder


def _app(tmp_path: Path, body: str) -> App:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {"HOME": str(home)}
    cfg = tmp_path / "config.toml"
    cfg.write_text(body, encoding="utf-8")
    return App(config=load_config(cfg, env), env=env, config_path=cfg)


def test_default_is_empty(tmp_path: Path) -> None:
    app = _app(tmp_path, '[embedding]\nprovider = "fastembed"\n')
    assert app.config.embedding.model_path == ""


def test_missing_folder_is_a_clear_error_with_home_expanded(tmp_path: Path) -> None:
    app = _app(tmp_path, '[embedding]\nprovider = "fastembed"\nmodel_path = "~/models/minilm"\n')
    with pytest.raises(UpstreamError) as ei:
        app.build_embedder()
    expected = str(tmp_path / "home" / "models" / "minilm")
    assert f"embedding.model_path {expected!r} is not a folder" in str(ei.value)
    assert ei.value.kind == "not_found" and not ei.value.retryable


def test_a_file_is_not_a_model_folder(tmp_path: Path) -> None:
    model = tmp_path / "model.onnx"
    model.write_bytes(b"onnx")
    app = _app(tmp_path, f'[embedding]\nprovider = "fastembed"\nmodel_path = "{model}"\n')
    with pytest.raises(UpstreamError, match="is not a folder"):
        app.build_embedder()


def test_an_existing_folder_passes_on_to_fastembed(tmp_path: Path) -> None:
    folder = tmp_path / "empty-model"
    folder.mkdir()
    app = _app(tmp_path, f'[embedding]\nprovider = "fastembed"\nmodel_path = "{folder}"\n')
    # an empty folder holds no model: fastembed refuses (or its absence, a config error),
    # not the path check
    with pytest.raises((UpstreamError, ConfigError)) as ei:
        app.build_embedder()
    assert "is not a folder" not in str(ei.value)
    assert "fastembed" in str(ei.value)


def test_relative_path_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as ei:
        _app(tmp_path, '[embedding]\nprovider = "fastembed"\nmodel_path = "models/minilm"\n')
    assert ei.value.problems == [
        "at `embedding.model_path`: must be an absolute path or start with ~"
    ]


def test_other_providers_ignore_it(tmp_path: Path) -> None:
    app = _app(tmp_path, '[embedding]\nprovider = "none"\nmodel_path = "/nowhere"\n')
    assert app.build_embedder() is None


def test_prefixes_reach_the_embedder(tmp_path: Path) -> None:
    app = _app(tmp_path, '[embedding]\nprovider = "openai"\nbase_url = "http://127.0.0.1:9/v1"\n'
                         'model = "e5"\ndimensions = 8\nquery_prefix = "query: "\n'
                         'document_prefix = "passage: "\n')
    emb = app.build_embedder()
    assert emb is not None
    assert emb.name == "openai:e5 (document prefix 'passage: ')"
    assert isinstance(emb, OpenAIEmbedder)
    assert (emb.query_prefix, emb.document_prefix) == ("query: ", "passage: ")


def test_an_overlong_prefix_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as ei:
        _app(tmp_path, f'[embedding]\nquery_prefix = "{"q" * 201}"\n')
    assert "embedding.query_prefix" in ei.value.problems[0]
