"""Secret scrubbing: pure functions that replace secrets with placeholders before text reaches the
LLM, the store or the log.
"""
