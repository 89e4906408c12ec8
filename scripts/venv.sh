# Sourced by scripts/run.sh and scripts/test.sh: create $ROOT/.venv on first use and install the
# locked dependencies (requirements/dev.txt, hash-checked) plus fumarole itself, editable.
# Needs only python3 ($FUMAROLE_PYTHON to choose another). Progress goes to stderr.
# Refresh the lock with `bash scripts/lock.sh` after changing dependencies in pyproject.toml.

fumarole_venv() {
    local root="$1"
    local venv="$root/.venv"
    local stamp="$venv/.fumarole-install-stamp"
    if [ ! -x "$venv/bin/python" ]; then
        echo "==> creating $venv" >&2
        "${FUMAROLE_PYTHON:-python3}" -m venv "$venv"
    fi
    # Reinstall when pyproject.toml or the lock changes, or when a root package appears: the
    # editable install maps only the packages that existed when it ran.
    local want
    want="$(cd "$root" && "$venv/bin/python" -c '
import hashlib, os
h = hashlib.sha256()
for f in ("pyproject.toml", "requirements/dev.txt"):
    h.update(open(f, "rb").read())
for pkg in ("daemon", "store", "api"):
    h.update(b"%s:%d" % (pkg.encode(), os.path.exists(os.path.join(pkg, "__init__.py"))))
print(h.hexdigest())
')"
    if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
        echo "==> installing requirements/dev.txt and fumarole (editable) into $venv" >&2
        local pip=("$venv/bin/python" -m pip --quiet --disable-pip-version-check)
        (
            cd "$root"
            # Exactly the locked versions, every file checked against its sha256.
            "${pip[@]}" install --require-hashes -r requirements/dev.txt
            "${pip[@]}" install --no-deps -e .
            if ! "${pip[@]}" check >&2; then
                echo "requirements/dev.txt does not satisfy pyproject.toml: run bash scripts/lock.sh" >&2
                exit 1
            fi
        ) >&2
        echo "$want" >"$stamp"
    fi
    export PATH="$venv/bin:$PATH"
    export VIRTUAL_ENV="$venv"
}
