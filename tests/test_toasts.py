"""The plugin's toasts' switch: ``[context] toasts`` travels in the daemon's answer for a
session's block (the plugin has no config of its own), on by default; the answer is the
same block either way."""

from __future__ import annotations

from pathlib import Path

from opencode_memoryd.usecases.context_cache import ContextCache
from test_context import ACME, MAIN, SEED
from test_recall import make_app


def test_the_block_answer_carries_the_toasts_switch(tmp_path: Path, sample_db: Path,
                                                    isolated_env: dict[str, str]) -> None:
    answers = []
    for extra in ("", "toasts = false"):
        app = make_app(tmp_path, sample_db, isolated_env, extra)
        store = app.open_store()
        cache = ContextCache(app, store)
        try:
            store.upsert(SEED)
            first = cache.context(directory=ACME, session=MAIN, project=None, query=None)
            again = cache.context(directory=ACME, session=MAIN, project=None, query=None)
            assert again == first  # kept, switch and all
            answers.append(first)
        finally:
            cache.close()
            store.close()
    on, off = answers
    assert on["toasts"] is True and off["toasts"] is False
    assert on["entries"] == off["entries"] == 2 and on["text"] == off["text"]
