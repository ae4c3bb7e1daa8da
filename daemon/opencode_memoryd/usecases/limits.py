"""Upper bounds of the history use cases' ``limit`` (a larger one is lowered to these,
not refused); here so the CLI can name them in ``--help`` without loading the use cases."""

MAX_SESSIONS = 200
MAX_MESSAGES = 200
MAX_HITS = 100
