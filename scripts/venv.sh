# Sourced by scripts/run.sh and scripts/test.sh: create the repository's virtualenv on first use
# and install one of the two hash-checked locks into it, plus fumarole itself, editable:
#   fumarole_venv ROOT runtime   requirements/runtime.txt: what the daemon needs (scripts/run.sh)
#   fumarole_venv ROOT dev       requirements/dev.txt: runtime + the test tools (scripts/test.sh)
# Both use one directory, ROOT/.venv ($FUMAROLE_VENV to choose another). The dev lock holds every
# runtime pin at the same version (tests/deploy/test_lock.py), so a dev venv serves `run` as it
# is, and a venv once installed for the tests stays a test venv: a later run.sh, even after a
# lock change, reinstalls the dev lock rather than the runtime one. test.sh on a runtime venv
# adds the dev lock on top. Needs only python3 ($FUMAROLE_PYTHON to choose another).
# Progress goes to stderr. Refresh the locks with `bash scripts/lock.sh` after changing
# dependencies in pyproject.toml.

fumarole_venv_dir() {
    echo "${FUMAROLE_VENV:-$1/.venv}"
}

# The stamp of a LEVEL install: it changes with pyproject.toml, that level's lock, or a root
# package appearing (the editable install maps only the packages that existed when it ran).
fumarole_venv_hash() {
    local root="$1" level="$2"
    (cd "$root" && "${FUMAROLE_PYTHON:-python3}" - "$level" <<'EOF'
import hashlib, os, sys
h = hashlib.sha256()
for f in ("pyproject.toml", f"requirements/{sys.argv[1]}.txt"):
    h.update(open(f, "rb").read())
for pkg in ("fumarole", "daemon", "store", "api"):
    h.update(b"%s:%d" % (pkg.encode(), os.path.exists(os.path.join(pkg, "__init__.py"))))
print(h.hexdigest())
EOF
    )
}

# What fumarole_venv ROOT LEVEL has to do: prints `ready`, or the level to install (runtime|dev).
fumarole_venv_plan() {
    local root="$1" level="$2"
    local venv stamp have="" have_hash=""
    venv="$(fumarole_venv_dir "$root")"
    stamp="$venv/.fumarole-install-stamp"
    if [ -x "$venv/bin/python" ] && [ -f "$stamp" ]; then
        read -r have have_hash <"$stamp" || true
        if [ -z "$have_hash" ]; then
            # a stamp from before the two locks: one hash, of a dev install
            have_hash="$have"
            have="dev"
        fi
    fi
    # a dev venv stays dev; a runtime one is upgraded when the tests ask
    local want="$level"
    [ "$have" = "dev" ] && want="dev"
    if [ "$have" = "$want" ] && [ "$have_hash" = "$(fumarole_venv_hash "$root" "$want")" ]; then
        echo ready
    else
        echo "$want"
    fi
}

fumarole_venv() {
    local root="$1" level="${2:?fumarole_venv ROOT runtime|dev}"
    local venv plan
    venv="$(fumarole_venv_dir "$root")"
    if [ ! -x "$venv/bin/python" ]; then
        echo "==> creating $venv" >&2
        "${FUMAROLE_PYTHON:-python3}" -m venv "$venv"
    fi
    plan="$(fumarole_venv_plan "$root" "$level")"
    if [ "$plan" != ready ]; then
        local lock="requirements/$plan.txt"
        echo "==> installing $lock and fumarole (editable) into $venv" >&2
        local pip=("$venv/bin/python" -m pip --quiet --disable-pip-version-check)
        (
            cd "$root"
            # Exactly the locked versions, every file checked against its sha256.
            "${pip[@]}" install --require-hashes -r "$lock"
            "${pip[@]}" install --no-deps -e .
            if ! "${pip[@]}" check >&2; then
                echo "$lock does not satisfy pyproject.toml: run bash scripts/lock.sh" >&2
                exit 1
            fi
        ) >&2
        echo "$plan $(fumarole_venv_hash "$root" "$plan")" >"$venv/.fumarole-install-stamp"
    fi
    export PATH="$venv/bin:$PATH"
    export VIRTUAL_ENV="$venv"
}
