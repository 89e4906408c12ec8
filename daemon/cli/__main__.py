"""`python -m daemon.cli …`: the `fumarole` command without the console script (serve's workers use it)."""

from __future__ import annotations

import sys

from daemon.cli.main import main

sys.exit(main())
