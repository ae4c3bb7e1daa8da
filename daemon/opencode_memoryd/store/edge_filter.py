"""The store's :class:`~opencode_memoryd.store.api.MemoryFilter` as a Qdrant Edge filter
(part of the embedded store adapter, :mod:`opencode_memoryd.store.edge`)."""

from __future__ import annotations

import qdrant_edge as qe

from opencode_memoryd.store.api import ACTIVE, RETIRED, MemoryFilter


def edge_filter(flt: MemoryFilter | None) -> qe.Filter | None:
    """The Edge filter matching what ``flt`` selects (``None``: the active memories), or
    ``None`` when nothing is to be filtered."""
    flt = flt or ACTIVE
    must: list[qe.ConditionType] = []
    if flt.scope is not None:
        must.append(qe.FieldCondition("scope", match=qe.MatchValue(flt.scope)))
    if flt.types:
        must.append(qe.FieldCondition("type", match=qe.MatchAny(list(flt.types))))
    if flt.project_id is not None:
        proj = qe.FieldCondition("project_id", match=qe.MatchValue(flt.project_id))
        if flt.include_user_scope:
            user = qe.FieldCondition("scope", match=qe.MatchValue("user"))
            must.append(qe.Filter(should=[proj, user]))
        else:
            must.append(proj)
    if flt.user_id is not None and flt.scope != "project":
        # project memories are shared; user-scope ones must be this user's
        must.append(qe.Filter(should=[
            qe.FieldCondition("scope", match=qe.MatchValue("project")),
            qe.FieldCondition("user_id", match=qe.MatchValue(flt.user_id)),
        ]))
    if flt.without_user_id:
        must.append(qe.IsEmptyCondition("user_id"))
    if flt.without_section:
        must.append(qe.IsEmptyCondition("section"))
    must_not: list[qe.ConditionType] = []
    if not flt.include_retired:
        must_not.append(qe.FieldCondition("status", match=qe.MatchValue(RETIRED)))
    if not (must or must_not):
        return None
    return qe.Filter(must=must or None, must_not=must_not or None)
