"""Rules-mode memories keep the dots of identifiers: a Go package pattern (``./...``), a
parent folder (``../``), a git range (``v1.2...v1.3``), while a run of one mark in prose
("Fridays...", "!!", ", ,") still becomes one."""

from __future__ import annotations

import pytest

from opencode_memoryd.extract.rules import directives

#: (message, the memory the rules store).
PAIRS = [
    ("Remember that we run the tests with go test ./... before every push.",
     "We run the tests with go test ./... before every push."),
    ("From now on always run go test ./... before pushing.",
     "Always run go test ./... before pushing."),
    ("Remember: lint with golangci-lint run ./...", "Lint with golangci-lint run ./..."),
    ("Remember that we use `go test -race ./...` in CI.", "We use `go test -race ./...` in CI."),
    ("Remember that the shared config is in ../config/base.json!!",
     "The shared config is in ../config/base.json."),
    ("Remember that release notes come from git log v1.2...v1.3 in the changelog job.",
     "Release notes come from git log v1.2...v1.3 in the changelog job."),
    ("Remember that we deploy on Fridays...", "We deploy on Fridays."),
    ("Remember that we deploy on Fridays!!", "We deploy on Fridays."),
    ("Remember: alice, , bob and carol own the billing code,,",
     "Alice, bob and carol own the billing code."),
]


@pytest.mark.parametrize(("message", "memory"), PAIRS)
def test_identifier_dots_survive(message: str, memory: str) -> None:
    assert [text for text, _ in directives(message)] == [memory]
