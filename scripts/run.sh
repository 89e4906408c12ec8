#!/usr/bin/env bash
# Run the `fumarole` command from the repository's virtualenv, creating it if needed.
# Usage: scripts/run.sh [fumarole args...]   (no args: `fumarole run`, the daemon on the bundled simulation)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# --- virtualenv bootstrap: .venv with the runtime lock (scripts/venv.sh) ---------------------
# shellcheck source=scripts/venv.sh
source "$ROOT/scripts/venv.sh"
fumarole_venv "$ROOT" runtime

# Arguments are passed through untouched, relative to the caller's directory.
if [ "$#" -eq 0 ]; then
    set -- run
fi
exec fumarole "$@"
