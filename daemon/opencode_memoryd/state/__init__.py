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
* :mod:`~opencode_memoryd.state.agent`, :mod:`~opencode_memoryd.state.replies`,
  :mod:`~opencode_memoryd.state.secrets`, :mod:`~opencode_memoryd.state.recall`: the
  agent's forgets, recorded LLM answers, session secrets, recall parts;
* :mod:`~opencode_memoryd.state.db`: :class:`~opencode_memoryd.state.db.StateDB`, which
  opens the file and composes one repository per module above (``state.marks``,
  ``state.outbox``, ``state.queue``, …), all on one
  :class:`~opencode_memoryd.state.engine.StateFile`.
"""
