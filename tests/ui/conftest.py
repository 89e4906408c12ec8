"""The dashboard's tests share the API's and the end-to-end tests' helpers (tests/api, tests/e2e)."""

import sys
from pathlib import Path

_TESTS = Path(__file__).resolve().parents[1]
for _kit in ("api", "e2e"):
    if str(_TESTS / _kit) not in sys.path:
        sys.path.insert(0, str(_TESTS / _kit))
