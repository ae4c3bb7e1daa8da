"""End-to-end tests against the genuine OpenCode CLI (a package, so that its ``conftest`` and
modules do not shadow those of ``tests/``)."""
