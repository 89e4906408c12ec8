#!/usr/bin/env bash
# Refresh the dependency locks from pyproject.toml:
#   requirements/runtime.txt  what the daemon needs (runtime + the kubernetes extra): what scripts/run.sh,
#                             the container image and the systemd install (docs/daemon.md) install
#   requirements/dev.txt      runtime + dev (the test tools), the same versions: what scripts/test.sh installs
# Both are universal (every platform, Python >= 3.11) and carry sha256 hashes. Pins already in the
# files are kept unless pyproject.toml needs otherwise; `bash scripts/lock.sh --upgrade` moves
# everything to the newest allowed versions, `--upgrade-package NAME` one package.
# Needs only python3: uv (the resolver) is installed into a throwaway virtualenv.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
UV_VERSION="0.13.9"

TOOLS="$(mktemp -d)"
trap 'rm -rf "$TOOLS"' EXIT
"${FUMAROLE_PYTHON:-python3}" -m venv "$TOOLS/venv"
"$TOOLS/venv/bin/python" -m pip install --quiet --disable-pip-version-check "uv==$UV_VERSION"
UV="$TOOLS/venv/bin/uv"

compile() {
    "$UV" pip compile --quiet --universal --python-version 3.11 --generate-hashes \
        --custom-compile-command "bash scripts/lock.sh" "$@"
}
mkdir -p requirements
compile pyproject.toml --extra dev -o requirements/dev.txt "$@"
# The runtime lock is resolved under the dev lock, so both name the same version of every package;
# it carries the kubernetes extra, since the image is what deploy/kubernetes/ runs.
compile pyproject.toml --extra kubernetes -c requirements/dev.txt -o requirements/runtime.txt
echo "locked: requirements/dev.txt, requirements/runtime.txt"
