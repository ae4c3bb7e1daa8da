"""The daemon's own state file: high-water marks, the outbox, the work queue and runs.

Open it with :class:`opencode_memoryd.state.db.StateDB`. Modules:

* :mod:`~opencode_memoryd.state.engine`: the engine, PRAGMAs and transactions;
* :mod:`~opencode_memoryd.state.migrations`: the schema's numbered steps, each run once
  and recorded;
* :mod:`~opencode_memoryd.state.items`: high-water marks and the transactional outbox;
* :mod:`~opencode_memoryd.state.queue`: the work queue;
* :mod:`~opencode_memoryd.state.runs`: runs and dream runs;
* :mod:`~opencode_memoryd.state.failures`: chunks that keep failing, tokens of failed calls;
* :mod:`~opencode_memoryd.state.llm`: the structured-output mode per LLM endpoint and model;
* :mod:`~opencode_memoryd.state.db`: :class:`~opencode_memoryd.state.db.StateDB`, all of
  the above on one file.
"""
