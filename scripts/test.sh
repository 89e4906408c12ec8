#!/usr/bin/env bash
# Fumarole's test command: lint, format check, types, import contracts, then pytest.
# Usage: scripts/test.sh [pytest args...]   (works from any directory)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

# --- virtualenv bootstrap: .venv with the dev lock: runtime + test tools (scripts/venv.sh) -----
# shellcheck source=scripts/venv.sh
source "$ROOT/scripts/venv.sh"
fumarole_venv "$ROOT" dev

# --- Debian packages the tests need (requirements/debian.txt), installed when missing ----------
# shellcheck source=scripts/system.sh
source "$ROOT/scripts/system.sh"
fumarole_system_packages "$ROOT"

# --- checks ----------------------------------------------------------------------------------
FAILED=()

step() {
    local name="$1"
    shift
    echo
    echo "==> $name"
    if "$@"; then
        echo "--- ok: $name"
    else
        echo "--- FAILED: $name"
        FAILED+=("$name")
    fi
}

step "ruff check" ruff check .
step "ruff format --check" ruff format --check .
step "mypy daemon store api" mypy daemon store api
step "lint-imports" lint-imports

echo
echo "==> pytest"
# Both cores (pytest-xdist): each test file runs whole on one worker, so its module fixtures are
# built once. FUMAROLE_TEST_WORKERS=0 runs everything in this process (e.g. to use a debugger).
WORKERS="${FUMAROLE_TEST_WORKERS:-2}"
set +e
pytest -n "$WORKERS" --dist loadfile --durations=15 "$@"
PYTEST_RC=$?
set -e
# the dashboard tests' screenshots (tests/ui/ui_kit.py): collect this directory as CI artefacts
SHOTS="${FUMAROLE_ARTIFACTS:-$ROOT/artifacts}/ui"
if [ -d "$SHOTS" ]; then
    echo "--- dashboard screenshots: $SHOTS ($(find "$SHOTS" -name '*.png' | wc -l) PNG files)"
fi
if [ "$PYTEST_RC" -eq 5 ]; then
    echo "--- ok: pytest collected no tests (exit 5 treated as success)"
elif [ "$PYTEST_RC" -ne 0 ]; then
    FAILED+=("pytest (exit $PYTEST_RC)")
fi

if [ "${#FAILED[@]}" -ne 0 ]; then
    echo
    echo "FAILED steps: ${FAILED[*]}"
    exit 1
fi
