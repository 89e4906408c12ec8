"""The command line (`fumarole …`): one module per subcommand, the dry run and its tables.

`main` and `build_parser` are the entry points (pyproject's console script is `fumarole.daemon.cli:main`).
"""

from __future__ import annotations

from fumarole.daemon.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
