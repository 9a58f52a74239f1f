# Sourced by .ci/sglang_venvs.sh and .ci/torch_floor_venv.sh: one cached virtualenv per (kind, version),
# outside the repo, with this project reinstalled into it on every call.
#
# Why a cache: each venv is 2-5 GB (torch, triton, sglang or CUDA libraries). The directory name carries
# a hash of the deps list, of the calling script and of this file, so a change to any of them builds a
# fresh venv and stale ones of the same name are removed. Only the project itself is reinstalled on
# every call (non-editable, --no-deps), because it changes with every commit and its .pth start-up hook
# and entry points must really be installed, as for a user.
#
# Environment: SGLANG_CAPTURE_TRACE_VENV_CACHE (default ~/.cache/sglang-capture-trace),
#              PYTHON (default python3; must be the interpreter the deps lists were made for).

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${PYTHON:-python3}"
cache="${SGLANG_CAPTURE_TRACE_VENV_CACHE:-$HOME/.cache/sglang-capture-trace}"

# Build tools to install us without build isolation (hatchling + packaging + pathspec + pluggy +
# trove-classifiers) and pytest (+ iniconfig, packaging, pluggy) to run the tests.
tools=(hatchling==1.33.0 packaging==26.4 pathspec==1.1.1 pluggy==1.7.0 trove-classifiers==2026.9.21.13
       pytest==9.2.0 iniconfig==2.3.1)

quiet() { grep -v "is ignored: it is neither a file nor a directory" >&2 || true; }

# cached_venv NAME DEPS_LIST CHECK_CODE PACKAGE...: set $venv to a complete venv holding PACKAGE... and
# DEPS_LIST (both --no-deps), building it when missing; CHECK_CODE is Python that must run in it.
cached_venv() {
    local name="$1" deps="$2" check="$3"
    shift 3
    [ -f "$deps" ] || { echo "no deps list: $deps" >&2; exit 2; }
    mkdir -p "$cache"
    local hash
    hash="$( { cat "$deps" "${BASH_SOURCE[0]}" "${BASH_SOURCE[1]}"; printf '%s\n' "$@" "${tools[@]}";
               "$python" -c 'import sys; print(sys.version)'; } | sha256sum | cut -c1-12)"
    venv="$cache/venv-$name-$hash"
    local marker="$venv/.sglang-capture-trace-complete"
    exec 9>"$cache/.lock-$name"
    flock 9
    if [ -f "$marker" ]; then
        echo "reusing $venv" >&2
        return
    fi
    local start=$SECONDS old
    rm -rf "$venv"
    for old in "$cache"/venv-"$name"-*; do
        [ -e "$old" ] && [ "$old" != "$venv" ] && { echo "removing stale $old" >&2; rm -rf "$old"; }
    done
    echo "building $venv" >&2
    "$python" -m venv "$venv"
    "$venv/bin/pip" install -q --no-deps "$@" "${tools[@]}" 2>&1 | quiet
    "$venv/bin/pip" install -q --no-deps -r "$deps" 2>&1 | quiet
    "$venv/bin/python" -c "$check" >&2  # fail here, not in the tests
    touch "$marker"
    echo "built $name venv in $((SECONDS - start)) s" >&2
}

# install_project: this checkout into $venv, built from a clean copy (an in-tree build/ directory could
# ship files deleted since; the worktree's own venvs stay behind).
install_project() {
    local start=$SECONDS
    project_src="$(mktemp -d)"  # global: the EXIT trap runs after this function has returned
    trap 'rm -rf "$project_src"' EXIT
    tar -C "$repo" --exclude=./.git --exclude='./.venv*' --exclude=./build --exclude='*.egg-info' \
        --exclude=__pycache__ -cf - . | tar -C "$project_src" -xf -
    "$venv/bin/pip" install -q --no-deps --no-build-isolation --force-reinstall "$project_src" 2>&1 | quiet
    echo "installed sglang-capture-trace into it in $((SECONDS - start)) s" >&2
}
