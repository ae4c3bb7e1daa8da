"""OpenCode databases: discovery, schema detection, read-only reading, watching, turns and
transcripts.
"""
