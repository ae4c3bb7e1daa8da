"""opencode-memoryd: durable memories extracted from OpenCode sessions."""

__version__ = "0.1.0"
