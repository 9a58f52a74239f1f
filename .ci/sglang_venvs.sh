#!/usr/bin/env bash
# Build (or reuse) one virtualenv per sglang version for tests/sglang, outside the repo (.ci/venv_lib.sh).
#
# Usage: bash .ci/sglang_venvs.sh VERSION [TORCH]
#   Prints the venv path as the only line on stdout (progress goes to stderr).
#   VERSION needs tests/sglang-envs/sglang-VERSION-cpu-deps.txt (CPU deps that import that version's
#   runner modules with torch 2.13.0 CPU; made by installing sglang --no-deps and adding what its
#   runner modules' imports need, see docs/DESIGN.md §5).
#   TORCH (default: the local CPU wheel, 2.13.0) runs the suite on another torch instead, e.g. 2.14.1, the
#   one sglang 0.5.23 pins: tests/torch-envs/torch-TORCH-deps.txt (torch and its exact dependencies, as
#   for the torch floor) replaces the torch-tied pins of the sglang list (a package in both lists takes
#   the torch list's version), with the torchvision built for that torch.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/venv_lib.sh"

version="${1:?usage: $0 SGLANG_VERSION [TORCH]}"
torch="${2:-}"
deps="$repo/tests/sglang-envs/sglang-$version-cpu-deps.txt"
check="import importlib.util as u, torch, wrapt, pytest; assert u.find_spec('sglang')"
if [ -z "$torch" ]; then
    # torch: the local CPU wheel; wrapt: our runtime dependency (the test env runs our import hooks).
    cached_venv "$version" "$deps" "$check" torch==2.13.0 "sglang==$version" wrapt==2.5.2
else
    declare -A torchvision_for=([2.14.1]=0.29.1)
    [ -n "${torchvision_for[$torch]:-}" ] || { echo "no torchvision known for torch $torch" >&2; exit 2; }
    torch_deps="$repo/tests/torch-envs/torch-$torch-deps.txt"
    [ -f "$torch_deps" ] || { echo "no deps list: $torch_deps" >&2; exit 2; }
    # One list for cached_venv to hash (kept in the cache, rewritten each call, as the server venv does).
    mkdir -p "$cache"
    combined="$cache/sglang-$version-torch-$torch-deps.txt"
    awk -v torchvision="torchvision==${torchvision_for[$torch]}" '
        function name(line) { sub(/[=<>!~ ;].*/, "", line); gsub(/_/, "-", line); return tolower(line) }
        /^[[:space:]]*(#|$)/ { next }
        FNR == NR { pinned[name($0)] = 1; print; next }
        !(name($0) in pinned) && name($0) != "torchvision" { print }
        END { print torchvision }' "$torch_deps" "$deps" > "$combined.$$"
    mv -f "$combined.$$" "$combined"
    cached_venv "sglang-$version-torch-$torch" "$combined" "$check; assert torch.__version__.startswith('$torch')" \
        "sglang==$version" wrapt==2.5.2
fi
install_project
echo "$venv"
