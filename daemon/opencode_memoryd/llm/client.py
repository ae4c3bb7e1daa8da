"""The openai SDK client, built one way for the chat and the embeddings adapters."""

from __future__ import annotations

from typing import Any

import openai

#: Sent as the API key when none is configured (local endpoints need none, the SDK needs one).
PLACEHOLDER_API_KEY = "not-needed"


def openai_client(*, base_url: str, api_key: str | None, timeout_seconds: float,
                  max_retries: int, http_client: Any = None) -> openai.OpenAI:
    """An ``openai.OpenAI`` client of an OpenAI-compatible endpoint.

    Args:
        base_url: the endpoint root (usually ending in ``/v1``).
        api_key: the key, or ``None`` for endpoints that need none
            (:data:`PLACEHOLDER_API_KEY` is sent then).
        timeout_seconds: the per-attempt timeout (connect, read, write), in seconds.
        max_retries: the SDK's own retries (0: the caller retries, or nobody does).
        http_client: an ``httpx2.Client`` to use instead of the SDK's own.
    """
    return openai.OpenAI(base_url=base_url, api_key=api_key or PLACEHOLDER_API_KEY,
                         timeout=timeout_seconds, max_retries=max_retries,
                         http_client=http_client)
