#!/usr/bin/env bash
# Build (or reuse) one virtualenv per sglang version for tests/sglang, outside the repo.
#
# Usage: bash .ci/sglang_venvs.sh VERSION
#   Prints the venv path as the only line on stdout (progress goes to stderr).
#   VERSION needs tests/sglang-envs/sglang-VERSION-cpu-deps.txt.
#
# Why a cache: each venv is ~2.3 GB and ~60 s to build (torch, triton, sglang). The directory name
# carries a hash of the deps list and of this script, so a change to either builds a fresh venv and
# stale ones of the same version are removed. Only the project itself is reinstalled on every call
# (non-editable, --no-deps), because it changes with every commit and its .pth start-up hook and
# sglang.srt.plugins entry point must really be installed, as for a user.
#
# Environment: SGLANG_CAPTURE_TRACE_VENV_CACHE (default ~/.cache/sglang-capture-trace),
#              PYTHON (default python3; must be the interpreter the deps lists were made for).
set -euo pipefail

version="${1:?usage: $0 SGLANG_VERSION}"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
deps="$repo/tests/sglang-envs/sglang-$version-cpu-deps.txt"
[ -f "$deps" ] || { echo "no deps list: $deps" >&2; exit 2; }
python="${PYTHON:-python3}"
cache="${SGLANG_CAPTURE_TRACE_VENV_CACHE:-$HOME/.cache/sglang-capture-trace}"
mkdir -p "$cache"

quiet() { grep -v "is ignored: it is neither a file nor a directory" >&2 || true; }

# Tools the venv needs beyond sglang's own deps (wrapt: our runtime dep; hatchling + pathspec +
# trove-classifiers (+ packaging, pluggy): build us without build isolation; pytest + iniconfig +
# pluggy: run tests/sglang).
extra=(torch==2.13.0 "sglang==$version" wrapt==2.5.2 pytest==9.2.0 iniconfig==2.3.1 pluggy==1.7.0
       hatchling==1.33.0 pathspec==1.1.1 trove-classifiers==2026.9.21.13)

hash="$( { cat "$deps" "${BASH_SOURCE[0]}"; "$python" -c 'import sys; print(sys.version)'; } \
         | sha256sum | cut -c1-12)"
venv="$cache/venv-$version-$hash"
marker="$venv/.sglang-capture-trace-complete"

exec 9>"$cache/.lock-$version"
flock 9

if [ ! -f "$marker" ]; then
    start=$SECONDS
    rm -rf "$venv"
    for old in "$cache"/venv-"$version"-*; do
        [ -e "$old" ] && [ "$old" != "$venv" ] && { echo "removing stale $old" >&2; rm -rf "$old"; }
    done
    echo "building $venv" >&2
    "$python" -m venv "$venv"
    "$venv/bin/pip" install -q --no-deps "${extra[@]}" 2>&1 | quiet
    "$venv/bin/pip" install -q --no-deps -r "$deps" 2>&1 | quiet
    # fail here, not in the tests (importing sglang itself needs the test shims, so only find it)
    "$venv/bin/python" -c "import importlib.util as u, torch, wrapt, pytest; assert u.find_spec('sglang')" >&2
    touch "$marker"
    echo "built sglang $version venv in $((SECONDS - start)) s" >&2
else
    echo "reusing $venv" >&2
fi

# Build from a clean copy: an in-tree build/ directory could ship files deleted since.
start=$SECONDS
src="$(mktemp -d)"
trap 'rm -rf "$src"' EXIT
tar -C "$repo" --exclude=./.git --exclude='./.venv*' --exclude=./build --exclude='*.egg-info' \
    --exclude=__pycache__ -cf - . | tar -C "$src" -xf -
"$venv/bin/pip" install -q --no-deps --no-build-isolation --force-reinstall "$src" 2>&1 | quiet
echo "installed sglang-capture-trace into it in $((SECONDS - start)) s" >&2
echo "$venv"
