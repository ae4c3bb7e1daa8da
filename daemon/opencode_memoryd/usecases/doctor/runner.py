"""Run every check, each isolated from the others, and return JSON-safe results.

The checks run in the caller's process, never inside the daemon: they judge the daemon
from outside. What needs the embedded store is judged from the daemon's ``status`` answer
while one runs (the caller puts it in :attr:`~.model.Probes.daemon`); otherwise the store
and the state file are opened here, briefly, and nothing that does not exist is created.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from opencode_memoryd.usecases.doctor.files import disk_space_check, file_modes_check
from opencode_memoryd.usecases.doctor.history import last_dream_check, last_extraction_check
from opencode_memoryd.usecases.doctor.llm import llm_checks
from opencode_memoryd.usecases.doctor.model import (
    FAIL,
    STATUSES,
    Check,
    Context,
    Probes,
    guarded,
)
from opencode_memoryd.usecases.doctor.opencode import opencode_checks
from opencode_memoryd.usecases.doctor.sources import database_checks
from opencode_memoryd.usecases.doctor.store import embedder_check, store_check
from opencode_memoryd.usecases.doctor.system import daemon_check, linger_check, service_check
from opencode_memoryd.usecases.ports import AppPort

CheckFn = Callable[[Context], "Check | Sequence[Check]"]

#: Every check, in the order reported: (the name a failure of the check itself gets, it).
CHECKS: tuple[tuple[str, CheckFn], ...] = (
    ("databases", database_checks),
    ("daemon", daemon_check),
    ("service", service_check),
    ("linger", linger_check),
    ("llm", llm_checks),
    ("embedder", embedder_check),
    ("store", store_check),
    ("plugin", opencode_checks),
    ("file-modes", file_modes_check),
    ("disk-space", disk_space_check),
    ("last-extraction", last_extraction_check),
    ("last-dream", last_dream_check),
)


def run_checks(app: AppPort, probes: Probes,
               checks: Sequence[tuple[str, CheckFn]] = CHECKS) -> list[Check]:
    """Run ``checks`` in order; a check that raises becomes a ``fail`` of its name.

    Returns:
        Every :class:`~.model.Check`, in order.
    """
    ctx = Context(app, probes)
    out: list[Check] = []
    try:
        # the file modes first: opening the state file or the store repairs them
        early = {name: guarded(name, partial(check, ctx)) for name, check in checks
                 if name == "file-modes"}
        for name, check in checks:
            out.extend(early.get(name) or guarded(name, partial(check, ctx)))
    finally:
        ctx.close()
    return out


def doctor(app: AppPort, probes: Probes) -> dict[str, Any]:
    """The ``doctor`` use case.

    Returns:
        ``{"checks": [{"name", "status", "detail", "fix"}, ...], "counts": {"ok": n,
        "skip": n, "warn": n, "fail": n}, "failed": bool}`` (``failed``: some check
        failed; warnings do not count).
    """
    checks = run_checks(app, probes)
    counts = {s: sum(1 for c in checks if c.status == s) for s in STATUSES}
    return {"checks": [c.to_dict() for c in checks], "counts": counts,
            "failed": counts[FAIL] > 0}
