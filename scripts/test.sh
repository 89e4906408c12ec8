#!/usr/bin/env bash
# Fumarole's test command: lint, format check, types, import contracts, then pytest.
# Usage: scripts/test.sh [pytest args...]   (works from any directory)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

# --- virtualenv bootstrap (same as scripts/run.sh) -------------------------------------------
VENV="$ROOT/.venv"
STAMP="$VENV/.fumarole-install-stamp"
if [ ! -x "$VENV/bin/python" ]; then
    echo "==> creating $VENV"
    "${FUMAROLE_PYTHON:-python3}" -m venv "$VENV"
fi
# Reinstall when pyproject.toml changes, or when a root package appears: the editable install
# maps only the packages that existed when it ran.
WANT="$(cd "$ROOT" && "$VENV/bin/python" -c '
import hashlib, os
h = hashlib.sha256(open("pyproject.toml", "rb").read())
for pkg in ("daemon", "store", "api"):
    h.update(b"%s:%d" % (pkg.encode(), os.path.exists(os.path.join(pkg, "__init__.py"))))
print(h.hexdigest())
')"
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$WANT" ]; then
    echo "==> installing fumarole[dev] into $VENV (pyproject.toml or the package set changed)"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e '.[dev]'
    echo "$WANT" >"$STAMP"
fi
export PATH="$VENV/bin:$PATH"
export VIRTUAL_ENV="$VENV"

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
set +e
pytest "$@"
PYTEST_RC=$?
set -e
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
