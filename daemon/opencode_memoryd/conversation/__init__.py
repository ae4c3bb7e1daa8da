"""The conversation as plain values, whatever OpenCode stored it in: sessions, messages and
parts (rows.py), turns and the finished-turn rule (turns.py), the transcript an extractor
reads (transcript.py) and what a session did (activity.py). Pure: no database, no I/O."""
