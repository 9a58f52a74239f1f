#!/usr/bin/env bash
# Build (or reuse) the venv that runs tests/analysis WITHOUT torch (the analyzer needs none; the tests read
# committed traces: tests/data/PROVENANCE.md), outside the repo (.ci/venv_lib.sh). Nor isal: the stdlib
# gzip reader runs there for real.
#
# Usage: bash .ci/analysis_venv.sh    Prints the venv path as the only line on stdout.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/venv_lib.sh"

cached_venv analysis-no-torch "$repo/tests/analysis-envs/no-torch-deps.txt" \
    "import importlib.util as u, wrapt, msgspec, rich, plotly, PIL, bs4, hypothesis, xdist; assert u.find_spec('numpy') and u.find_spec('torch') is None"
install_project
echo "$venv"
