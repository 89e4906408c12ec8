#!/usr/bin/env bash
# Run the `fumarole` command from the repository's virtualenv, creating it if needed.
# Usage: scripts/run.sh [fumarole args...]   (no args: `fumarole run`, the daemon on the bundled simulation)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# --- virtualenv bootstrap (same as scripts/test.sh) ------------------------------------------
VENV="$ROOT/.venv"
STAMP="$VENV/.fumarole-install-stamp"
if [ ! -x "$VENV/bin/python" ]; then
    echo "==> creating $VENV" >&2
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
    echo "==> installing fumarole[dev] into $VENV (pyproject.toml or the package set changed)" >&2
    (cd "$ROOT" && "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e '.[dev]') >&2
    echo "$WANT" >"$STAMP"
fi
export PATH="$VENV/bin:$PATH"
export VIRTUAL_ENV="$VENV"

# Arguments are passed through untouched, relative to the caller's directory.
if [ "$#" -eq 0 ]; then
    set -- run
fi
exec fumarole "$@"
