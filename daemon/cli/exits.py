"""The command line's exit codes (DESIGN.md's CLI contract) and the bad-input error."""

from __future__ import annotations

import sys

EXIT_OK = 0
EXIT_DIFFERENT = 1  # replay: a recorded cycle re-ran to other decisions
EXIT_FAILED = 1  # run: the daemon stopped on an error
EXIT_BAD_INPUT = 2


class InputError(Exception):
    """Bad input (a file, flag or value): printed as is after 'fumarole: error:', exit code 2."""


def bad_input(message: str) -> int:
    """Print `fumarole: error: <message>` on stderr (one line) and return EXIT_BAD_INPUT."""
    print(f"fumarole: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT
