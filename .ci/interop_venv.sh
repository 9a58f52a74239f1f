#!/usr/bin/env bash
# Build (or reuse) the venv that runs the interop tests (HolisticTraceAnalysis reading our traces),
# outside the repo (.ci/venv_lib.sh). HTA pulls ~90 packages (jupyterlab, plotly, ...): installing them
# into the main venv on every CI run cost ~60 s; cached here, it costs that once per deps list.
#
# Usage: bash .ci/interop_venv.sh    Prints the venv path as the only line on stdout.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/venv_lib.sh"

cached_venv interop "$repo/tests/interop-envs/hta-deps.txt" \
    "import hta.trace_analysis, torch, wrapt, msgspec, pytest" \
    torch==2.13.0
install_project
echo "$venv"
