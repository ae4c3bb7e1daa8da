"""The LLM room: everything that speaks to an OpenAI-compatible HTTP API.

* :mod:`~opencode_memoryd.llm.client`: the openai SDK client both adapters use (the
  chat client here, the embeddings adapter in ``store/``);
* :mod:`~opencode_memoryd.llm.errors`: SDK errors mapped to
  :class:`~opencode_memoryd.errors.UpstreamError`, ``Retry-After`` read;
* :mod:`~opencode_memoryd.llm.model`: what a chat model is to its callers (protocols);
* :mod:`~opencode_memoryd.llm.modes`: structured-output modes and their negotiation;
* :mod:`~opencode_memoryd.llm.chat`: the chat client (resends, mode fallback);
* :mod:`~opencode_memoryd.llm.recorded`: a chat model whose answers are recorded.
"""
