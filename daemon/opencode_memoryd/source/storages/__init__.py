"""OpenCode's storages of turns (1.x ``message``/``part``, v2 ``session_message``), one
strategy each behind the protocol of :mod:`.base`, registered in :mod:`.registry`; the
session tables in :mod:`.sessions`."""
