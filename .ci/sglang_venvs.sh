#!/usr/bin/env bash
# Build (or reuse) one virtualenv per sglang version for tests/sglang, outside the repo (.ci/venv_lib.sh).
#
# Usage: bash .ci/sglang_venvs.sh VERSION
#   Prints the venv path as the only line on stdout (progress goes to stderr).
#   VERSION needs tests/sglang-envs/sglang-VERSION-cpu-deps.txt (CPU deps that import that version's
#   runner modules with torch 2.13.0 CPU; made by installing sglang --no-deps and adding what its
#   runner modules' imports need, see docs/DESIGN.md §5).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/venv_lib.sh"

version="${1:?usage: $0 SGLANG_VERSION}"
# torch: the local CPU wheel; wrapt: our runtime dependency (the test env runs our import hooks).
cached_venv "$version" "$repo/tests/sglang-envs/sglang-$version-cpu-deps.txt" \
    "import importlib.util as u, torch, wrapt, pytest; assert u.find_spec('sglang')" \
    torch==2.13.0 "sglang==$version" wrapt==2.5.2
install_project
echo "$venv"
