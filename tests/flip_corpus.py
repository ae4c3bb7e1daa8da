"""Labelled pairs for the extraction gate: (what the user said, a memory a model proposes).

``FLIPS`` turn the user's words around (negation added or removed, always/never,
must/must not, a preference or an order reversed, enable/disable and other opposites,
a permission made a rule): each must be refused. ``FAITHFUL`` restate the user's words
(third person, framing, synonyms of the same polarity, double negatives): each must be
kept. Used by ``tests/test_flips.py``; ``bench``-style rates are printed by it with ``-s``.
"""

from __future__ import annotations

FLIPS: list[tuple[str, str]] = [
    # negation removed / added
    ("Never force-push to main.", "Always force-push to main."),
    ("Never force-push to main.", "Force-push to main."),
    ("Do not commit the .env file.", "Commit the .env file."),
    ("Don't use mocks in the integration tests.", "Use mocks in the integration tests."),
    ("We don't deploy on Fridays.", "The team deploys on Fridays."),
    ("The API must not return stack traces.", "The API must return stack traces."),
    ("You should not edit generated files by hand.",
     "Generated files should be edited by hand."),
    ("Please avoid global state in the parser.", "Use global state in the parser."),
    ("Use the staging database for load tests.",
     "Never use the staging database for load tests."),
    ("Run the migrations before the seed script.",
     "Do not run the migrations before the seed script."),
    ("I like tabs for indentation in Go files.", "The user does not like tabs for "
     "indentation in Go files."),
    ("Squash commits when merging feature branches.",
     "Don't squash commits when merging feature branches."),
    ("The cache can be shared between workers.",
     "The cache cannot be shared between workers."),
    ("Log request bodies in debug mode.", "Never log request bodies in debug mode."),
    ("Do not retry payment calls automatically.", "Retry payment calls automatically."),
    ("Keep the changelog updated with every release.",
     "Don't keep the changelog updated with every release."),
    ("Nobody should push directly to the release branch.",
     "Everybody should push directly to the release branch."),
    ("Never run the e2e suite against production.",
     "Run the e2e suite against production."),
    # always <-> never, must <-> must not
    ("Always run ruff before committing.", "Never run ruff before committing."),
    ("Always pin dependency versions in requirements.txt.",
     "Never pin dependency versions in requirements.txt."),
    ("Every migration must be reversible.", "Migrations must not be reversible."),
    ("The handlers must validate the input schema.",
     "The handlers must not validate the input schema."),
    ("Tests must not touch the network.", "Tests must touch the network."),
    ("Secrets must never be written to the logs.", "Secrets must always be written to the "
     "logs."),
    # modality: a permission made a rule, a rule made a permission
    ("You may skip the slow tests locally.", "Always skip the slow tests locally."),
    ("Sometimes we rebase the feature branch on main.",
     "Always rebase the feature branch on main."),
    ("The reviewers must approve every schema change.",
     "The reviewers may approve schema changes."),
    ("Type hints are optional in the scripts folder.",
     "Type hints are required in the scripts folder."),
    # opposite pairs
    ("Enable strict mode in tsconfig.", "Disable strict mode in tsconfig."),
    ("Disable telemetry in the CLI.", "Enable telemetry in the CLI."),
    ("Allow CORS from the admin domain.", "Deny CORS from the admin domain."),
    ("Exclude the vendor folder from coverage.", "Include the vendor folder in coverage."),
    ("Turn the feature flag on for beta users.", "Turn the feature flag off for beta users."),
    ("Set debug to false in production.", "Set debug to true in production."),
    ("Add the trailing slash to API routes.", "Remove the trailing slash from API routes."),
    ("Make the bucket private.", "Make the bucket public."),
    ("Hide the internal endpoints from the docs.", "Show the internal endpoints in the "
     "docs."),
    # preference and order reversed
    ("Prefer pnpm over npm.", "The user prefers npm over pnpm."),
    ("Prefer composition over inheritance.", "Prefer inheritance over composition."),
    ("Use httpx rather than requests.", "Use requests rather than httpx."),
    ("Use structlog instead of the logging module.",
     "Use the logging module instead of structlog."),
    ("Run lint before the unit tests.", "Run the unit tests before lint."),
    ("Build the frontend after the backend.", "Build the frontend before the backend."),
    ("Prefer dataclasses over dicts for configs.", "Prefer dicts over dataclasses for "
     "configs."),
]

