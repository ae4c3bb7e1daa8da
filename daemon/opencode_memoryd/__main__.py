"""Allow ``python -m opencode_memoryd``."""

from opencode_memoryd.cli.main import main

raise SystemExit(main())
