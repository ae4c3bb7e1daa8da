"""``doctor``: checks of everything capture depends on, each ending ``ok``, ``warn``,
``fail`` or ``skip`` with one line of what to do (:mod:`.runner` runs them)."""