FAITHFUL: list[tuple[str, str]] = [
    ("Never force-push to main.", "Never force-push to main."),
    ("Never force-push to main.", "The user does not want force-pushes to main."),
    ("Don't force-push to main, ever.", "Never force-push to main."),
    ("Do not commit the .env file.", "Never commit the .env file."),
    ("Don't use mocks in the integration tests.",
     "Avoid mocks in the integration tests."),
    ("Please avoid global state in the parser.", "Do not use global state in the parser."),
    ("Always run ruff before committing.", "The user always runs ruff before committing."),
    ("Always run ruff before committing.", "Run ruff before every commit."),
    ("Tests must not touch the network.", "Tests must never touch the network."),
    ("Tests must not touch the network.", "Tests do not touch the network."),
    ("Prefer pnpm over npm.", "The user prefers pnpm over npm."),
    ("Prefer pnpm over npm.", "Use pnpm rather than npm."),
    ("Use httpx rather than requests.", "The project uses httpx instead of requests."),
    ("Run lint before the unit tests.", "Run the unit tests after lint."),
    ("Enable strict mode in tsconfig.", "Strict mode is enabled in tsconfig."),
    ("Disable telemetry in the CLI.", "Telemetry is disabled in the CLI."),
    ("Disable telemetry in the CLI.", "Do not enable telemetry in the CLI."),
    ("Exclude the vendor folder from coverage.", "The vendor folder is excluded from "
     "coverage."),
    ("Don't forget to run the migrations.", "Remember to run the migrations."),
    ("Never skip the type checks.", "Always run the type checks, never skip them."),
    ("We deploy with helm to the eu-west-1 cluster.",
     "The project deploys with helm to eu-west-1."),
    ("Use pnpm, never npm.", "The project uses pnpm."),
    ("Use pnpm, never npm.", "The project uses pnpm, not npm."),
    ("Secrets must never be written to the logs.", "Secrets are never logged."),
    ("Set debug to false in production.", "Debug is false in production."),
    ("The cache can be shared between workers.", "Workers can share the cache."),
    ("You may skip the slow tests locally.", "The slow tests can be skipped locally."),
    ("Every migration must be reversible.", "Migrations must be reversible."),
    ("Keep the changelog updated with every release.",
     "The changelog is updated with every release."),
    ("Make the bucket private.", "The bucket is private."),
    ("Prefer composition over inheritance.", "Composition is preferred over inheritance."),
    ("No, use Postgres for the events table.", "The events table uses Postgres."),
    ("Build the frontend after the backend.", "Build the backend before the frontend."),
    ("I like tabs for indentation in Go files.", "The user likes tabs for indentation in "
     "Go files."),
    ("Log request bodies in debug mode.", "Request bodies are logged in debug mode."),
    ("The handlers must validate the input schema.",
     "Handlers must always validate the input schema."),
    ("Do not retry payment calls automatically.",
     "Payment calls are not retried automatically."),
    ("Allow CORS from the admin domain.", "CORS is allowed from the admin domain."),
    ("Nobody should push directly to the release branch.",
     "No one should push directly to the release branch."),
    ("Hide the internal endpoints from the docs.", "The internal endpoints are hidden from "
     "the docs."),
    ("dont forget that staging is on eu-west-1", "Staging is on eu-west-1."),
    ("Dont forget to tag the release after merging!!", "Tag the release after merging."),
]
