# Sourced by scripts/test.sh: install the Debian packages the tests need (requirements/debian.txt)
# when any is missing. CI and developer machines run as root with apt; anywhere else the missing
# packages are named and the tests that need them report it (they do not silently pass).
# requirements/debian.txt: one package a line, `#` starts a comment.

fumarole_system_packages() {
    local root="$1"
    local list="$root/requirements/debian.txt"
    [ -f "$list" ] || return 0
    local missing=()
    local pkg
    while read -r pkg; do
        pkg="${pkg%%#*}"
        pkg="${pkg//[[:space:]]/}"
        [ -n "$pkg" ] || continue
        if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
            missing+=("$pkg")
        fi
    done <"$list"
    [ "${#missing[@]}" -eq 0 ] && return 0
    if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
        echo "==> missing Debian packages (not root or no apt-get): ${missing[*]}" >&2
        return 0
    fi
    echo "==> installing Debian packages: ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
}
