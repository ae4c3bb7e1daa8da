"""Consolidation of the store: grouping, planning, checks, apply/undo and the dream journal."""
