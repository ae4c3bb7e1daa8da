"""Value changes: a fact that gives a value slot (a URL, a port, a branch …) a new value
replaces the older fact that gives it another; nothing else does."""

from __future__ import annotations

import pytest

from opencode_memoryd.extract.slots import replaces_value, slot_change, slot_value
from opencode_memoryd.extract.supersede import corrects


@pytest.mark.parametrize(("new", "old"), [
    ("The staging URL is now staging2.acme.dev.", "The staging URL is staging.acme.dev."),
    ("The staging URL changed to staging2.acme.dev.", "The staging URL is staging.acme.dev."),
    ("The default branch is main now.", "The default branch is master."),
    ("The new API port is 8080.", "The API port is 3000."),
    ("Our Node version is now 22.", "Our Node version is 18."),
    ("The dev server port has been changed to 5173.", "The dev server port is 3000."),
    ("The test command is now `make check`.", "The test command is `make test`."),
    ("The registry is now ghcr.io.", "The registry: docker.io"),
    ("My editor is now Helix.", "My editor is Neovim."),
    ("The editor is now VS Codium.", "The editor is VS Code."),       # a name of two words
    ("My shell is now fish.", "My shell is zsh."),
    ("The staging URL is staging3.acme.dev from now on.",
     "The staging URL is now staging2.acme.dev."),
])
def test_a_new_value_replaces_the_old_one(new: str, old: str) -> None:
    assert replaces_value(new, old)
    assert corrects(new, old)


@pytest.mark.parametrize(("new", "old"), [
    ("The API is now paginated.", "The API is REST."),               # no value slot
    ("The staging URL is now staging2.acme.dev.", "The prod URL is acme.dev."),  # another slot
    ("The staging URL is now staging2.acme.dev.", "The staging URL is staging2.acme.dev."),
    ("The timeout is now longer.", "The timeout is 30s."),            # no value
    ("The staging URL is staging2.acme.dev.", "The staging URL is staging.acme.dev."),  # no cue
    ("The staging URL for admins is now admin.acme.dev.", "The staging URL is staging.acme.dev."),
    ("The port is now 8080.", "Deploys go through port 22."),         # not stated at its start
    # a state or a quality is no value, on either side
    ("The default branch is now main.",
     "The default branch is protected; never push to it directly."),
    ("The port is now 8080.", "The port is set in .env, never hard-code it."),
    ("The Node version is now 22.", "The Node version is pinned in .nvmrc."),
    ("The registry is now ghcr.io.", "The registry is private, log in first."),
    ("The database is now locked.", "The database is PostgreSQL."),
    ("The command is now failing.", "The command is `make test`."),
    ("The port is now open.", "The port is 8080."),
    ("So the DB is now empty after the reset.", "The DB is Postgres."),
    ("The new React version is out.", "The React version is 18."),
])
def test_anything_else_replaces_nothing(new: str, old: str) -> None:
    assert not replaces_value(new, old)


def test_slot_and_value_are_folded() -> None:
    assert slot_change("The Staging URL is now Staging2.acme.dev.") == (
        "staging url", "staging2.acme.dev")
    assert slot_value("The staging URL: `https://staging.acme.dev/`", "staging url") == (
        "https://staging.acme.dev")
    assert slot_change("We deploy on Fridays.") is None


def test_a_value_said_as_called_is_the_same_value() -> None:
    assert not replaces_value("The default branch is now `trunk`.",
                              "The default branch is called trunk.")
    assert replaces_value("The default branch is now called main.",
                          "The default branch is called trunk.")
