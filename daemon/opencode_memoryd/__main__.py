"""Allow ``python -m opencode_memoryd``."""

from opencode_memoryd.cli import main

raise SystemExit(main())
