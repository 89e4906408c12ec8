"""`python -m fumarole.daemon.cli …`: `fumarole` without the console script (serve's workers use it)."""

from __future__ import annotations

import sys

from fumarole.daemon.cli.main import main

sys.exit(main())
